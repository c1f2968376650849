"""Serving on GPUs as a program (docs/model.md §13.7, which gives the mapping's rules in full): the mapping
of a model's layers onto nodes of GPUs and the one ``ServeBatches`` op the scheduler runs; its stations are
the cost pass's (``cost.gpu_serving.GpuStation``), which also names each stage's kernels.

**The mapping.** A pipeline stage is ``tp`` GPUs of one node, tensor-parallel; the layers are dealt evenly
over the fewest stages (nodes) whose GPUs each hold their share of the weights, the KV cache and the
activations — HBM in the part of a wafer's SRAM, through the same formulas (``model.serving``), the group
standing as a 1 × s grid of the KV heads' shards (``kv_shards``). ``inference.systems`` caps the nodes.

**The program** is the wafer's (``builders.serving.serve_program``): a ``StageWork`` per stage, its
kernels named for the result's breakdowns, the requests in the GPU's clock cycles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....model.load import Requests, requests_of
from ....model.serving import stage_memory
from ....model.shapes import LayerShapes
from ..mapping import Mapping, Stage
from ..program import Handoff, Kernel, Program, StageWork
from .serving import serve_program

__all__ = ["MAX_NODES", "gpu_mapping", "gpu_program", "kv_shards", "tensor_parallel"]

MAX_NODES = 64
"""The most nodes ``systems: auto`` tries before a model is said not to fit."""


def tensor_parallel(spec: Any) -> int:
    """GPUs a stage spans: ``inference.tensor_parallel``, or the node's GPUs under ``auto``."""
    tp = spec.inference.tensor_parallel
    return spec.hardware.node.gpus if tp == "auto" else int(tp)


def kv_shards(spec: Any, tp: int) -> int:
    """The KV heads' shards over ``tp`` GPUs: each GPU caches kv_heads / shards of them."""
    kv = spec.model.kv_heads
    return kv // max(1, kv // tp)


def layer_bytes(spec: Any, layer: int, tp: int) -> float:
    """One GPU's weights of ``layer``: its attention's 1/tp; a dense MLP's 1/tp, or an MoE layer's router
    whole, its ⌈E/tp⌉ experts and its shared expert whole."""
    m, s = spec.model, LayerShapes(spec.model)
    if m.is_dense(layer):
        return s.dense_layer_params * m.bytes_per_value / tp
    experts = -(-m.experts // tp) * s.expert_params
    return (s.attention_params / tp + s.router_params + experts + s.shared_expert_params) * m.bytes_per_value


def _stage_bytes(spec: Any, layers: range, tp: int, first: bool, last: bool, stages: int) -> float:
    """One GPU's weights on a stage: its layers', the embedding's 1/tp on the first, the LM head's on the
    last (the embedding's again when tied and on another node)."""
    m, s = spec.model, LayerShapes(spec.model)
    out = sum(layer_bytes(spec, i, tp) for i in layers)
    table = s.embedding_params * m.bytes_per_value / tp
    if first:
        out += table
    if last and (not m.tie_word_embeddings or stages > 1):
        out += table
    return out


def gpu_mapping(spec: Any) -> Mapping:
    """The fewest nodes whose GPUs hold the model and the batch's KV cache (see the module's docstring);
    infeasible, with the reason, when ``inference.systems`` (or ``MAX_NODES``) nodes do not."""
    inf, m, hw = spec.inference, spec.model, spec.hardware
    tp = tensor_parallel(spec)
    cols = kv_shards(spec, tp)
    cap = MAX_NODES if inf.systems == "auto" else int(inf.systems)
    last_try: tuple[Stage, ...] = ()
    for n in range(1, min(cap, m.layers) + 1):
        per = -(-m.layers // n)
        spans = [range(i, min(i + per, m.layers)) for i in range(0, m.layers, per)]
        stages = []
        for j, span in enumerate(spans):
            first, last = j == 0, j == len(spans) - 1
            weights = _stage_bytes(spec, span, tp, first, last, len(spans))
            memory = stage_memory(m, weights * cols, len(span), 1, cols, hw.hbm.capacity_bytes,
                                  inf.load.prompt_len, inf.load.output_len, inf.scheduler.batch, "shift")
            stages.append(Stage(j, j, (0, 0), 1, cols, tuple(span), first, last, memory))
        last_try = tuple(stages)
        if all(s.memory.fits for s in stages):
            return Mapping((1, tp), last_try, len(stages), 1, allowed=None if inf.systems == "auto" else cap)
    worst = max(last_try, key=lambda s: s.memory.total / s.memory.usable)
    nodes = f"{len(last_try)} node{'s' if len(last_try) > 1 else ''}"
    reason = (f"the weights and KV cache do not fit {nodes} of "
              f"{tp} {hw.name} GPUs: {worst.memory.total / 1e9:,.1f} GB a GPU on stage {worst.index} "
              f"against {worst.memory.usable / 1e9:,.1f} GB of HBM")
    return Mapping((1, tp), last_try, len(last_try), 1, reason=reason,
                   allowed=None if inf.systems == "auto" else cap)


def gpu_program(spec: Any, mapping: Mapping, kernels: Sequence[tuple[tuple[Kernel, ...], tuple[Kernel, ...]]],
                budget: int, requests: Requests | None = None, members: bool = False) -> Program:
    """The one ``ServeBatches`` op over the mapping's stages (see the module's docstring): each stage's
    prefill and decode ``kernels`` (``cost.gpu_serving.stage_kernels``: their names and kinds, for the
    result's breakdowns) and the scheduler's token ``budget``."""
    stages, prompt = mapping.stages, spec.inference.load.prompt_len
    works = []
    for stage, (prefill, decode) in zip(stages, kernels, strict=True):
        nxt = stages[(stage.index + 1) % len(stages)]
        values = 1 if stage.lm_head else spec.model.hidden_size
        works.append(StageWork(stage, prefill, decode,
                               Handoff(stage, nxt, values if stage.lm_head else prompt * values),
                               Handoff(stage, nxt, values)))
    if requests is None:
        requests = requests_of(spec)
    return serve_program(spec, works, requests, budget, "shift", members=members)
