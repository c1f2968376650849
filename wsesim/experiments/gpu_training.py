"""Composition of a training step on a GPU node (docs/model.md §13.8): a ``GpuExperimentSpec`` -> B resolved
against one GPU's HBM (``model.gpu_memory``) -> the routing of the node's tokens -> the training program's
micro-batch (``builders.training.micro_batch_ops``) -> its ops costed on the GPU kernels
(``sim.cost.gpu_training``) -> the same ``RunResult`` as a wafer's step, its energy the node's (each GPU at
its TDP for the step, the node's floor beside). Under ``training.tensor_parallel`` = tp the node is n/tp
data-parallel groups of tp GPUs, and its step n/tp groups' tokens. These are the steps the one runner
(``runner.run``) takes for a training spec on a GPU (``GPU_TRAINING``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
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
from .runs import Composer, Options, Run

__all__ = ["GPU_TRAINING", "gpu_batch"]


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
    rng = np.random.default_rng(t.seed).spawn(2)[1]  # the wafer's routing stream (training.random_streams)
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


@dataclass(frozen=True)
class GpuSizing:
    """The step's ``spec`` with its tensor-parallel group resolved (``auto`` -> a size), B on one GPU, the
    node's routing at that B, its busiest GPU's load and one GPU's HBM."""

    spec: Any
    batch_per_tile: int
    tokens: np.ndarray
    load: float
    memory: Any  # model.gpu_memory.GpuMemory

    @property
    def feasible(self) -> bool:
        return bool(self.batch_per_tile) and self.memory.feasible

    @property
    def reason(self) -> str:
        mem = self.memory
        return mem.reason if self.batch_per_tile else f"batch_per_tile auto: not even B=1 fits ({mem.reason})"


def _lay_out(spec: Any, options: Options) -> GpuSizing:
    spec = _resolved(spec)
    hw, m, t = spec.hardware, spec.model, spec.training
    B, tokens, load = gpu_batch(spec)
    return GpuSizing(spec, B, tokens, load, gpu_memory(hw, m, t, max(B, 1), load=load))


def _infeasible(spec: Any, size: GpuSizing, start: float) -> Run:
    """A step that does not fit HBM: a result with its reason."""
    spec, B = size.spec, size.batch_per_tile
    r = infeasible(spec, B, size.reason, wall_s=time.perf_counter() - start)
    return Run(replace(r, global_batch=_groups(spec) * B * spec.training.tiles,
                       tokens_per_step=_groups(spec) * r.tokens_per_step, gpu=_block(spec, size.memory, {})))


def _gpu(spec: Any) -> Gpu:
    return Gpu.of(spec.hardware, GPU_DTYPES_BY_BYTES.get(spec.model.bytes_per_value, "bf16"))


def _build(spec: Any, size: GpuSizing, options: Options) -> tuple[GpuSizing, Any]:
    """(the sizing, one GPU's micro-batch of the training program, written for its tensor slice)."""
    return size, micro_batch_ops(_plan(size.spec, size.batch_per_tile, size.tokens))


def _cost(spec: Any, size: GpuSizing, ops: Any) -> Any:
    return cost_gpu_step(size.spec, _gpu(size.spec), size.batch_per_tile, size.tokens, ops)


def _measure(spec: Any, size: GpuSizing, plan: GpuSizing, ops: Any, costs: Any, step: Any,
             start: float) -> Run:
    """The same ``RunResult`` as a wafer's step, from the step's kernels on one GPU."""
    spec = size.spec
    hw, m, t = spec.hardware, spec.model, spec.training
    B, tokens, load, mem, gpu = size.batch_per_tile, size.tokens, size.load, size.memory, _gpu(spec)
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
        wall_s=time.perf_counter() - start,
        gpu=_block(spec, mem, {"kernels_per_gpu": step.kernels, "executed_flops_per_gpu": step.flops,
                               "link_bytes_per_gpu": step.link_bytes,
                               "seconds_by_part": step.parts}))
    return Run(result)


GPU_TRAINING = Composer(lambda spec, size, options: None, _lay_out, _infeasible, _build, _cost,
                        lambda spec, plan, ops, step: step, _measure)
"""A training step on a GPU node, step by step (``runs.compose``): nothing to refuse (its kernels are few
and costed in seconds), and no executor, as the step's kernels are timed one after another as they are
costed (``sim.cost.gpu_training``)."""
