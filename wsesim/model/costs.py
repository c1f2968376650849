"""The cost model: FLOPs and weight bytes of every op of an MoE transformer, and the cycles an op
takes on a rectangular region of PEs. Pure functions, no SimPy (DESIGN.md §3, §5).

An op on a region of ``P`` PEs (``rows × cols``) costs, in clock cycles::

    cycles = task_overhead + fill_drain + max(compute, feed)
    compute     = FLOPs / (P · 2·simd_width · gemm_efficiency)  the datapath, at the fraction of peak it
                                                                sustains inside a distributed GEMM
    feed        = weight_bytes / (rows · link_bytes_per_cycle)  weight streaming keeps activations in place
                                                                and moves the weights: each PE row's share
                                                                of the weights passes its PEs through one
                                                                link per cycle
    fill_drain  = injection + (rows + cols) · hop_latency      a wavefront crossing the region

So an op is compute-bound only if each weight meets enough tokens in a PE: with M tokens over ``cols``
PEs, ``M ≥ cols · 2·simd · gemm_efficiency · bytes_per_value / link_bytes`` (2·cols at full efficiency
on WSE-2 in fp16).
``OpCost.bound`` names the binding term ("compute" or "feed"). With few tokens per expert the feed and
the fixed terms dominate, and the off-wafer weight stream — simulated by the engine — more still: that is
where *compute density* comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config.specs import HardwareSpec, ModelSpec


@dataclass(frozen=True)
class OpCost:
    """Cycles of one op on one region, by term (all in clock cycles)."""

    flops: float
    weight_bytes: float
    compute: float
    feed: float
    fill_drain: float
    overhead: float

    @property
    def cycles(self) -> float:
        return self.overhead + self.fill_drain + max(self.compute, self.feed)

    @property
    def bound(self) -> str:
        return "compute" if self.compute >= self.feed else "feed"


def op_cost(hw: HardwareSpec, rows: int, cols: int, flops: float, weight_bytes: float = 0.0) -> OpCost:
    """The cost of an op of ``flops`` FLOPs using ``weight_bytes`` of weights on a ``rows × cols`` region."""
    pes = rows * cols
    return OpCost(
        flops=flops,
        weight_bytes=weight_bytes,
        compute=flops / (pes * hw.flops_per_cycle_per_pe * hw.runtime.gemm_efficiency),
        feed=weight_bytes / (rows * hw.fabric.link_bytes_per_cycle),
        fill_drain=hw.fabric.injection_latency_cycles + (rows + cols) * hw.fabric.hop_latency_cycles,
        overhead=hw.runtime.task_overhead_cycles,
    )


def op_cycles(hw: HardwareSpec, rows: np.ndarray, cols: np.ndarray, flops: np.ndarray,
              weight_bytes: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """``op_cost`` over arrays (same formula): cycles, and True where compute bounds the op."""
    compute = flops / (rows * cols * hw.flops_per_cycle_per_pe * hw.runtime.gemm_efficiency)
    feed = weight_bytes / (rows * hw.fabric.link_bytes_per_cycle)
    fill = hw.fabric.injection_latency_cycles + (rows + cols) * hw.fabric.hop_latency_cycles
    return hw.runtime.task_overhead_cycles + fill + np.maximum(compute, feed), compute >= feed


# ------------------------------------------------------------------------------------ model arithmetic


@dataclass(frozen=True)
class LayerShapes:
    """Parameter counts and per-token FLOPs of one transformer layer and of the embedding/LM head.

    FLOPs count a multiply-add as 2. Causal attention does half of the S² work. Backward of a matmul is
    two matmuls of the same size (input gradient, weight gradient); backward of the attention core is
    twice its forward.
    """

    model: ModelSpec

    # parameters --------------------------------------------------------------------------------
    @property
    def attention_params(self) -> int:
        """q, k, v, o projections; the two RMSNorm weights and the QK-norm weights."""
        m = self.model
        return m.hidden_size * m.head_dim * (2 * m.heads + 2 * m.kv_heads) + 2 * m.hidden_size + 2 * m.head_dim

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
    def layer_params(self) -> int:
        m = self.model
        return self.attention_params + self.router_params + m.experts * self.expert_params + self.shared_expert_params

    @property
    def embedding_params(self) -> int:
        return self.model.vocab_size * self.model.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.model.tie_word_embeddings else self.model.vocab_size * self.model.hidden_size

    @property
    def total_params(self) -> int:
        return self.model.layers * self.layer_params + self.embedding_params + self.lm_head_params

    @property
    def active_params(self) -> int:
        m = self.model
        per_layer = self.attention_params + self.router_params + m.top_k * self.expert_params + self.shared_expert_params
        return m.layers * per_layer + self.embedding_params + self.lm_head_params

    # forward FLOPs per token ---------------------------------------------------------------------
    def attention_proj_flops(self) -> float:
        """q, k, v and o projections."""
        m = self.model
        return 2.0 * m.hidden_size * m.head_dim * (2 * m.heads + 2 * m.kv_heads)

    def attention_core_flops(self, seq_len: int) -> float:
        """Scores QKᵀ and P·V for every query head, causal (half the S² work)."""
        m = self.model
        return 2 * 2.0 * seq_len * m.heads * m.head_dim * 0.5

    def router_flops(self) -> float:
        return 2.0 * self.router_params

    def expert_slot_flops(self) -> float:
        """One routed slot (a token at one of its top_k experts): gate, up and down."""
        return 2.0 * self.expert_params

    def lm_head_flops(self) -> float:
        return 2.0 * self.model.vocab_size * self.model.hidden_size

    def model_flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token (forward + backward = 3 × forward), excluding recomputation: the
        numerator of MFU."""
        m = self.model
        per_layer = (self.attention_proj_flops() + self.attention_core_flops(seq_len) + self.router_flops()
                     + m.top_k * self.expert_slot_flops() + 2.0 * self.shared_expert_params)
        return 3 * (m.layers * per_layer + self.lm_head_flops())

