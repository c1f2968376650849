"""Tuning the tiling: the paper's "G tuned per configuration", automated (docs/model.md §3, §5).

Candidates are (G, B) pairs the memory model admits: for every B from 1 to the largest that fits at
G=1, the largest G that still fits (more tokens per step amortise the weight stream best), plus the
powers of two of G with ``batch_per_tile: auto`` (fewer, larger tiles cost less per-tile overhead).
With a fixed ``batch_per_tile`` only G varies. With a fixed ``global_batch`` the batch is not the tuner's
to choose: every G that divides each system's share (up to the most tiles of one sequence that fit) is a
candidate, each with the fewest micro-batches that fit (docs/model.md §2.4). Every candidate is a
re-validated experiment; the best is the highest throughput among the feasible ones, ties going to the
smaller G. The G=1 candidate is always among them.

A dense model's FFN sees G·B, as experts do, so G matters there only as a way past attention's per-tile
memory to a larger batch, and a larger batch only while the step is I/O-bound: the tuner runs the same
search, and on a compute-bound dense model its best is within a few per cent of G=1 (docs/model.md §5.4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..analysis.results import WALL_CLOCK_FIELDS, RunResult
from ..config.errors import ConfigError
from ..config.loader import Loaded, load_experiment_data
from ..config.specs import ExperimentSpec
from .hardware_kinds import hardware_kind
from .runner import run_experiment

MAX_B_CANDIDATES = 24  # beyond this many values of B, try a geometric subset (B is then rarely binding)


@dataclass(frozen=True)
class TuneResult:
    """The best candidate, every candidate run, and ``baseline``: the run at G=1 with the experiment's own
    batch setting (the B ``wsesim run`` picks at G=1, and a sweep's ``speedup`` denominator), one of the
    candidates."""

    best: RunResult
    candidates: tuple[RunResult, ...]
    baseline: RunResult | None = None

    @property
    def gain(self) -> float | None:
        """The best's throughput over the baseline's (None when either is infeasible)."""
        base = self.baseline
        if base is None or not (base.feasible and self.best.feasible):
            return None
        return self.best.throughput_tokens_per_s / base.throughput_tokens_per_s

    def to_dict(self) -> dict[str, Any]:
        return {"best": self.best.to_dict(), "candidates": [c.to_dict() for c in self.candidates],
                "baseline": None if self.baseline is None else {
                    "tiles": self.baseline.tiles, "batch_per_tile": self.baseline.batch_per_tile},
                "gain_over_baseline": self.gain}


def _geometric(n: int) -> list[int]:
    if n <= MAX_B_CANDIDATES:
        return list(range(1, n + 1))
    out, x = {1, n}, 1.0
    while x < n:
        x *= 1.25
        out.add(min(n, int(round(x))))
    return sorted(out)


def candidates(spec: ExperimentSpec) -> list[tuple[int, int | str]]:
    """(G, B) pairs to try, G=1 first. B is an int, or "auto" where the memory model picks it."""
    hw, m, t = spec.hardware, spec.model, spec.training
    max_batch_per_tile, max_tiles = hardware_kind(spec.hardware).fits  # a wafer's SRAM, or a GPU's HBM
    out: dict[tuple[int, int], None] = {}
    if t.global_batch is not None:  # G divides each system's share; B (or the micro-batches) follow
        share, most = t.global_batch // spec.cluster.systems, max(max_tiles(hw, m, t, batch_per_tile=1), 1)
        split = (1 if t.micro_batches == "auto" else int(t.micro_batches)) * (
            1 if t.batch_per_tile == "auto" else int(t.batch_per_tile))
        return [(G, t.batch_per_tile) for G in range(1, min(share, most) + 1) if share % (G * split) == 0]
    if t.batch_per_tile == "auto":
        b1 = max_batch_per_tile(hw, m, t, tiles=1)
        out[(1, max(b1, 1))] = None
        for B in _geometric(b1):
            g = max_tiles(hw, m, t, batch_per_tile=B)
            if g:
                out[(g, B)] = None
        g = 2
        while True:
            B = max_batch_per_tile(hw, m, t, tiles=g)
            if not B:
                break
            out[(g, B)] = None
            g *= 2
    else:
        B = int(t.batch_per_tile)
        gmax = max_tiles(hw, m, t, batch_per_tile=B)
        out[(1, B)] = None
        g = 2
        while g < gmax:
            out[(g, B)] = None
            g *= 2
        if gmax > 1:
            out[(gmax, B)] = None
    return sorted(out, key=lambda gb: (gb[0] != 1, gb[0], gb[1]))


def tune(loaded: Loaded, *, progress: Callable[[RunResult, int], None] | None = None) -> TuneResult:
    """Simulate every candidate of a loaded experiment and pick the best (see the module docstring).

    Candidates are sized for balanced routing; one that the routed load makes infeasible (a hot region
    holds more per PE) is followed by the largest G that fits that load. ``progress(result, planned)`` is
    called after each run (``planned``: the candidates, before any such retry). With no feasible candidate,
    ``best`` is the G=1 one, infeasible: check ``best.feasible``."""
    results: list[RunResult] = []
    tried: set[tuple[int, int | str]] = set()
    hw, m, t = loaded.spec.hardware, loaded.spec.model, loaded.spec.training
    max_tiles = hardware_kind(loaded.spec.hardware).fits[1]
    planned = candidates(loaded.spec)
    for G, B in planned:
        while (G, B) not in tried:
            tried.add((G, B))
            result = run_experiment(_with_tiling(loaded, G, B))
            results.append(result)
            if progress is not None:
                progress(result, len(planned))
            if result.feasible or result.expert_region_load <= 1.0 or not isinstance(B, int):
                break
            G = min(G - 1, max_tiles(hw, m, t, batch_per_tile=B, expert_load=result.expert_region_load))
            if G < 1:
                break
    baseline = _baseline(loaded, results)
    if all(r is not baseline for r in results):  # the B a run at G=1 picks was not a candidate: run it too
        results.append(baseline)
        if progress is not None:
            progress(baseline, len(planned))
    feasible = [r for r in results if r.feasible]
    best = max(feasible, key=lambda r: (r.throughput_tokens_per_s, -r.tiles)) if feasible else results[0]
    return TuneResult(best, tuple(results), baseline)


def _baseline(loaded: Loaded, results: list[RunResult]) -> RunResult:
    """The run at G=1 as ``wsesim run --set training.tiles=1`` would do it (B as the experiment sets it,
    ``auto`` resolved against its own routing): the candidate with that B, else a new run."""
    spec = _with_tiling(loaded, 1, loaded.spec.training.batch_per_tile)
    B = hardware_kind(spec.hardware).baseline_batch(spec)
    same = [r for r in results if r.tiles == 1 and (r.batch_per_tile == B or not B)]
    return same[0] if same else run_experiment(spec)  # (no B fits at G=1: the G=1 candidate, infeasible)


def tuned_row(result: TuneResult) -> RunResult:
    """The best run as a sweep row reports it: its wall-clock time is the whole search's."""
    return replace(result.best, wall_s=sum(c.wall_s for c in result.candidates))


def _with_tiling(loaded: Loaded, G: int, B: int | str) -> ExperimentSpec:
    """The loaded experiment with training.tiles and training.batch_per_tile set, re-validated."""
    return load_experiment_data(loaded.raw, source=loaded.source,
                                overrides={"training.tiles": G, "training.batch_per_tile": B}).spec


# ------------------------------------------------------------------ a global batch over clusters of systems


@dataclass(frozen=True)
class SystemsSearch:
    """``tune`` of one global batch on each number of systems: ``per_systems`` (N, its TuneResult), and the
    counts that could not take the batch (``skipped``: N, why). Throughput here is the cluster's."""

    global_batch: int
    per_systems: tuple[tuple[int, TuneResult], ...]
    skipped: tuple[tuple[int, str], ...] = ()

    def bests(self) -> list[RunResult]:
        """The best feasible candidate on each number of systems, fewest systems first."""
        return [t.best for _, t in self.per_systems if t.best.feasible]

    @property
    def best(self) -> RunResult | None:
        """The highest cluster throughput of all, ties going to fewer systems (None: nothing fits)."""
        bests = self.bests()
        return max(bests, key=lambda r: (r.cluster_throughput_tokens_per_s, -r.systems)) if bests else None

    def efficiency(self, r: RunResult) -> float:
        """What each of ``r``'s systems gives against one system alone: its cluster throughput over N times
        the best on one system when the search ran one system, else the run's own ``scaling_efficiency``
        (against the same experiment on one system)."""
        one = next((t.best for n, t in self.per_systems if n == 1 and t.best.feasible), None)
        if one is None or not one.throughput_tokens_per_s:
            return r.scaling_efficiency
        return r.cluster_throughput_tokens_per_s / (r.systems * one.throughput_tokens_per_s)

    def pareto(self) -> list[RunResult]:
        """The Pareto front of cluster throughput against per-system efficiency (``efficiency``): each best
        that no other best matches on both with more of one, fewest systems first. More systems buy
        throughput and cost efficiency, so a count is off the front when another gives as much throughput
        at no worse efficiency (the same throughput on more systems; weak scaling's first counts, where a
        larger cluster loses nothing)."""
        bests = self.bests()
        scored = [(r.cluster_throughput_tokens_per_s, self.efficiency(r)) for r in bests]
        return [r for r, (t, e) in zip(bests, scored, strict=True)
                if not any(t2 >= t and e2 >= e and (t2, e2) != (t, e) for t2, e2 in scored)]

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {"global_batch": self.global_batch, "best": best.to_dict() if best else None,
                "pareto": [r.to_dict() for r in self.pareto()],
                "efficiency": [{"systems": r.systems, "efficiency": self.efficiency(r)}
                               for r in self.bests()],
                "per_systems": [{"systems": n, "best": t.best.to_dict() if t.best.feasible else None,
                                 "candidates": [c.to_dict() for c in t.candidates]}
                                for n, t in self.per_systems],
                "skipped": [{"systems": n, "why": why} for n, why in self.skipped]}


def with_systems(loaded: Loaded, systems: int) -> Loaded:
    """The loaded experiment on ``systems`` systems, re-validated; behind SwarmX (the shipped interconnect)
    when it names none and ``systems`` > 1."""
    overrides: dict[str, Any] = {"cluster.systems": systems}
    cluster = loaded.raw.get("cluster") or {}
    if systems > 1 and not (isinstance(cluster, dict) and cluster.get("interconnect")):
        overrides["cluster.interconnect"] = "swarmx"
    return load_experiment_data(loaded.raw, source=loaded.source, overrides=overrides)


def search_systems(loaded: Loaded, systems: list[int], *,
                   progress: Callable[[RunResult, int], None] | None = None) -> SystemsSearch:
    """``tune`` a fixed ``training.global_batch`` on each count of ``systems``: G from the tuner, each with
    the fewest micro-batches that fit (more would only stream every weight in again). A count the batch
    does not split over (or that fits nothing) is skipped with the reason."""
    batch = loaded.spec.training.global_batch
    if batch is None:
        raise ConfigError("expected training.global_batch to be set for a search over systems (e.g. "
                          "--set training.global_batch=256)", source="--search-systems")
    done, skipped = [], []
    for n in systems:
        try:
            on_n = with_systems(loaded, n)
        except ConfigError as e:
            skipped.append((n, e.message))
            continue
        done.append((n, tune(on_n, progress=progress)))
    return SystemsSearch(batch, tuple(done), tuple(skipped))


def candidates_table(results: list[tuple[RunResult, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per candidate for a CSV: its marks (``best``, ``pareto``…) then its scalar fields (no host
    wall-clock time)."""
    return [{**marks, **{k: v for k, v in r.scalars().items() if k not in WALL_CLOCK_FIELDS}}
            for r, marks in results]
