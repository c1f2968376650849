"""The words a step is written in: passes, weight copies, tensors, op kinds, phases, tracks and places.

Every name the program, the two engines, the results and the Chrome trace share is a member here, so a
misspelt one fails at import (``Phase.EXPRETS`` is an ``AttributeError``) instead of showing up as a
phase that silently never happens. Each member *is* its string (``Pass.FWD == "fwd"``, and it hashes
like it), so JSON, CSV and trace files read exactly as plain strings would.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Copy", "Gradient", "Name", "OpKind", "Pass", "Phase", "StageOpKind", "Tensor",
           "Track", "Where"]


class Name(str, Enum):
    """A name that is also its own string: ``str(x)``, formatting and JSON give the plain value."""

    def __str__(self) -> str:
        return str.__str__(self)

    __format__ = str.__format__


class Pass(Name):
    """Which pass an op belongs to (the ``pass`` of a span). The LM head runs forward and backward in one
    op per tile."""

    FWD = "fwd"
    RECOMPUTE = "recompute"
    BWD = "bwd"
    FWD_BWD = "fwd+bwd"


class Copy(Name):
    """Which streamed copy of a layer's weights an op reads: the forward's, the backward's, or a copy of
    its own for the recompute (only when a layer does not fit in half the staging buffer).

    Not a ``Pass``, though two of its names are a pass's: a pass says *when* an op runs, a copy *which
    weights* it waits for, and the two part at the recompute, whose pass is ``Pass.RECOMPUTE`` while it
    reads ``Copy.BWD`` (the backward's copy, kept for the backward) unless the layer needs ``Copy.REC``.
    The chunk plan's keys and the trace's chunk names are copies; spans' ``pass`` are passes."""

    FWD = "fwd"
    REC = "rec"
    BWD = "bwd"


class Tensor(Name):
    """The weight tensors the inbound link streams (the chunk plan's keys)."""

    EMBEDDING = "embedding"
    ATTENTION = "attention"
    ROUTER = "router"  # with the shared expert, whose weights feed the PEs with the router's
    FFN = "ffn"
    LM_HEAD = "lm_head"
    GATE_UP = "gate_up"
    DOWN = "down"


class OpKind(Name):
    """What an op of a program does (the ``kind`` of a ``sim.programs.program`` record)."""

    WEIGHTS = "weights"  # wait for a tensor's weights to arrive
    ATTENTION = "attention"
    ROUTER = "router"
    FFN = "ffn"
    LM_HEAD = "lm_head"
    EXPAND = "expand"  # in place: each token's top_k copies
    WEIGHTED_SUM = "weighted_sum"  # in place: the k outputs weighted and summed
    DISPATCH = "dispatch"  # tokens to their experts over the fabric
    COMBINE = "combine"  # expert outputs back over the fabric
    EXPERTS = "experts"  # a layer's experts, under the MoE mapping
    GRADIENT = "gradient"  # hand a weight gradient to the outbound link
    GRADIENT_DRAIN = "gradient_drain"  # wait for the last gradient to leave
    REDUCE_DRAIN = "reduce_drain"  # wait for its sum to come through a cluster's reduce tree
    OPTIMIZER_STEP = "optimizer_step"  # MemoryX updates every weight before the next step can stream
    SERVE_BATCHES = "serve_batches"  # requests over time, each stage running iteration-level batches


class StageOpKind(Name):
    """What one op of a serving stage's work is (``sim.programs.program.Kernel.kind``, docs/model.md §11.2): a
    kernel the kernel layer simulates on the stage's grid (``GEMM``, ``GEMV``, ``ALLREDUCE``, each the
    ``wsesim.kernels`` kind of the same name), SIMD work on every PE's own values (``ELEMENTWISE``:
    norms' squares, RoPE, softmax's exponentials, activations, residuals), or values moved across the
    grid (``TRANSFER``: an MoE token to its experts' regions and back), or the reduce that follows every
    step of WaferLLM's prefill Q·Kᵀ along each row (``ROW_REDUCES``, ``kernels.lines.rotating_reduces``),
    or an MoE token's trips from its stage's first grid to the further grids its experts are on and
    back (``GRID_TRIPS``: expert parallelism, over the fabric or the interconnect)."""

    GEMM = "gemm"
    GEMV = "gemv"
    ALLREDUCE = "allreduce"
    ELEMENTWISE = "elementwise"
    TRANSFER = "transfer"
    ROW_REDUCES = "row_reduces"
    GRID_TRIPS = "grid_trips"


class Phase(Name):
    """The spans of the step's own timeline, in the order results list them; they partition the step."""

    ATTENTION = "attention"
    FFN = "ffn"
    ROUTER = "router"
    DISPATCH = "dispatch"
    EXPAND = "expand"
    EXPERTS = "experts"
    WEIGHTED_SUM = "weighted_sum"
    COMBINE = "combine"
    LM_HEAD = "lm_head"
    WEIGHT_STALL = "weight_stall"
    GRADIENT_STALL = "gradient_stall"
    GRADIENT_DRAIN = "gradient_drain"
    REDUCE_DRAIN = "reduce_drain"
    OPTIMIZER_STEP = "optimizer_step"


class Gradient(Name):
    """The weight gradients handed to the outbound link, as the trace names them."""

    EMBEDDING = "embedding grad"
    ATTENTION = "attention grad"
    ROUTER = "router grad"
    FFN = "ffn grad"
    LM_HEAD = "lm_head grad"
    EXPERTS = "expert grads"


class Track(Name):
    """Timelines of a trace: the step's own (phases that partition it)."""

    STEP = "step"


class Where(Name):
    """Where an op runs: the whole wafer, the expert regions, the fabric between them, or an off-wafer
    link (in: weights; out: gradients)."""

    WAFER = "wafer"
    REGIONS = "regions"
    FABRIC = "fabric"
    LINK_IN = "link in"
    LINK_OUT = "link out"
    MEMORYX = "memoryx"  # the off-wafer weight store, where the optimizer runs
    BETWEEN_WAFERS = "between wafers"
