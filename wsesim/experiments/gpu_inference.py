"""Composition of a serving run on GPUs (docs/model.md §13.7): a ``GpuInferenceExperimentSpec`` -> the
nodes its layers need (``sim.programs.builders.gpu.gpu_mapping``) -> each stage's station
(``sim.cost.gpu_serving``) -> the one ``ServeBatches`` op through the same scheduler and executors as a
wafer's -> the same ``ServeResult``, its energy a node's (``analysis.gpu_energy``).
``experiments.inference.run_inference`` hands a GPU spec here."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ..analysis.gpu_energy import GPU_ACCOUNTING, gpu_seconds
from ..analysis.serving import infeasible_serving, measure_serving
from ..sim.cost.costing import Costs
from ..sim.cost.gpu_serving import gpu_stations, gpu_token_budget, stage_kernels, station_costs
from ..sim.executors.engines import engine_for
from ..sim.programs.builders.gpu import gpu_mapping, gpu_program, kv_shards
from .runs import Run

__all__ = ["run_gpu_inference"]


def _block(spec: Any, mapping: Any) -> dict[str, Any]:
    """The result's ``gpu`` block: how the run is laid on the nodes."""
    tp = mapping.grid[1]
    return {"gpus_per_node": spec.hardware.node.gpus, "tensor_parallel": tp, "kv_shards": kv_shards(spec, tp),
            "nodes": len(mapping.stages), "experts_per_gpu": -(-spec.model.experts // tp),
            "hbm_bytes_per_gpu": spec.hardware.hbm.capacity_bytes}


def run_gpu_inference(spec: Any, *, spans: bool = False) -> Run:
    """Map, build and serve ``spec`` on its GPUs by the executor it names (``simulation.engine``); a
    mapping that does not fit is a result with its reason."""
    t0 = time.perf_counter()
    mapping = gpu_mapping(spec)
    if not mapping.feasible:
        return Run(replace(infeasible_serving(spec, mapping, mapping.reason), gpu=_block(spec, mapping)),
                   mapping=mapping)
    stations = gpu_stations(spec, mapping)
    program = gpu_program(spec, mapping, stage_kernels(spec, stations), gpu_token_budget(spec), members=spans)
    serve = program.body[0]
    inf = spec.inference
    context = inf.load.prompt_len + max(inf.load.output_len - 1, 1)
    costs = Costs(stages=tuple(station_costs(st, work, inf.load.prompt_len, context)
                               for st, work in zip(stations, serve.stages, strict=True)))
    trace = engine_for(spec)(None, program, costs)
    result = measure_serving(spec, mapping, program, costs, trace, wall_s=time.perf_counter() - t0,
                             accounting=GPU_ACCOUNTING)
    assert trace.batches is not None
    used = gpu_seconds(spec.hardware, trace.batches.busy, mapping.grid[1], result.end_to_end_s,
                       mapping.systems)
    return Run(replace(result, gpu={**_block(spec, mapping), **used}), trace, program, costs, mapping=mapping)
