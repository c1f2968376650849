"""What one GPU of a node holds while it trains (docs/model.md §13.8): the HBM check that replaces the wafer's
SRAM model on a ``kind: gpu`` preset.

The node's ``n`` GPUs form n/tp data-parallel groups of ``tp = training.tensor_parallel`` GPUs, each group
splitting every layer's weights as Megatron-LM's tensor parallelism does (``tensor_slice``: one GPU's
heads, FFN columns and vocabulary rows), and an MoE model's experts are split over all n GPUs (expert
parallel, ⌈E/n⌉ a GPU, each expert whole). Each GPU holds, in bytes:

* weights and their gradients: its slice's non-expert parameters (``P_d``) and its own experts'
  (``P_e``), at the model's ``bytes_per_value`` and ``training.weight_gradient_dtype``;
* Adam's fp32 master weights, first and second moments (12 bytes a parameter): its own experts' and
  tp/n of the slice's rest, the non-expert state sharded over the n/tp data-parallel GPUs as Megatron-LM's
  distributed optimizer (ZeRO stage 1) shards it;
* activations for the backward pass of its G·B sequences of S tokens (T = G·B·S tokens): with
  ``activations: recompute`` each layer's input (T·H values a layer) and one layer's full set while it is
  recomputed; with ``store``, every layer's full set. A layer's set, in values a token: its two norms'
  inputs (2H), q, k and v, the attention's output (FlashAttention keeps only its row statistics, not the
  S×S scores), and the FFN's input with its inner activations (the gate, up and their product: 3F for
  SwiGLU, 2F for GELU) — an MoE layer's for each of a token's k expert copies (H + 3I), times the busiest
  GPU's share of the routed slots over the mean (``load``). Under tensor parallelism q, k, v, the
  attention's output and the FFN's inner values are the slice's (1/tp), the norms' and the FFN's inputs
  whole on every GPU of the group (no sequence parallelism), and the routed copies 1/tp (each GPU of the
  group dispatches its 1/tp of the group's tokens);
* the LM head's fp32 logits for one tile (B·S·V·4 bytes, V/tp of them under tensor parallelism; their
  gradient is written over them).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Any

from ..config.gpu_training import tensor_parallel_problem
from ..config.specs import DTYPE_BYTES
from .shapes import FFN_MATRICES, LayerShapes

__all__ = ["ADAM_BYTES", "MAX_TOKENS", "GpuMemory", "gpu_memory", "max_gpu_batch", "max_gpu_tiles",
           "split_params", "tensor_parallel", "tensor_slice"]

ADAM_BYTES = 12
"""fp32 master weight, first and second moment: bytes of optimizer state a parameter (§13.8)."""


@dataclass(frozen=True)
class GpuMemory:
    """One GPU's HBM in training, in bytes by part, and its capacity."""

    parts: dict[str, float]
    capacity: float

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    @property
    def feasible(self) -> bool:
        return self.total <= self.capacity

    @property
    def reason(self) -> str:
        if self.feasible:
            return ""
        shown = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in self.parts.items())
        return f"HBM: {self.total / 1e9:.1f} GB a GPU ({shown}) > {self.capacity / 1e9:.1f} GB"


def tensor_parallel(hw: Any, model: Any, training: Any) -> int:
    """``training.tensor_parallel``, or under ``auto`` the smallest group the node and the model allow
    (``tensor_parallel_problem``) whose step fits one GPU's HBM at B = 1 (or the B set) under a balanced
    load; when none does, the largest allowed, whose result then says why."""
    tp = training.tensor_parallel
    if tp != "auto":
        return int(tp)
    n = hw.node.gpus
    allowed = [g for g in range(1, n + 1) if not tensor_parallel_problem(g, model, n)]
    B = 1 if training.batch_per_tile == "auto" else int(training.batch_per_tile)
    fits = (g for g in allowed
            if gpu_memory(hw, model, training.model_copy(update={"tensor_parallel": g}), B).feasible)
    return next(fits, allowed[-1])


def tensor_slice(model: Any, tp: int) -> Any:
    """One GPU's share of ``model`` in a tensor-parallel group of ``tp`` (Megatron-LM's layout): its heads
    (heads/tp; KV heads kv/tp, or one, replicated, when tp exceeds them), its columns of the FFN's gate
    and up and rows of its down (F/tp, and the shared expert's), its rows of the embedding and LM head
    (V/tp, vocabulary-parallel); the norms, the router and the routed experts whole. ``model`` itself at
    tp = 1. The config refuses a tp that does not divide the heads."""
    if tp == 1:
        return model
    return model.model_copy(update={
        "heads": model.heads // tp, "kv_heads": max(1, model.kv_heads // tp),
        "ffn_intermediate": ceil(model.ffn_intermediate / tp),
        "shared_expert_intermediate": ceil(model.shared_expert_intermediate / tp),
        "vocab_size": ceil(model.vocab_size / tp)})


def split_params(model: Any, gpus: int) -> tuple[int, int]:
    """(non-expert parameters, one GPU's experts' parameters) with the experts split over ``gpus``."""
    s = LayerShapes(model)
    experts = s.moe_layers * model.experts * s.expert_params if model.experts else 0
    mine = s.moe_layers * ceil(model.experts / gpus) * s.expert_params if model.experts else 0
    return s.total_params - experts, mine


def _layer_values(model: Any, dense: bool, load: float, tp: int) -> float:
    """Values a token a layer keeps for its backward pass (see the module's docstring), ``model`` one
    GPU's ``tensor_slice`` of ``tp``."""
    s, H = LayerShapes(model), model.hidden_size
    q, k, v, o = s.qkvo_widths
    attention = 2 * H + q + k + v + o
    if dense:
        return attention + H + FFN_MATRICES[model.ffn_activation] * model.ffn_intermediate
    shared = 3 * model.shared_expert_intermediate
    return attention + H + shared + model.top_k * (H + 3 * model.expert_intermediate) * load / tp


def gpu_memory(hw: Any, model: Any, training: Any, batch_per_tile: int, *, tiles: int | None = None,
               load: float = 1.0) -> GpuMemory:
    """One GPU's HBM at B = ``batch_per_tile`` and G = ``tiles`` (default ``training.tiles``), its group
    ``training.tensor_parallel`` GPUs."""
    n, b, tp = hw.node.gpus, model.bytes_per_value, tensor_parallel(hw, model, training)
    model = tensor_slice(model, tp)
    dense, mine = split_params(model, n)
    tokens = (training.tiles if tiles is None else tiles) * batch_per_tile * training.seq_len
    layers = [_layer_values(model, model.is_dense(i), load, tp) for i in range(model.layers)]
    if training.activations == "recompute":
        kept = model.layers * model.hidden_size + max(layers, default=0.0)
    else:
        kept = sum(layers)
    parts = {"weights": float((dense + mine) * b),
             "gradients": float((dense + mine) * DTYPE_BYTES[training.weight_gradient_dtype]),
             "optimizer": float((ceil(dense / (n // tp)) + mine) * ADAM_BYTES),
             "activations": float(tokens * kept * b),
             "logits": float(batch_per_tile * training.seq_len * model.vocab_size * 4)}
    return GpuMemory(parts, float(hw.hbm.capacity_bytes))


MAX_TOKENS = 1 << 17
"""Tokens a GPU's step may have when ``batch_per_tile: auto`` sizes it (131,072: a small model fits far
more in HBM, and a step of millions of tokens a GPU takes the kernel layer minutes to schedule)."""


def max_gpu_batch(hw: Any, model: Any, training: Any, *, tiles: int | None = None,
                  expert_load: float = 1.0) -> int:
    """The largest B whose step fits one GPU's HBM with G = ``tiles`` (0: not even B = 1), the bytes
    linear in B; at most ``MAX_TOKENS`` tokens a GPU."""
    G = training.tiles if tiles is None else tiles
    most = max(1, MAX_TOKENS // (G * training.seq_len))
    return min(most, _largest(lambda B: gpu_memory(hw, model, training, B, tiles=tiles, load=expert_load)))


def max_gpu_tiles(hw: Any, model: Any, training: Any, *, batch_per_tile: int,
                  expert_load: float = 1.0) -> int:
    """The largest G whose step fits one GPU's HBM at B = ``batch_per_tile`` (0: not even G = 1): the
    bytes grow linearly in G (the logits are one tile's); at most ``MAX_TOKENS`` tokens a GPU."""
    most = max(1, MAX_TOKENS // (batch_per_tile * training.seq_len))
    return min(most, _largest(lambda G: gpu_memory(hw, model, training, batch_per_tile, tiles=G,
                                                   load=expert_load)))


def _largest(memory: Any) -> int:
    """The largest x ≥ 1 with ``memory(x)`` within capacity, the bytes linear in x; 0 when x = 1 is not."""
    base = memory(0)
    per = memory(1).total - base.total
    room = base.capacity - base.total
    return max(0, int(room // per)) if per > 0 else 0
