"""Serving on GPUs (``wsesim infer --hardware h100``; docs/model.md §13.7): the same ``kind: inference``
experiment with a ``kind: gpu`` preset as its hardware. ``GpuInferenceExperimentSpec`` is the wafer's
spec with the hardware a ``GpuSpec`` and one key more, ``inference.tensor_parallel`` (the GPUs of a node
one pipeline stage spans; ``auto``: all of them). What a GPU run cannot do yet is refused here, in one
line with its reason, before anything is built."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator

from .base import fail
from .fields import count
from .gpu import GpuSpec, OnAGpu
from .inference import SERVING_SPECS, InferenceExperimentSpec, InferenceSpec, requests_fit_model

__all__ = ["GpuInferenceExperimentSpec", "GpuInferenceSpec", "gpu_refusal"]

# GPUs a tensor-parallel group spans: at most a node's (checked against the preset's node.gpus)
TensorParallel = count(1_024)


class GpuInferenceSpec(InferenceSpec):
    """``InferenceSpec`` on a GPU: ``tensor_parallel`` GPUs of one node per pipeline stage."""

    tensor_parallel: TensorParallel | Literal["auto"] = "auto"


def gpu_refusal(inference: Any, model: Any, gpus: int) -> tuple[str, str]:
    """(the key, why) of the first thing a GPU run cannot do with ``inference`` and ``model`` on a node of
    ``gpus`` GPUs, or ("", "") when it can run."""
    tp = gpus if inference.tensor_parallel == "auto" else inference.tensor_parallel
    rules = [
        ("grid", inference.grid != "auto", f'expected grid: auto on a GPU (a stage is {tp} GPUs of a node, '
                                            f'not a grid of PEs), got "{inference.grid}"'),
        ("layers_per_stage", inference.layers_per_stage != "auto",
         "expected layers_per_stage: auto on a GPU (the layers are dealt evenly over the fewest nodes whose "
         f"HBM holds them), got {inference.layers_per_stage}"),
        ("tensor_parallel", tp > gpus, f"expected at most the node's {gpus} GPUs, got {tp}"),
        ("tensor_parallel", model.heads % tp != 0,
         f"expected a tensor-parallel size dividing the model's {model.heads} attention heads, got {tp}"),
        ("kv_layout", inference.kv_layout != "shift",
         "expected kv_layout: shift on a GPU (concat is a wafer's placement of decoded tokens on a row of "
         "PEs; a GPU's cache is its HBM)"),
        ("speculative", inference.speculative is not None,
         "speculative decoding is not modelled on GPUs yet: its draft is a station of wafers of its own "
         "(speculative.DraftCosts); a draft on a GPU's own SMs beside the target is not costed"),
        ("disaggregation.prefill_systems", inference.disaggregation is not None,
         "split prefill is not modelled on GPUs yet: the KV cache's hand-off between nodes is costed over "
         "wafers' I/O links only"),
        ("moe.routing", model.experts and inference.moe.routing != "balanced",
         "expected routing: balanced on a GPU (sampled routing's draws are priced on a wafer's expert "
         "regions; the GPU's grouped GEMM is costed at the balanced load)"),
        ("moe.expert_grids", model.experts and inference.moe.expert_grids != 1,
         "expected expert_grids: 1 on a GPU (its experts are split over the tensor-parallel group's GPUs)"),
        ("scheduler.preemption", inference.scheduler.preemption == "swap",
         "expected preemption: recompute on a GPU (the preset has no host link to swap a cache over)"),
    ]
    for key, bad, why in rules:
        if bad:
            return key, why
    return "", ""


class GpuInferenceExperimentSpec(OnAGpu, InferenceExperimentSpec):
    """A ``kind: gpu`` preset, a model and requests to serve (docs/model.md §13.7)."""

    hardware: GpuSpec  # type: ignore[assignment]
    inference: GpuInferenceSpec = GpuInferenceSpec()  # type: ignore[assignment]

    @field_validator("inference")
    @classmethod
    def _grid_fits(cls, inference: GpuInferenceSpec, info: Any) -> GpuInferenceSpec:  # the wafer's, for a GPU
        hw, model = info.data.get("hardware"), info.data.get("model")
        requests_fit_model(inference, model)
        if model is not None and hw is not None:
            key, why = gpu_refusal(inference, model, hw.node.gpus)
            if key:
                raise fail(why, at=key)
        return inference


SERVING_SPECS["gpu"] = GpuInferenceExperimentSpec
