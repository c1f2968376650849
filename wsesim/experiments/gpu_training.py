"""Composition of a training step on a GPU node (docs/model.md §13.8): a ``GpuExperimentSpec`` -> B resolved
against one GPU's HBM (``model.gpu_memory``) -> the routing of the node's tokens -> the training program's
micro-batch (``builders.training.micro_batch_ops``) -> its ops costed on the GPU kernels
(``sim.cost.gpu_training``) -> the same ``RunResult`` as a wafer's step, its energy the node's (each GPU at
its TDP for the step, the node's floor beside). Under ``training.tensor_parallel`` = tp the node is n/tp
data-parallel groups of tp GPUs, and its step n/tp groups' tokens. ``runner.simulate_experiment`` hands a
GPU spec here."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from ..analysis.results import RunResult, base_fields, expert_imbalance, infeasible
from ..kernels.gpu.device import Gpu
from ..model.gpu_memory import gpu_memory, max_gpu_batch, tensor_parallel, tensor_slice
from ..model.routing import route_tokens
from ..model.shapes import LayerShapes
from ..sim.cost.gpu_serving import GPU_DTYPES_BY_BYTES
from ..sim.cost.gpu_training import cost_gpu_step, expert_share
from ..sim.programs.builders.training import micro_batch_ops
from ..sim.programs.plan import StepPlan
from .runs import Run

__all__ = ["gpu_batch", "run_gpu_training"]


def _resolved(spec: Any) -> Any:
    """``spec`` with ``training.tensor_parallel: auto`` replaced by the group size it resolves to."""
    t = spec.training
    if t.tensor_parallel != "auto":
        return spec
    tp = tensor_parallel(spec.hardware, spec.model, t)
    return spec.model_copy(update={"training": t.model_copy(update={"tensor_parallel": tp})})


def _groups(spec: Any) -> int:
    """The node's data-parallel groups: its GPUs over ``training.tensor_parallel``."""
    return spec.hardware.node.gpus // spec.training.tensor_parallel


def _routing(spec: Any, batch_per_tile: int) -> tuple[np.ndarray, float]:
    """The routed slots of the node's tokens (every data-parallel group's G·B·S), ``[layers, experts]``,
    and the busiest GPU's slots over the mean (1 on a dense model)."""
    m, t, n = spec.model, spec.training, spec.hardware.node.gpus
    rng = np.random.default_rng(t.seed).spawn(2)[1]  # the wafer's routing stream (runner.random_streams)
    tokens = route_tokens(m, t, _groups(spec) * batch_per_tile * t.tiles * t.seq_len, rng)
    if not m.experts:
        return tokens, 1.0
    share = expert_share(tokens, n)[~np.array([m.is_dense(i) for i in range(m.layers)])]
    return tokens, float((share.max(axis=1) / share.mean(axis=1)).max())


def _plan(spec: Any, batch_per_tile: int, tokens: np.ndarray) -> StepPlan:
    """The plan the training program is written from, for one GPU's ``tensor_slice`` of the model: only its
    batch, shapes and routing are read."""
    model = tensor_slice(spec.model, spec.training.tensor_parallel)
    return StepPlan(hw=spec.hardware, model=model, training=spec.training, batch_per_tile=batch_per_tile,
                    tiles=spec.training.tiles, attention_shape=(1, 1), expert_regions=(), expert_region_of=(),
                    tokens=tokens, dispatch=_nothing, cost_experts=_nothing)


def _nothing(*args: Any) -> Any:
    raise AssertionError("a GPU step is costed by sim.cost.gpu_training, not by the wafer's cost pass")


def _block(spec: Any, mem: Any, extra: dict[str, Any]) -> dict[str, Any]:
    m, n = spec.model, spec.hardware.node.gpus
    return {"gpus": n, "data_parallel": _groups(spec), "tensor_parallel": spec.training.tensor_parallel,
            "expert_parallel": n if m.experts else 1,
            "experts_per_gpu": -(-m.experts // n), "hbm_bytes_per_gpu": mem.total,
            "hbm_capacity_bytes": mem.capacity, "hbm_by_part_bytes": mem.parts, **extra}


def gpu_batch(spec: Any) -> tuple[int, np.ndarray, float]:
    """(B, the routing at that B, its busiest GPU's load): ``batch_per_tile`` as set, or ``auto``'s
    largest B that fits one GPU's HBM under the load its own routing gives (0: not even B = 1)."""
    spec = _resolved(spec)
    hw, m, t = spec.hardware, spec.model, spec.training
    B = int(t.batch_per_tile) if t.batch_per_tile != "auto" else max_gpu_batch(hw, m, t)
    tokens, load = _routing(spec, max(B, 1))
    if t.batch_per_tile == "auto" and B and not gpu_memory(hw, m, t, B, load=load).feasible:
        B = max_gpu_batch(hw, m, t, expert_load=load)  # the routed load's busiest GPU holds more
        tokens, load = _routing(spec, max(B, 1))
    return B, tokens, load


def run_gpu_training(spec: Any) -> Run:
    """One training step of ``spec`` on its node; one that does not fit HBM is a result with its reason."""
    t0 = time.perf_counter()
    spec = _resolved(spec)
    hw, m, t = spec.hardware, spec.model, spec.training
    B, tokens, load = gpu_batch(spec)
    mem = gpu_memory(hw, m, t, max(B, 1), load=load)
    if not B or not mem.feasible:
        why = mem.reason if B else f"batch_per_tile auto: not even B=1 fits ({mem.reason})"
        r = infeasible(spec, B, why, wall_s=time.perf_counter() - t0)
        return Run(replace(r, global_batch=_groups(spec) * B * t.tiles,
                           tokens_per_step=_groups(spec) * r.tokens_per_step, gpu=_block(spec, mem, {})))
    gpu = Gpu.of(hw, GPU_DTYPES_BY_BYTES.get(m.bytes_per_value, "bf16"))
    step = cost_gpu_step(spec, gpu, B, tokens, micro_batch_ops(_plan(spec, B, tokens)))
    n, clock = hw.node.gpus, hw.clock_hz
    node_tokens = _groups(spec) * B * t.tiles * t.seq_len  # each group's G·B·S
    flops = node_tokens * LayerShapes(m).model_flops_per_token(t.seq_len)
    joules = n * hw.power.gpu_watts * step.seconds + hw.power.node_floor_watts * step.seconds
    result = RunResult(
        **{**base_fields(spec, B), "global_batch": _groups(spec) * B * t.tiles}, feasible=True,
        infeasible_reason="",
        step_cycles=step.seconds * clock, step_time_s=step.seconds, tokens_per_step=node_tokens,
        throughput_tokens_per_s=node_tokens / step.seconds, model_flops_per_step=flops,
        mfu=flops / (step.seconds * n * gpu.peak_flops_per_s),
        phases={k: v * clock for k, v in step.parts.items()},
        dispatched_bytes=step.link_bytes, expert_load_imbalance=expert_imbalance(tokens),
        expert_region_load=load, cluster_throughput_tokens_per_s=node_tokens / step.seconds,
        scaling_efficiency=1.0, tree_efficiency=1.0, energy_per_step_j=joules,
        joules_per_token=joules / node_tokens, power_w=joules / step.seconds,
        energy_static_j=hw.power.node_floor_watts * step.seconds, events=step.kernels,
        wall_s=time.perf_counter() - t0,
        gpu=_block(spec, mem, {"kernels_per_gpu": step.kernels, "executed_flops_per_gpu": step.flops,
                               "link_bytes_per_gpu": step.link_bytes,
                               "seconds_by_part": step.parts}))
    return Run(result)
