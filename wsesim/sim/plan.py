"""What the engine consumes and produces: the resolved plan of a step, and the trace of what happened
(spans in clock cycles). Plain data: no SimPy here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config.specs import HardwareSpec, ModelSpec, TrainingSpec

if TYPE_CHECKING:
    from .links import WeightStream

# A span: (track, name, start cycle, end cycle, args).
Span = tuple[str, str, float, float, dict[str, Any]]

# The fabric as the engine sees it: (bytes per expert, reverse) -> (cycles, busiest link's bytes).
DispatchFn = Callable[[np.ndarray, bool], tuple[float, float]]


@dataclass(frozen=True)
class StepPlan:
    """Everything the engine needs, resolved: no YAML and no choice left.

    ``expert_regions[r]`` is region r's (rows, cols) in PEs; ``expert_region_of[e]`` the region of expert
    e; ``tokens[layer, e]`` the routed slots at expert e (each row sums to global tokens · top_k).
    """

    hw: HardwareSpec
    model: ModelSpec
    training: TrainingSpec
    batch_per_tile: int
    tiles: int
    attention_shape: tuple[int, int]
    expert_regions: tuple[tuple[int, int], ...]
    expert_region_of: tuple[int, ...]
    tokens: np.ndarray
    dispatch: DispatchFn

    @property
    def global_batch(self) -> int:
        return self.batch_per_tile * self.tiles


@dataclass(frozen=True)
class ExpertOps:
    """One expert op (``gate_up`` or ``down``) of one layer and pass, on many experts: arrays in cycles."""

    op: str
    pass_: str
    layer: int
    backward: bool
    experts: np.ndarray
    start: np.ndarray
    end: np.ndarray
    weight_wait: np.ndarray  # cycles the op waited for its weights after its region was free
    compute_bound: np.ndarray  # True where compute bounds the op, else the weight feed (costs.op_cost)
    pieces: int = 1  # the op ran in this many pieces (its weights exceeded a chunk); this is one of them


@dataclass
class Trace:
    """What happened, recorded during the run; metrics are computed from it afterwards.

    ``spans`` are (track, name, start, end, args) in cycles on the step's own timeline and the links;
    ``expert_ops`` hold the expert regions' ops as arrays; ``io_in`` is the inbound link's schedule.
    """

    spans: list[Span] = field(default_factory=list)
    expert_ops: list[ExpertOps] = field(default_factory=list)
    io_in: WeightStream | None = None  # the inbound link's schedule: .names, .start, .arrival, .sizes
    gradients: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    gradient_batches: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    step_cycles: float = 0.0
    events: int = 0
    io_bytes_in: float = 0.0
    io_bytes_out: float = 0.0
    dispatched_bytes: float = 0.0
    combined_bytes: float = 0.0
    executed_flops: float = 0.0
    max_link_load_bytes: float = 0.0
    restreamed_for_recompute: bool = False


def route_tokens(model: ModelSpec, training: TrainingSpec, tokens: int, rng: np.random.Generator) -> np.ndarray:
    """Routed slots per expert per layer (``[layers, experts]`` ints; each row sums to ``tokens · top_k``).

    ``uniform``: a multinomial around the balanced mean. ``zipf:alpha``: expert popularity ∝ rank^-alpha,
    ranks permuted per layer. Top-k routing picks k *distinct* experts per token, so no expert gets more
    than ``tokens`` slots: popularity is capped at 1/k (the excess spread over the others), and slots a
    draw puts above the cap are drawn again among the experts with room. With top_k = experts every
    expert gets every token.
    """
    E, L, k = model.experts, model.layers, model.top_k
    alpha = training.zipf_alpha
    out = np.empty((L, E), dtype=np.int64)
    p = _capped(np.full(E, 1.0 / E), k)
    for layer in range(L):
        if alpha is not None:
            p = _capped(rng.permutation(1.0 / np.arange(1, E + 1) ** alpha), k)
        out[layer] = _draw(rng, tokens, k, p)
    return out


def _capped(p: np.ndarray, k: int) -> np.ndarray:
    """``p`` normalised with no share above 1/k, the excess given to the others in proportion."""
    p = p / p.sum()
    cap = 1.0 / k
    while (over := p > cap * (1 + 1e-12)).any():
        free = ~over & (p < cap)
        excess = float((p[over] - cap).sum())
        p = np.where(over, cap, p)
        p[free] += excess * p[free] / p[free].sum()
    return p


def _draw(rng: np.random.Generator, tokens: int, k: int, p: np.ndarray) -> np.ndarray:
    """``tokens · k`` slots over the experts by ``p``, at most ``tokens`` per expert."""
    counts = rng.multinomial(tokens * k, p)
    while (excess := int(np.maximum(counts - tokens, 0).sum())) > 0:
        counts = np.minimum(counts, tokens)
        room = np.where(counts < tokens, p, 0.0)
        counts += rng.multinomial(excess, room / room.sum())
    return counts
