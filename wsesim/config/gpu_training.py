"""Training on GPUs (``wsesim run --hardware h100``; docs/model.md §13.8): the same ``kind: experiment``
with a ``kind: gpu`` preset as its hardware. ``GpuExperimentSpec`` is the wafer's spec with the hardware a
``GpuSpec``; the ``simulation`` keys that describe a wafer (fabric, granularity, placement, compute) are
kept as given and not read, and ``training`` takes one key more, ``tensor_parallel`` (Megatron-LM's
tensor parallelism within the node). What a GPU step cannot do yet is refused here, in one line with its
reason, before anything is built."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from .base import fail
from .fields import count
from .gpu import GpuSpec, OnAGpu
from .specs import ClusterSpec, ExperimentSpec, SimulationSpec, TrainingSpec

__all__ = ["GpuExperimentSpec", "GpuTrainingSpec"]


class GpuTrainingSpec(TrainingSpec):
    """``TrainingSpec`` on a GPU: ``tensor_parallel`` GPUs of the node split every layer's weights (§13.8);
    the node's GPUs / tensor_parallel such groups are data parallel. 1: every GPU holds the whole model
    but its experts; ``auto``: the smallest group whose step fits HBM
    (``model.gpu_memory.tensor_parallel``)."""

    # checked against the node's GPUs and the model's heads
    tensor_parallel: count(1_024) | Literal["auto"] = 1  # type: ignore[valid-type]


def tensor_parallel_problem(tp: int, model: Any, gpus: int) -> str:
    """Why ``tp`` GPUs cannot form a tensor-parallel group for ``model`` on a node of ``gpus``, or ""."""
    if gpus % tp:
        return f"expected a divisor of the node's {gpus} GPUs, got {tp}"
    if model is not None and model.heads % tp:
        return f"expected a tensor-parallel size dividing the model's {model.heads} attention heads, got {tp}"
    if model is not None and model.kv_heads % tp and tp % model.kv_heads:
        return (f"expected a tensor-parallel size that divides the model's {model.kv_heads} KV heads or is a "
                f"multiple of them (each GPU holds whole KV heads), got {tp}")
    return ""


class GpuExperimentSpec(OnAGpu, ExperimentSpec):
    """A ``kind: gpu`` preset, a model and one training step on the preset's node (§13.8)."""

    hardware: GpuSpec  # type: ignore[assignment]
    training: GpuTrainingSpec = GpuTrainingSpec()

    @field_validator("training")
    @classmethod
    def _step_on_a_node(cls, training: GpuTrainingSpec, info: Any) -> GpuTrainingSpec:
        if training.global_batch is not None:
            raise fail("expected no global_batch on a GPU (a step is G tiles of B sequences on each of the "
                       "node's GPUs; gradient accumulation is not modelled there)", at="global_batch")
        if training.micro_batches not in ("auto", 1):
            raise fail(f"expected micro_batches 1 or auto on a GPU, got {training.micro_batches}",
                       at="micro_batches")
        hw = info.data.get("hardware")
        tp = training.tensor_parallel
        if hw is not None and tp != "auto" and (problem := tensor_parallel_problem(tp, info.data.get("model"),
                                                                                   hw.node.gpus)):
            raise fail(problem, at="tensor_parallel")
        return training

    @field_validator("simulation")
    @classmethod
    def _block_fits(cls, simulation: SimulationSpec, info: Any) -> SimulationSpec:  # a GPU has no mesh
        if simulation.moe_mapping != "regions":
            raise fail("expected moe_mapping: regions on a GPU (its experts are split over the node's GPUs; "
                       "in_place is a wafer's SIMD lanes)", at="moe_mapping")
        return simulation

    @field_validator("cluster")
    @classmethod
    def _batch_per_system(cls, cluster: ClusterSpec, info: Any) -> ClusterSpec:
        if cluster.systems != 1:
            raise fail(f"expected systems: 1 on a GPU (one node; nodes over the network are not modelled for "
                       f"training yet), got {cluster.systems}", at="systems")
        return cluster
