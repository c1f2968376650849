"""What the engine consumes and produces: the resolved plan of a step, and the trace of what happened
(spans in clock cycles). Plain data: no SimPy here.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ...config.specs import HardwareSpec, ModelSpec, TrainingSpec
from ...model.costs import ExpertCosts
from ...model.vocabulary import OpKind, Phase, Track
from .cluster import Tree

if TYPE_CHECKING:
    from .program import Transfer


class Span(NamedTuple):
    """Something that took time on a track: ``name`` from ``start`` to ``end`` (cycles), with ``args``."""

    track: Track
    name: str
    start: float
    end: float
    args: dict[str, Any]


# The fabric as the cost pass sees it: (bytes per expert, reverse) -> (cycles, busiest link's bytes).
DispatchFn = Callable[[np.ndarray, bool], tuple[float, float]]
# The MoE mapping's cost of every expert op of a step (``experiments.mappings``), asked by the cost pass.
ExpertsCostFn = Callable[["StepPlan"], ExpertCosts]


@dataclass(frozen=True)
class StepPlan:
    """Everything the cost pass and the executors need, resolved: no YAML and no choice left. What the step
    costs is not here: ``dispatch`` (the fabric fidelity's timer) and ``cost_experts`` (the MoE mapping's)
    are asked once, by the cost pass (``costing.cost_program``), before an executor runs.

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
    cost_experts: ExpertsCostFn
    moe_mapping: str = "regions"  # "in_place": experts on the whole wafer, no dispatch or combine
    micro_batches: int = 1  # gradient accumulation: the step runs this many micro-batches of G·B
    tree: Tree | None = None  # the cluster's broadcast-reduce tree (None: one system)
    compute: str = "constant"  # the compute model (costing.COMPUTE_MODELS) that costs the step's ops

    @property
    def global_batch(self) -> int:
        """Sequences of one micro-batch on one system (G·B): what the MoE and FFN layers run on at once."""
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


@dataclass(frozen=True)
class LinkSchedule:
    """What the inbound link carried: chunk i (key ``names[i]``, ``sizes[i]`` bytes) started at cycle
    ``start[i]`` and had arrived by ``arrival[i]`` (NaN for a chunk never scheduled)."""

    names: tuple[tuple[Any, ...], ...]
    sizes: np.ndarray
    start: np.ndarray
    arrival: np.ndarray
    # (cycle, bytes) of every free of staging room, if recorded
    freed: tuple[np.ndarray, np.ndarray] | None = None


@dataclass
class BatchLog:
    """A serving run (docs/model.md §11.7), per request r (NaN where it never
    happened: a refused request, ``refused[r]``): the cycle it was ``admitted``, the cycle the first
    iteration taking its prompt ``started`` at the first stage, its ``first`` token's cycle and the cycle
    it ``finished``; per stage s ``busy[s]`` cycles of iterations; every iteration, in the order
    they ran: its ``stage``, ``start`` and ``end`` cycles, ``decodes`` (decode tokens) and
    ``prompt_tokens`` (prompt tokens it took in); and every output token's cycle, ``emitted``: request
    r's token k (0: its first) at ``emitted[o_r + k]``, o_r the sum of the outputs of the requests
    before r (``ServeBatches.output``; a refused request's tokens NaN), 8 bytes an output token. What
    each iteration was made of, for its events (``BatchCosts.counts``): its ``longest`` decode context
    (0 without decodes), its prompt ``pieces``, the context the furthest of them ``reach``es, how many
    ``ends`` its prompt, and the values ``moved`` to the next stage after it (0: none) and when they
    ``landed`` there (queued behind the hand-off before them on the same link)."""

    admitted: np.ndarray
    started: np.ndarray
    first: np.ndarray
    finished: np.ndarray
    refused: np.ndarray
    busy: np.ndarray
    stage: np.ndarray
    start: np.ndarray
    end: np.ndarray
    decodes: np.ndarray
    prompt_tokens: np.ndarray
    emitted: np.ndarray
    longest: np.ndarray
    pieces: np.ndarray
    reach: np.ndarray
    ends: np.ndarray
    moved: np.ndarray
    landed: np.ndarray  # the cycle the iteration's hand-off landed at the next station (NaN: none)
    # each station's name, by index of ``stage`` ("stage 0" …, "draft"), and the positions a decode token
    # carries through the stages (K + 1: a verify pass)
    names: tuple[str, ...] = ()
    width: int = 1
    # a paged cache's events (``ServeBatches.kv_block``), one row each, by start then kind then request:
    # (kind, request, start, end, tokens) — kind 0 a preemption to recompute (start = end), 1 a swap out
    # to MemoryX, 2 a swap back in — ``tokens`` the cache tokens dropped or moved
    kv_events: np.ndarray = field(default_factory=lambda: np.zeros((0, 5)))
    # cycles work queued at each station before an iteration took it, in all (by request, summed)
    waited: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # with ``ServeBatches.members``, each iteration's decode requests and prompt pieces (request, start,
    # tokens), in the order of the columns; else empty
    members: tuple[tuple[tuple[int, ...], tuple[tuple[int, int, int], ...]], ...] = ()
    # with sampled routing, each station's ``moe_serving.BatchExperts.use()`` over the run (None: none drawn)
    expert_use: tuple[tuple[tuple[float, ...], float] | None, ...] = ()
    # per iteration (a row each, in ``stage``'s order): the cycles of its stage's MoE layers' expert
    # dispatch, experts and combine, each summed over those layers (``BatchCosts.experts``; 0 on a dense one)
    experts: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))

    def __post_init__(self) -> None:
        self.experts = np.asarray(self.experts, dtype=np.float64).reshape(-1, 3)  # any buffer, 3 a row

    @property
    def preemptions(self) -> int:
        """Requests preempted, counting each time (a recompute's drop or a swap out)."""
        return int(np.count_nonzero(self.kv_events[:, 0] < 2)) if len(self.kv_events) else 0

    @property
    def end_cycle(self) -> float:
        done = self.finished[~np.isnan(self.finished)]
        return float(done.max()) if done.size else 0.0


ITERATION_COUNTS = ("stage", "decodes", "prompt_tokens", "longest", "pieces", "reach", "ends")
ITERATION_TIMES = ("start", "end", "moved", "landed")
"""A ``BatchLog``'s per-iteration columns, as the scheduler logs them: two rows an iteration, its counts and
its times (``iteration_columns``)."""


def iteration_columns(counts: array, times: array) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The log's columns by name ( counts as integers, cycles as floats), the
    iterations by start then stage, and that order (the logged rows' indices), from the rows as the
    scheduler logs them, flat: ``counts`` (``ITERATION_COUNTS``, C ints: array "i") and ``times``
    (``ITERATION_TIMES``, doubles: cycles, and values moved, exact below 2^53). Rows already in that
    order (one station's, as a rule) become the columns as views of the arrays, no copy; the values
    moved a column of int64."""
    ints = np.frombuffer(counts, dtype=np.intc).reshape(-1, len(ITERATION_COUNTS))
    floats = np.frombuffer(times, dtype=np.float64).reshape(-1, len(ITERATION_TIMES))
    stage, start = ints[:, 0], floats[:, 0]
    step = np.diff(start)
    if bool(np.all((step > 0) | ((step == 0) & (np.diff(stage) >= 0)))):  # lexsort's order already
        order = np.arange(len(start))
    else:
        order = np.lexsort((stage, start))
        ints, floats = ints[order], floats[order]
    columns = {**{name: ints[:, i] for i, name in enumerate(ITERATION_COUNTS)},
               **{name: floats[:, i] for i, name in enumerate(ITERATION_TIMES)}}
    columns["moved"] = columns["moved"].astype(np.int64)
    return columns, order


def kv_events(rows: list[tuple[float, float, float, float, float]]) -> np.ndarray:
    """A paged cache's events as ``BatchLog.kv_events`` (each executor logs them in its own order): by
    start, then kind, then request."""
    a = np.array(rows, dtype=float).reshape(-1, 5)
    return a[np.lexsort((a[:, 1], a[:, 0], a[:, 2]))]


@dataclass
class Trace:
    """What happened, recorded during the run; metrics are computed from it afterwards.

    ``spans`` are (track, name, start, end, args) in cycles on the step's own timeline and the links
    (a serving run's: one per stage visit, on the stage track); ``expert_ops`` hold the expert regions'
    ops as arrays; ``io_in`` is the inbound link's schedule; ``stages`` a serving run's stage log
    (``batches`` a continuously batched one's).
    """

    spans: list[Span] = field(default_factory=list)
    expert_ops: list[ExpertOps] = field(default_factory=list)
    io_in: LinkSchedule | None = None
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
    staging_held_at_end: float = 0.0  # weight bytes still reserved in the staging buffer (0 when all freed)
    batches: BatchLog | None = None

    def fabric_span(self, op: Transfer, start: float, end: float, total_bytes: float,
                    max_load: float) -> None:
        """Record a dispatch or combine over the fabric: its span and the bytes it moved."""
        self.max_link_load_bytes = max(self.max_link_load_bytes, max_load)
        if op.reverse:
            self.combined_bytes += total_bytes
        else:
            self.dispatched_bytes += total_bytes
        self.spans.append(Span(Track.STEP, op.kind, start, end, {
            **op.args, "bytes": total_bytes, "max_link_load_bytes": max_load}))

    def experts_spans(self, start: float, end: float, waited: float, layer: int, pass_: str) -> None:
        """An experts phase from ``start`` to ``end`` whose critical path (the region that finished last,
        or the wafer) waited ``waited`` cycles for weights: ``experts`` up to those waits, then
        ``weight_stall`` (``during: experts``) for them — an accounting of the critical path, not the
        order in which it waited."""
        split = min(max(end - waited, start), end)
        self.spans.append(Span(Track.STEP, Phase.EXPERTS, start, split, {"layer": layer, "pass": pass_}))
        if split < end:
            self.spans.append(Span(Track.STEP, Phase.WEIGHT_STALL, split, end,
                                   {"layer": layer, "pass": pass_, "during": OpKind.EXPERTS}))
