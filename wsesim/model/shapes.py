"""The one place that counts a transformer's parameters, FLOPs and weight bytes per layer: MoE layers
and dense feed-forward layers (SwiGLU or GELU), which a model may mix (its first ``dense_layers``).

Everything else — the memory model, the weight-chunk plan, the engines, the trace and the results —
imports these counts rather than writing them again (docs/model.md §3, §4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config.specs import ModelSpec
from .vocabulary import OpKind, Tensor

EXPERT_SHARE = {Tensor.GATE_UP: 2 / 3, Tensor.DOWN: 1 / 3}
"""Each expert op's share of one SwiGLU expert's 3·H·I weights: gate and up (H→I, two matrices) run
as one op, down (I→H) as the other. Their FLOPs per routed token split the same way."""
FORWARD_OPS, BACKWARD_OPS = (Tensor.GATE_UP, Tensor.DOWN), (Tensor.DOWN, Tensor.GATE_UP)
"""Expert ops in the order a pass runs them (backward runs the chain in reverse)."""
FFN_MATRICES = {"swiglu": 3, "gelu": 2}
"""H×F matrices of a dense FFN: SwiGLU gate, up and down; GELU up and down (biases not counted)."""


@dataclass(frozen=True)
class LayerShapes:
    """Parameter counts and per-token FLOPs of one transformer layer and of the embedding/LM head.

    FLOPs count a multiply-add as 2. Causal attention does half of the S² work. Backward of a matmul is
    two matmuls of the same size (input gradient, weight gradient); backward of the attention core is
    twice its forward.
    """

    model: ModelSpec

    # attention geometry ------------------------------------------------------------------------
    @property
    def qk_head_dim(self) -> int:
        """Each head's q and k width: ``head_dim`` plus, with latent attention, the rotary part."""
        return self.model.head_dim + self.model.qk_rope_head_dim

    @property
    def v_head_dim(self) -> int:
        return self.model.v_head_dim or self.model.head_dim

    @property
    def qkvo_widths(self) -> tuple[int, int, int, int]:
        """Per-token widths of q, k, v and the heads' output (before o_proj): what attention holds."""
        m, qk, v = self.model, self.qk_head_dim, self.v_head_dim
        return m.heads * qk, m.kv_heads * qk, m.kv_heads * v, m.heads * v

    # parameters --------------------------------------------------------------------------------
    @property
    def attention_proj_params(self) -> int:
        """The projections' weights. GQA: q, k, v, o. Multi-head latent attention: q directly or through a
        rank-``q_lora_rank`` down/up pair; k and v up-projected per head from a ``kv_lora_rank`` latent
        (the rotary part of k from its own down-projection, shared by the heads); o."""
        m = self.model
        H = m.hidden_size
        if not m.kv_lora_rank:
            return H * m.head_dim * (2 * m.heads + 2 * m.kv_heads)
        qk, v = self.qk_head_dim, self.v_head_dim
        q = H * m.q_lora_rank + m.q_lora_rank * m.heads * qk if m.q_lora_rank else H * m.heads * qk
        kv = H * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * m.heads * (m.head_dim + v)
        return q + kv + m.heads * v * H

    @property
    def attention_params(self) -> int:
        """The projections; the two RMSNorm weights; and the QK-norm weights (GQA) or the latents' norms
        (multi-head latent attention)."""
        m = self.model
        norms = m.q_lora_rank + m.kv_lora_rank if m.kv_lora_rank else 2 * m.head_dim
        return self.attention_proj_params + 2 * m.hidden_size + norms

    @property
    def router_params(self) -> int:
        return self.model.hidden_size * self.model.experts

    @property
    def expert_params(self) -> int:
        """One SwiGLU expert: gate and up (H→I), down (I→H)."""
        return 3 * self.model.hidden_size * self.model.expert_intermediate

    @property
    def shared_expert_params(self) -> int:
        return 3 * self.model.hidden_size * self.model.shared_expert_intermediate

    @property
    def router_stage_params(self) -> int:
        """What the router op runs on the whole wafer: the router and, where the model has one, the shared
        expert (every token goes through it). Streamed, resident and sent back as one tensor."""
        return self.router_params + self.shared_expert_params

    @property
    def ffn_params(self) -> int:
        """One dense FFN of width ``ffn_intermediate``: SwiGLU gate, up (H→F) and down (F→H); GELU up
        and down."""
        m = self.model
        return FFN_MATRICES[m.ffn_activation] * m.hidden_size * m.ffn_intermediate

    @property
    def moe_layer_params(self) -> int:
        m = self.model
        return (self.attention_params + self.router_params + m.experts * self.expert_params
                + self.shared_expert_params)

    @property
    def dense_layer_params(self) -> int:
        return self.attention_params + self.ffn_params

    @property
    def moe_layers(self) -> int:
        return self.model.layers - self.model.dense_layer_count

    @property
    def layer_params(self) -> int:
        """The largest layer's parameters (MoE or dense, whichever the model has and is larger)."""
        sizes = ([self.moe_layer_params] if self.moe_layers else []) + (
            [self.dense_layer_params] if self.model.dense_layer_count else [])
        return max(sizes)

    def resident_params(self, dense: bool) -> int:
        """What a whole-wafer layer keeps resident while it runs: attention and the router stage (MoE) or
        attention and the FFN (dense)."""
        return self.attention_params + (self.ffn_params if dense else self.router_stage_params)

    @property
    def embedding_params(self) -> int:
        return self.model.vocab_size * self.model.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.model.tie_word_embeddings else self.model.vocab_size * self.model.hidden_size

    @property
    def total_params(self) -> int:
        return (self.moe_layers * self.moe_layer_params
                + self.model.dense_layer_count * self.dense_layer_params
                + self.embedding_params + self.lm_head_params)

    @property
    def active_params(self) -> int:
        m = self.model
        per_layer = (self.attention_params + self.router_params + m.top_k * self.expert_params
                     + self.shared_expert_params)
        return (self.moe_layers * per_layer + m.dense_layer_count * self.dense_layer_params
                + self.embedding_params + self.lm_head_params)

    # forward FLOPs per token ---------------------------------------------------------------------
    def attention_proj_flops(self) -> float:
        """q, k, v and o projections (with latent attention, through the latents)."""
        return 2.0 * self.attention_proj_params

    def attention_core_flops(self, seq_len: int, skip_masked: bool = True) -> float:
        """Scores QKᵀ and P·V for every query head. Causal attention needs half the S² work, which a kernel
        that skips masked tiles (flash) does; a kernel that materialises the full S×S scores (standard)
        computes them all, masked or not (``skip_masked=False``)."""
        full = 2.0 * seq_len * self.model.heads * (self.qk_head_dim + self.v_head_dim)
        return full * 0.5 if skip_masked else full

    def router_flops(self) -> float:
        return 2.0 * self.router_params

    def router_stage_flops(self) -> float:
        """Forward FLOPs per token of the router op: the router and the shared expert."""
        return self.router_flops() + 2.0 * self.shared_expert_params

    def expert_slot_flops(self) -> float:
        """One routed slot (a token at one of its top_k experts): gate, up and down."""
        return 2.0 * self.expert_params

    def lm_head_flops(self) -> float:
        return 2.0 * self.model.vocab_size * self.model.hidden_size

    def ffn_flops(self) -> float:
        """Forward FLOPs per token of a dense FFN: 2·(3 or 2)·H·F."""
        return 2.0 * self.ffn_params

    def model_flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token (forward + backward = 3 × forward), excluding recomputation: the
        numerator of MFU. MoE layers count the top_k experts a token visits, dense layers their FFN."""
        m = self.model
        attention = self.attention_proj_flops() + self.attention_core_flops(seq_len)
        moe = self.router_flops() + m.top_k * self.expert_slot_flops() + 2.0 * self.shared_expert_params
        if not m.dense_layer_count:  # every layer MoE: one product (the split below rounds differently)
            return 3 * (m.layers * (attention + moe) + self.lm_head_flops())
        layers = self.moe_layers * (attention + moe) + m.dense_layer_count * (attention + self.ffn_flops())
        return 3 * (layers + self.lm_head_flops())

    # expert ops --------------------------------------------------------------------------------
    def expert_op_bytes(self, op: str, bytes_per_value: int | None = None) -> float:
        """Weight bytes of one expert's ``op`` (``gate_up`` or ``down``), at the model's dtype or at
        ``bytes_per_value`` (e.g. the weight gradients')."""
        return EXPERT_SHARE[op] * self.expert_params * (bytes_per_value or self.model.bytes_per_value)

    def expert_op_flops(self, op: str, tokens: np.ndarray | float, backward: bool) -> np.ndarray | float:
        """FLOPs of one expert's ``op`` on ``tokens`` routed slots; backward is two matmuls (input and
        weight gradients) of the forward's size."""
        return (2.0 if backward else 1.0) * EXPERT_SHARE[op] * tokens * self.expert_slot_flops()


def copy_op_flops(shapes: LayerShapes, tokens: int, name: str, backward: bool) -> tuple[float, bool]:
    """The in-place mapping's copy ops on ``tokens`` tokens: (datapath work in FLOP-equivalents, whether
    that work is arithmetic). ``expand`` writes each token's k copies (one FMAC slot per element: timed
    like 2 FLOPs, but no arithmetic) and in backward adds the k copies' gradients back into one;
    ``weighted_sum`` multiplies each expert output by its router probability and adds the k of them, and
    in backward does that twice (gradients for the copies and for the probabilities)."""
    m = shapes.model
    elements = float(tokens) * m.top_k * m.hidden_size
    if name == OpKind.EXPAND:
        return 2.0 * elements, backward
    return (4.0 if backward else 2.0) * elements, True


def wafer_op(shapes: LayerShapes, name: str, tokens: int, seq_len: int, kernel: str,
             backward: bool) -> tuple[float, float]:
    """(FLOPs, weight bytes fed) of a whole-wafer op on ``tokens`` tokens — ``attention`` (one tile),
    ``router`` (with the shared expert), ``ffn`` (a dense layer) or ``lm_head`` (forward and backward of the
    loss together) — written once for both engines (docs/model.md §3.3). Backward does 2× the forward's
    work and feeds the weights twice; the standard attention kernel computes the full S×S scores (masked
    half included), flash skips it."""
    f, b = (2.0 if backward else 1.0), shapes.model.bytes_per_value
    if name == OpKind.ATTENTION:
        core = shapes.attention_core_flops(seq_len, skip_masked=kernel == "flash")
        return f * tokens * (shapes.attention_proj_flops() + core), f * shapes.attention_params * b
    if name == OpKind.ROUTER:
        return f * tokens * shapes.router_stage_flops(), f * shapes.router_stage_params * b
    if name == OpKind.FFN:
        return f * tokens * shapes.ffn_flops(), f * shapes.ffn_params * b
    if name == OpKind.LM_HEAD:
        return (3 * tokens * shapes.lm_head_flops(),
                3 * ((shapes.lm_head_params or shapes.embedding_params) * b))
    raise ValueError(f"no whole-wafer op {name!r}")


Matmul = tuple[int, int, int]  # M x K x N: C[M x N] = A[M x K] · B[K x N]


def _backward(forward: list[Matmul]) -> list[Matmul]:
    """Backward of each forward matmul M × K × N: the input gradient (M × N × K) and the weight gradient
    (K × M × N), the same FLOPs each, in that order (``over_tokens`` reads it)."""
    return [g for m, k, n in forward for g in ((m, n, k), (k, m, n))]


def over_tokens(name: str, backward: bool, count: int) -> tuple[bool, ...]:
    """Which of an op's ``count`` GEMMs (``wafer_op_matmuls`` or ``expert_op_matmuls`` of op ``name``, in
    their order) contract over the tokens — the weight gradients (and attention's key and value
    gradients), which a weight-streaming dataflow reduces down the columns rather than along the rows:
    every second GEMM of a backward list (``_backward``), the last of the LM head's forward-and-backward."""
    if name == OpKind.LM_HEAD:
        return (False,) * (count - 1) + (True,)
    return (False, True) * (count // 2) if backward else (False,) * count


def layer_matmuls(shapes: LayerShapes, tokens: int, keys: Any, dense: bool = True) -> dict[str, Matmul]:
    """A transformer layer's GEMMs (M, K, N) on ``tokens`` tokens attending to ``keys`` keys, by name —
    the one description of a layer as matmuls, which the training step and serving both read:

    ``qkv`` (q, k and v as one), ``o_proj``, ``scores`` (all heads' q·Kᵀ as one wide GEMM) and
    ``context`` (P·V); the FFN's ``gate_up`` (SwiGLU's gate and up as one, GELU's up) and ``down`` — a
    dense layer's, or for an MoE layer a token's ``top_k`` experts side by side; ``router``,
    ``shared_gate_up`` and ``shared_down`` (where the model has a shared expert); ``lm_head``.
    ``keys`` may be any size the caller resolves later (serving's decode context)."""
    m = shapes.model
    H = m.hidden_size
    q, k, v, o = shapes.qkvo_widths
    if dense:
        up, inner = (FFN_MATRICES[m.ffn_activation] - 1) * m.ffn_intermediate, m.ffn_intermediate
    else:
        up, inner = 2 * m.expert_intermediate * m.top_k, m.expert_intermediate * m.top_k
    out = {"qkv": (tokens, H, q + k + v), "o_proj": (tokens, o, H),
           "scores": (tokens, m.heads * shapes.qk_head_dim, keys),
           "context": (tokens, keys, m.heads * shapes.v_head_dim),
           "gate_up": (tokens, H, up), "down": (tokens, inner, H), "router": (tokens, H, m.experts),
           "lm_head": (tokens, H, m.vocab_size)}
    if m.shared_expert_intermediate:
        sh = m.shared_expert_intermediate
        out |= {"shared_gate_up": (tokens, H, 2 * sh), "shared_down": (tokens, sh, H)}
    return out


def wafer_op_matmuls(shapes: LayerShapes, name: str, tokens: int, seq_len: int, kernel: str,
                     backward: bool) -> tuple[Matmul, ...]:
    """The GEMMs of a whole-wafer op on ``tokens`` tokens (``wafer_op``'s FLOPs, as shapes, from
    ``layer_matmuls``): attention's projections (q, k and v as one, o) and its core (all heads of a
    tile's sequences as one wide scores GEMM and one context GEMM, the masked half skipped by
    ``flash``), the router with the shared expert, a dense FFN, the LM head (forward and both backward
    GEMMs). Used by ``simulation.compute: kernel``."""
    m = shapes.model
    keys = seq_len if kernel != "flash" else max(1, seq_len // 2)
    mm = layer_matmuls(shapes, tokens, keys)
    out: list[Matmul] = []
    if name == OpKind.ATTENTION:
        if m.kv_lora_rank:  # latent attention: the projections as one GEMM of their parameters
            out.append((tokens, m.hidden_size, max(1, shapes.attention_proj_params // m.hidden_size)))
        else:
            out += [mm["qkv"], mm["o_proj"]]
        out += [mm["scores"], mm["context"]]
    elif name == OpKind.ROUTER:
        out += [mm["router"]] + ([mm["shared_gate_up"], mm["shared_down"]]
                                 if m.shared_expert_intermediate else [])
    elif name == OpKind.FFN:
        out += [mm["gate_up"], mm["down"]]
    elif name == OpKind.LM_HEAD:
        return tuple([mm["lm_head"], *_backward([mm["lm_head"]])])
    else:
        raise ValueError(f"no whole-wafer op {name!r}")
    return tuple(_backward(out) if backward else out)


def expert_op_matmuls(shapes: LayerShapes, op: str, tokens: int, backward: bool) -> tuple[Matmul, ...]:
    """The GEMMs of one expert's ``op`` on ``tokens`` routed slots: gate and up as one (H → 2I), down
    (I → H); backward, each one's input and weight gradients."""
    m = shapes.model
    I, H = m.expert_intermediate, m.hidden_size  # noqa: E741 (the config's name)
    forward = [(tokens, H, 2 * I)] if op == Tensor.GATE_UP else [(tokens, I, H)]
    return tuple(_backward(forward) if backward else forward)
