"""Composition of a serving run on GPUs (docs/model.md §13.7): a ``GpuInferenceExperimentSpec`` -> the
nodes its layers need (``sim.programs.builders.gpu.gpu_mapping``) -> each stage's station
(``sim.cost.gpu_serving``) -> the one ``ServeBatches`` op through the same scheduler and executors as a
wafer's -> the same ``ServeResult``, its energy a node's (``analysis.gpu_energy``).
These are the steps the one runner (``runner.run``) takes for a serving spec on GPUs (``GPU_SERVING``)."""

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
from .runs import Composer, Options, Run

__all__ = ["GPU_SERVING"]


def _block(spec: Any, mapping: Any) -> dict[str, Any]:
    """The result's ``gpu`` block: how the run is laid on the nodes."""
    tp = mapping.grid[1]
    return {"gpus_per_node": spec.hardware.node.gpus, "tensor_parallel": tp, "kv_shards": kv_shards(spec, tp),
            "nodes": len(mapping.stages), "experts_per_gpu": -(-spec.model.experts // tp),
            "hbm_bytes_per_gpu": spec.hardware.hbm.capacity_bytes}


def _infeasible(spec: Any, mapping: Any, start: float) -> Run:
    """A mapping that does not fit: a result with its reason."""
    return Run(replace(infeasible_serving(spec, mapping, mapping.reason), gpu=_block(spec, mapping)),
               mapping=mapping)


def _build(spec: Any, mapping: Any, options: Options) -> tuple[Any, Any]:
    """(the mapping and each stage's station, the program); ``options.spans``: each iteration's
    requests logged for a trace."""
    stations = gpu_stations(spec, mapping)
    program = gpu_program(spec, mapping, stage_kernels(spec, stations), gpu_token_budget(spec),
                          members=options.spans)
    return (mapping, stations), program


def _cost(spec: Any, plan: Any, program: Any) -> Costs:
    _, stations = plan
    inf = spec.inference
    context = inf.load.prompt_len + max(inf.load.output_len - 1, 1)
    return Costs(stages=tuple(station_costs(st, work, inf.load.prompt_len, context)
                              for st, work in zip(stations, program.body[0].stages, strict=True)))


def _measure(spec: Any, mapping: Any, plan: Any, program: Any, costs: Costs, trace: Any,
             start: float) -> Run:
    """The wafer's ``ServeResult`` with the node's energy and the ``gpu`` block."""
    result = measure_serving(spec, mapping, program, costs, trace, wall_s=time.perf_counter() - start,
                             accounting=GPU_ACCOUNTING)
    assert trace.batches is not None
    used = gpu_seconds(spec.hardware, trace.batches.busy, mapping.grid[1], result.end_to_end_s,
                       mapping.systems)
    return Run(replace(result, gpu={**_block(spec, mapping), **used}), trace, program, costs, mapping=mapping)


GPU_SERVING = Composer(lambda spec, mapping, options: None, lambda spec, options: gpu_mapping(spec),
                       _infeasible, _build, _cost,
                       lambda spec, plan, program, costs: engine_for(spec)(None, program, costs), _measure)
"""A serving run on GPUs, step by step (``runs.compose``): nothing to refuse (a node's stations are few),
the executor the spec names."""
