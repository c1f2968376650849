"""Analytical SRAM accounting (docs/model.md §5): what must be resident, per PE, in each phase of a step.

``training_memory`` generalises mlsysim's attention-tiling scenario (``wsesim.model.attention_tiling``)
to a batch, all heads (GQA: Q and O per query head, K and V per KV head), the backward pass (three S×S
matrices at the accumulation precision), the experts, the BTA concatenation buffer, streamed weights
and the runtime's reserved SRAM.

Every tensor lives on the whole usable wafer (weight streaming runs each layer on all PEs), so a
tensor of ``n`` bytes costs ``ceil(n / P)`` bytes on each of the ``P`` PEs. Stored activations are
counted at their peak, the start of the backward pass, in every phase. All sizes are bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..config.specs import DTYPE_BYTES, HardwareSpec, ModelSpec, TrainingSpec
from .attention_tiling import AttentionTiling
from .shapes import FFN_MATRICES, LayerShapes

PHASES = ("attention_fwd", "experts_fwd", "ffn_fwd", "lm_head", "experts_bwd", "ffn_bwd", "attention_bwd")
"""Every phase a step may have, in step order (a model without experts has no experts phases, one
without dense layers no FFN phases)."""
EXPERT_PARTS = ("expert_transient", "expert_recompute")
"""Components held only on the expert regions (scaled by a region's load); the rest is on every PE."""


@dataclass(frozen=True)
class PhaseMemory:
    """Bytes per PE resident during one phase, by component."""

    phase: str
    components: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.components.values())


@dataclass(frozen=True)
class TrainingMemory:
    """Per-PE SRAM of every phase of a step against the whole SRAM per PE (the reserved fraction is one of
    each phase's components)."""

    batch_per_tile: int
    tiles: int
    pes: int
    capacity_bytes_per_pe: int
    phases: tuple[PhaseMemory, ...]

    @property
    def binding(self) -> PhaseMemory:
        return max(self.phases, key=lambda p: p.total)

    @property
    def peak_bytes_per_pe(self) -> int:
        return self.binding.total

    def peak_bytes_per_pe_without(self, parts: tuple[str, ...]) -> int:
        """The peak over phases with ``parts`` left out (e.g. ``EXPERT_PARTS``: a PE outside every region)."""
        return max(sum(v for k, v in p.components.items() if k not in parts) for p in self.phases)

    @property
    def feasible(self) -> bool:
        return self.peak_bytes_per_pe <= self.capacity_bytes_per_pe

    @property
    def reason(self) -> str:
        """Why it does not fit ('' when it does): phase, bytes needed, capacity."""
        if self.feasible:
            return ""
        b = self.binding
        top = max(b.components, key=lambda c: b.components[c])
        return (f"SRAM: phase {b.phase} needs {b.total:,.0f} B per PE (largest part: {top}, "
                f"{b.components[top]:,.0f} B) but {self.capacity_bytes_per_pe:,.0f} B are available "
                f"(B={self.batch_per_tile}, G={self.tiles})")


@dataclass(frozen=True)
class TokenFootprint:
    """Bytes per token (or per sequence) of the tensors the phases hold, for one layer."""

    model: ModelSpec
    training: TrainingSpec

    @property
    def b(self) -> int:
        return self.model.bytes_per_value

    @property
    def acc(self) -> int:
        return DTYPE_BYTES[self.training.accumulate_dtype]

    def attention_head_scenario(self) -> AttentionTiling:
        m, t = self.model, self.training
        return AttentionTiling(seq_len=t.seq_len, head_dim=m.head_dim, tile=t.attention_tile, heads=m.heads,
                               bytes_per_value=float(self.b))

    def attention_io_per_seq(self) -> float:
        """Q and O for every query head, K and V for every KV head (mlsysim's io_tensors, GQA-aware)."""
        m = self.model
        return sum(LayerShapes(m).qkvo_widths) * self.training.seq_len * self.b

    def attention_fwd_per_seq(self) -> float:
        """Forward transient of one sequence, all heads: mlsysim's stored_standard / stored_flash."""
        m, t, a = self.model, self.training, self.attention_head_scenario()
        if t.attention_kernel == "standard":
            return self.attention_io_per_seq() + m.heads * a.stored_square_matrices * a.score_matrix
        return (self.attention_io_per_seq() + m.heads * a.row_statistics * t.seq_len * self.acc
                + m.heads * t.attention_tile**2 * self.acc)

    def attention_bwd_per_seq(self) -> float:
        """Backward transient of one sequence: the forward tensors and their gradients, plus the S×S
        probabilities, their gradient and the scores' gradient at the accumulation precision (standard),
        or row statistics, the dO·O row sums and three working tiles (flash)."""
        m, t = self.model, self.training
        io = 2 * self.attention_io_per_seq()
        if t.attention_kernel == "standard":
            return io + 3 * m.heads * t.seq_len**2 * self.acc
        return io + (2 + 1) * m.heads * t.seq_len * self.acc + 3 * m.heads * t.attention_tile**2 * self.acc

    def attention_saved_per_token(self) -> float:
        """What the attention sub-block keeps for its backward: layer input, norm output, Q, K, V, output."""
        m = self.model
        return (2 * m.hidden_size + sum(LayerShapes(m).qkvo_widths)) * self.b

    def attention_saved_per_seq(self) -> float:
        """Per sequence, beyond the per-token part: the probabilities (standard) or row statistics (flash)."""
        m, t = self.model, self.training
        if t.attention_kernel == "standard":
            return m.heads * t.seq_len**2 * self.b
        return 2 * m.heads * t.seq_len * self.acc

    def experts_saved_per_token(self) -> float:
        """What the MoE sub-block keeps (per token): residual, norm output, router logits, and per routed
        slot the dispatched input, gate and up outputs, and the expert output (for the combine's backward)."""
        m = self.model
        slot = 2 * m.hidden_size + 2 * m.expert_intermediate
        shared = 3 * m.shared_expert_intermediate
        return (2 * m.hidden_size + m.experts + m.top_k * slot + shared) * self.b

    def experts_grad_per_token(self) -> float:
        """Backward working set per token beyond the saved tensors: per slot the gradients of gate, up and
        the dispatched input, and the gradient flowing back into the residual stream."""
        m = self.model
        return (m.top_k * (2 * m.expert_intermediate + m.hidden_size) + m.hidden_size
                + 2 * m.shared_expert_intermediate) * self.b

    def ffn_saved_per_token(self) -> float:
        """What a dense FFN keeps (per token): its input and norm output (none in a parallel block: they are
        attention's), and gate and up outputs (SwiGLU) or the pre-activation (GELU); the activation is
        recomputed from them for the down projection's weight gradient."""
        m = self.model
        inputs = 0 if m.parallel_block else 2 * m.hidden_size
        return (inputs + (FFN_MATRICES[m.ffn_activation] - 1) * m.ffn_intermediate) * self.b

    def ffn_grad_per_token(self) -> float:
        """Backward working set of a dense FFN per token: the gradients of what it kept, of its input, and
        of the residual stream."""
        m = self.model
        return ((FFN_MATRICES[m.ffn_activation] - 1) * m.ffn_intermediate + 2 * m.hidden_size) * self.b

    def layer_saved_per_token(self, dense: bool = False) -> float:
        """Stored for the backward pass per token per layer (MoE, or ``dense``) under the activation
        policy."""
        if self.training.activations == "recompute":
            # once: attention's output too, to rebuild the MoE or FFN input without attention (a parallel
            # block's FFN reads the layer's input: it never needs attention's output)
            kept = 2 if self.training.attention_recompute == "once" and not self.model.parallel_block else 1
            return kept * self.model.hidden_size * self.b  # the layer's input
        return self.attention_saved_per_token() + (self.ffn_saved_per_token() if dense
                                                   else self.experts_saved_per_token())

    def layer_saved_per_seq(self) -> float:
        if self.training.activations == "recompute":
            return 0.0
        return self.attention_saved_per_seq()

    def lm_head_per_token(self) -> float:
        """Logits at the accumulation precision, their gradient computed in place (the loss runs per tile)."""
        return self.model.vocab_size * self.acc


def _spread(total_bytes: float, pes: int) -> int:
    return math.ceil(total_bytes / pes)


def training_memory(hw: HardwareSpec, model: ModelSpec, training: TrainingSpec, *, batch_per_tile: int,
                    tiles: int | None = None, expert_load: float = 1.0) -> TrainingMemory:
    """Per-phase, per-PE SRAM for ``batch_per_tile`` sequences per attention tile and ``tiles`` tiles
    (default: ``training.tiles``). ``expert_load`` is the busiest expert region's tokens per PE over the
    wafer-wide mean (≥ 1): that region holds that much more of the expert working set per PE. Never
    raises for a configuration that does not fit: the result's ``feasible`` and ``reason`` say so."""
    G = training.tiles if tiles is None else tiles
    B, S, L, P = batch_per_tile, training.seq_len, model.layers, hw.pes
    f = TokenFootprint(model, training)
    shapes = LayerShapes(model)
    b = f.b
    tile_tokens, step_tokens = B * S, G * B * S
    hot = step_tokens * max(1.0, expert_load)  # tokens' worth of expert working set on the busiest region
    # the LM head's weights stay resident across the tiles of the loss (tied: the embedding's)
    lm_head_weights = model.vocab_size * model.hidden_size * b

    dense_layers = model.dense_layer_count
    moe_layers = L - dense_layers
    if dense_layers:  # stored per layer, by kind
        saved = step_tokens * (moe_layers * f.layer_saved_per_token()
                               + dense_layers * f.layer_saved_per_token(True))
        stored = saved + L * G * B * f.layer_saved_per_seq()
    else:
        stored = L * (step_tokens * f.layer_saved_per_token() + G * B * f.layer_saved_per_seq())
    common = {
        "reserved": math.ceil(hw.pe.sram_bytes * hw.pe.reserved_fraction),
        "staging": math.ceil(hw.runtime.staging_bytes),
        # attention with the router and shared expert (MoE) or with the FFN (dense) stay resident through
        # their layer's tiles: the larger of the two kinds the model has
        "resident_weights": _spread(max(shapes.resident_params(dense)
                                        for dense, n in ((False, moe_layers), (True, dense_layers))
                                        if n) * b, P),
        "stored_activations": _spread(stored, P),
        "concat_buffer": _spread(step_tokens * model.hidden_size * b, P),
    }
    recompute = training.activations == "recompute"
    moe = [
        PhaseMemory("experts_fwd", {**common,
                                    "expert_transient": _spread(hot * f.experts_saved_per_token(), P)}),
        PhaseMemory("experts_bwd", {
            **common,
            **({"expert_recompute": _spread(hot * f.experts_saved_per_token(), P)} if recompute else {}),
            "expert_transient": _spread(hot * f.experts_grad_per_token(), P)}),
    ] if moe_layers else [None, None]
    dense = [
        PhaseMemory("ffn_fwd", {**common,
                                "ffn_transient": _spread(step_tokens * f.ffn_saved_per_token(), P)}),
        PhaseMemory("ffn_bwd", {
            **common,
            **({"ffn_recompute": _spread(step_tokens * f.ffn_saved_per_token(), P)} if recompute else {}),
            "ffn_transient": _spread(step_tokens * f.ffn_grad_per_token(), P)}),
    ] if dense_layers else [None, None]
    phases = (
        PhaseMemory("attention_fwd", {**common,
                                      "attention_transient": _spread(B * f.attention_fwd_per_seq(), P)}),
        moe[0], dense[0],
        PhaseMemory("lm_head", {**common, "lm_head_weights": _spread(lm_head_weights, P),
                                "lm_head_transient": _spread(tile_tokens * f.lm_head_per_token(), P)}),
        moe[1], dense[1],
        PhaseMemory("attention_bwd", {
            **common,
            **({"attention_recompute": _spread(tile_tokens * f.attention_saved_per_token(), P)}
               if recompute else {}),
            "attention_transient": _spread(B * f.attention_bwd_per_seq(), P)}),
    )
    capacity = math.floor(hw.pe.sram_bytes)
    return TrainingMemory(B, G, P, capacity, tuple(p for p in phases if p is not None))


def _largest(fits: Callable[[int], bool], limit: int) -> int:
    """The largest n in 1..limit with fits(n), for a monotone ``fits`` (0 if not even 1 fits)."""
    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def max_batch_per_tile(hw: HardwareSpec, model: ModelSpec, training: TrainingSpec, *,
                       tiles: int | None = None, expert_load: float = 1.0, limit: int = 1 << 20) -> int:
    """The largest B whose peak fits with ``tiles`` tiles (what ``batch_per_tile: auto`` resolves to);
    0 when not even B=1 fits. Peak memory grows with B, so this is a binary search."""
    return _largest(lambda B: training_memory(hw, model, training, batch_per_tile=B, tiles=tiles,
                                              expert_load=expert_load).feasible, limit)


def max_tiles(hw: HardwareSpec, model: ModelSpec, training: TrainingSpec, *, batch_per_tile: int,
              expert_load: float = 1.0, limit: int = 1 << 16) -> int:
    """The largest G whose peak fits with ``batch_per_tile`` sequences per tile; 0 when G=1 does not fit.
    What stays resident for backward grows with G·B, so this too is a binary search."""
    return _largest(lambda G: training_memory(hw, model, training, batch_per_tile=batch_per_tile, tiles=G,
                                              expert_load=expert_load).feasible, limit)
