"""What a run will cost, estimated from its spec before anything is built (the routing arrays
included), so that work that cannot finish on this machine is refused up front with a line that names
the term that dominates, the predicted time and memory, and the override that would fit.

The estimate sums terms, each a count the simulation's cost scales with times a constant (seconds, peak
bytes), from the spec alone (no mesh, no placement, no routing is built): ``mesh`` (the mesh nodes ``N``
and, with the flow fabric, its dispatch and combine bases over ``N`` × the expert regions ``R``, built
once per process: ``setup_seconds``), ``packet`` (a packet fabric's link grants), ``micro-batches`` (the
engine's layers and experts per micro-batch, and the trace it holds), ``tiles`` (attention spans),
``routing`` (the routed slots), the MoE mapping's own (``in_place``: its column draws and expert layout)
and the compute model's (``kernel``: its cost lookups), and ``wafer maps`` (``--out``, ``--png``). A
cluster is simulated twice and then on one system at the same global batch, so the engine terms count
all three. Each term's count, constants and what they were measured on are in docs/architecture.md ("The
work estimate"); the estimate is good to a factor of about two, enough to tell minutes from days.

A step that does not fit even with balanced routing (``surely_infeasible``) is sized and returned with
its reason, nothing built: its estimate is the routing term alone (an infeasible point is a result).
``tune`` and a tuned sweep point sum every candidate (``estimate_search``); a sweep sums its points over
its workers, each holding its own process (``check_sweep``); ``wsesim fabric`` has its own
(``check_fabric``). A run is refused when its memory exceeds ``machine.memory_limit`` or its time
``max_run_seconds()`` (``WSESIM_MAX_RUN_S``, default 30 minutes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..config.errors import ConfigError
from ..config.specs import ExperimentSpec
from ..model.memory import max_batch_per_tile, training_memory
from .machine import (
    DEFAULT_MAX_RUN_SECONDS,
    _duration,
    _size,
    about,
    machine_memory,
    max_run_seconds,
    max_sweep_seconds,
    memory_limit,
    refuse_work,
    too_much_memory,
)
from .mappings import moe_mapping

BASE_BYTES = 250e6               # the interpreter, numpy, SimPy and the model's own arrays
WORKER_BYTES = 60e6              # a sweep's worker process before its first point
MESH_NODE_SECONDS = 1.2e-5       # per mesh node: the mesh, its links, per-node arrays ...
MESH_NODE_KNEE = 2.5e5           # ... growing with the mesh: × (1 + N / knee)
BASIS_BYTES = 220.0             # peak per (mesh node × expert region), both bases and the plan
BASIS_SECONDS = 1.2e-6           # per (mesh node × expert region) to build both bases
# (seconds, peak bytes) per link grant: a packet fabric simulates every dispatch and combine message by
# message, about N·(R + 1) messages of K stripes, each granted every link of its route ((rows/K + cols/K)/3
# + 2 on average); a fidelity not in it is costed as flow is, by its bases
PACKET_GRANT = {"packet": (0.11e-6, 6.0), "packet-simpy": (8e-6, 40.0)}
ENGINE_SECONDS = {"fast": 12e-6, "reference": 4.5e-4}  # per (micro-batch × layer × expert)
ENGINE_LAYER_SECONDS = {"fast": 0.4e-3, "reference": 1.5e-3}  # per (micro-batch × layer)
ENGINE_KNEE = 1e7                # micro-batch × layer × expert: beyond, each costs more
                                 # (× (1 + count / knee))
TRACE_BYTES = {"fast": (20e3, 0.9e3), "reference": (40e3, 11e3)}  # per (micro-batch × layer): + per expert
SPAN = (3.5e-6, 550.0)          # (seconds, bytes) per attention span: 4 per micro-batch, layer and tile
ROUTE = (30e-9, 32.0)            # (seconds, bytes) per routed number (layer × expert) and draw
MAP = (16e-6, 1.5e3)             # (seconds, bytes) per PE for the wafer maps (--out's wafer.json, --png)
MAX_SWEEP_POINTS = 10_000        # a sweep's points: each is validated and estimated before any runs
FABRIC_PAIR_BYTES = 8.0          # wsesim fabric --pattern dispatch: per (mesh node × expert region)
# in_place, per (layer × expert × PE column): a + b·√(copies each) seconds, at most c (numpy's binomial:
# 33-44 ns at 0.3-0.8 copies, 67 at 3.9, 123 at 15; a constant ~90 ns past ~30 copies)
IN_PLACE_DRAW = (20e-9, 27e-9, 110e-9)
IN_PLACE_EXPERT_SECONDS = 1.8e-5  # in_place: per (micro-batch × layer × expert), its ops laid one by one
KERNEL_LOOKUPS = (20.0, 0.55)    # compute: kernel: cost lookups per layer, + per expert
COMPUTE_LOOKUP_SECONDS = {"kernel": 7.4e-6}  # per lookup (the cached kernel cost and its op's share);
                                 # constant's cost pass is arithmetic, in the engine term


@dataclass(frozen=True)
class WorkEstimate:
    """The counts a run's cost follows, and the seconds and bytes they come to (one run)."""

    mesh_nodes: int
    regions: int
    layers: int
    experts: int
    packet_messages: int  # per dispatch (0 with the flow fabric)
    packet_events: float  # over the whole step
    seconds: float  # one run, the bases included
    bytes: float
    # the term that dominates: "mesh", "packet", "micro-batches", "tiles", "routing", "wafer maps"
    driver: str
    setup_seconds: float = 0.0  # of ``seconds``: the bases, built once per process
    micro_batches: int = 1
    tiles: int = 1
    systems: int = 1
    terms: dict[str, tuple[float, float]] = field(default_factory=dict)  # term -> (seconds, bytes)
    one_system_micro_batches: int = 0  # a cluster's reference run on one system (0: not a cluster)

    def total_seconds(self, runs: int = 1) -> float:
        """``runs`` runs on the same wafer in one process (a tuner's candidates): the bases once."""
        return self.setup_seconds + runs * (self.seconds - self.setup_seconds)

    def describe(self, runs: int = 1) -> str:
        counts = f"{self.mesh_nodes:,} mesh nodes × {self.regions:,} expert regions"
        if self.packet_messages:
            counts += (f", {self.packet_messages:,} packet messages per dispatch × {2 * self.layers} "
                       f"dispatches ≈ {self.packet_events:.2g} events")
        counts += (f", {self.micro_batches:,} micro-batch{'es' if self.micro_batches != 1 else ''} "
                   f"× {self.layers} layers")
        counts += f" × {self.experts:,} experts" + (f" × {self.tiles:,} tiles" if self.tiles > 1 else "")
        if self.systems > 1 and self.one_system_micro_batches:
            counts += (f", {self.systems} systems (simulated twice, then one system alone at the same batch: "
                       f"{self.one_system_micro_batches:,} micro-batches)")
        elif self.systems > 1:
            counts += f", {self.systems} systems"
        runs_text = f" for {runs} runs" if runs > 1 else ""
        took = about(self.total_seconds(runs))
        return f"{took} and {_size(self.bytes)}{runs_text} ({counts}), mostly {self.driver}"


def estimate_work(spec: ExperimentSpec, *, wafer_maps: bool = False,
                  micro_batches: int | None = None) -> WorkEstimate:
    """The cost of simulating one step of ``spec`` (see the module docstring); ``wafer_maps``: and writing
    its wafer maps. ``micro_batches``: the count the run resolved, else the fewest it can resolve to."""
    hw, m, sim, t = spec.hardware, spec.model, spec.simulation, spec.training
    k = sim.block
    rows, cols = -(-hw.mesh.rows // k), -(-hw.mesh.cols // k)
    nodes = rows * cols
    # a region per expert, tiled in whole PEs (``expert_placement``): past the mesh's nodes several share
    # a node, but each is still a column of both bases and of the idle regions' path tables
    regions = min(m.experts, hw.pes)  # 0 for a dense model
    if regions and not moe_mapping(sim.moe_mapping).dispatched:  # one region, the whole wafer: nothing sent
        regions = 1
    engine = getattr(sim, "engine", "fast")
    terms: dict[str, tuple[float, float]] = {}
    mesh_s = MESH_NODE_SECONDS * nodes * (1 + nodes / MESH_NODE_KNEE)
    basis_s, basis_bytes = BASIS_SECONDS * nodes * regions, BASIS_BYTES * nodes * regions
    messages, events = 0, 0.0
    if sim.fabric in PACKET_GRANT and regions:
        messages = nodes * (regions + 1)  # one per (source, region) and one per region node
        events = 2.0 * m.layers * messages * k * ((rows + cols) / 3 + 2)
        per_s, per_bytes = PACKET_GRANT[sim.fabric]
        terms["packet"] = (per_s * events, per_bytes * events / (2 * m.layers))  # one dispatch at a time
        basis_s, basis_bytes = 0.0, 0.0  # a packet fabric builds no basis
    terms["mesh"] = (mesh_s + basis_s, basis_bytes)
    M = micro_batches if micro_batches is not None else fewest_micro_batches(spec)
    cluster = spec.cluster.systems > 1 and spec.cluster.interconnect is not None
    # a cluster runs its step twice (with its tree, and alone for the tree's efficiency) and then the
    # experiment on one system (``one_system_throughput``, the scaling efficiency's reference): the same
    # global batch, so systems × the micro-batches; memory: the cluster's trace kept, the larger other one
    alone_M = _one_system_micro_batches(spec, M, micro_batches) if cluster else 0
    sims = (2 * M + alone_M) / M if cluster else 1
    held = (M + max(M, alone_M)) / M if cluster else 1
    E, L = m.experts, m.layers
    per_layer = ENGINE_LAYER_SECONDS.get(engine, max(ENGINE_LAYER_SECONDS.values()))
    per_expert = ENGINE_SECONDS.get(engine, max(ENGINE_SECONDS.values()))
    grow = 1 + max(M, alone_M) * L * E / ENGINE_KNEE
    trace_layer, trace_expert = TRACE_BYTES.get(engine, TRACE_BYTES["reference"])
    terms["micro-batches" if M > 1 else "experts"] = (sims * M * L * (per_layer + E * per_expert) * grow,
                                                      held * M * L * (trace_layer + E * trace_expert))
    spans = 4.0 * M * L * t.tiles  # forward, recompute, and backward twice: one span per tile each
    terms["tiles"] = (sims * spans * SPAN[0], sims * spans * SPAN[1])
    draws = 2 if t.batch_per_tile == "auto" else 1
    terms["routing"] = (draws * L * max(E, 1) * ROUTE[0], L * max(E, 1) * ROUTE[1])
    # the mapping's and the compute model's own work, by their tables' names (regions' and constant's: the
    # engine terms'), as a run chooses them
    if E and (mapping_term := MAPPING_WORK.get(sim.moe_mapping)) is not None:
        terms[sim.moe_mapping] = mapping_term(spec, M, sims)
    if (per_lookup := COMPUTE_LOOKUP_SECONDS.get(sim.compute)) is not None:
        lookups = L * (KERNEL_LOOKUPS[0] + KERNEL_LOOKUPS[1] * E)
        terms[sim.compute] = (sims * lookups * per_lookup, 0.0)
    if surely_infeasible(spec):  # sized, found not to fit, and returned with its reason: nothing built
        terms = {"routing": terms["routing"]}
    if wafer_maps:
        terms["wafer maps"] = (hw.pes * MAP[0], hw.pes * MAP[1])
    seconds = sum(s for s, _ in terms.values())
    nbytes = BASE_BYTES + sum(b for _, b in terms.values())
    driver = max(terms, key=lambda name: max(terms[name][0] / max_run_seconds_or_default(),
                                             terms[name][1] / memory_limit()))
    return WorkEstimate(nodes, regions, L, E, messages, events, seconds, nbytes, driver, basis_s + mesh_s,
                        micro_batches=M, tiles=t.tiles, systems=spec.cluster.systems, terms=terms,
                        one_system_micro_batches=alone_M)


def _in_place_term(spec: ExperimentSpec, micro_batches: int, sims: float) -> tuple[float, float]:
    """(seconds, peak bytes) the ``in_place`` mapping adds to a run: the copies' spread over the PE
    columns, ``L·E·C`` binomial draws once per run at the step's size (each dearer the more copies it
    deals, until numpy's constant-time sampler takes over), and the experts' ops laid out one by one in
    Python; the draws hold one layer's ``E × C`` counts at a time."""
    hw, m, t = spec.hardware, spec.model, spec.training
    C, E, L = hw.mesh.cols, m.experts, m.layers
    B = t.batch_per_tile if isinstance(t.batch_per_tile, int) else max(max_batch_per_tile(hw, m, t), 1)
    copies = B * t.tiles * t.seq_len * m.top_k / (E * C)
    a, b, most = IN_PLACE_DRAW
    draw = L * E * C * min(a + b * math.sqrt(copies), most)
    return sims * (draw + micro_batches * L * E * IN_PLACE_EXPERT_SECONDS), 8.0 * E * C


MAPPING_WORK: dict[str, Any] = {"in_place": _in_place_term}
"""The work a mapping adds to a run, by ``simulation.moe_mapping`` (``regions``: none beyond the engine's)."""


def _one_system_micro_batches(spec: ExperimentSpec, M: int, given: int | None) -> int:
    """The micro-batches of a cluster's reference run, the experiment on one system: the same global batch
    (when set), so its per-system share is ``systems`` times larger; else the same per-system batch (M)."""
    t = spec.training
    if t.global_batch is None:
        return M
    if given is not None and t.micro_batches == "auto":  # the count the cluster resolved, scaled
        return given * spec.cluster.systems
    one = spec.model_copy(update={"cluster": type(spec.cluster)(systems=1)})
    return fewest_micro_batches(one)


def surely_infeasible(spec: ExperimentSpec) -> bool:
    """Whether the step does not fit even with balanced routing (a hot region only needs more), so that
    the run stops after sizing, a result with its reason: B as set (or as the global batch and the
    micro-batches give it), or with ``auto`` not even B=1."""
    hw, m, t = spec.hardware, spec.model, spec.training
    B: Any = t.batch_per_tile
    if B == "auto" and t.global_batch is not None and t.micro_batches != "auto":
        B = max(t.global_batch // spec.cluster.systems // t.tiles // int(t.micro_batches), 1)
    if B == "auto":
        return max_batch_per_tile(hw, m, t) == 0
    return not training_memory(hw, m, t, batch_per_tile=int(B)).feasible


def fewest_micro_batches(spec: ExperimentSpec) -> int:
    """The micro-batches a step of ``spec`` runs: as set, or (``global_batch`` with ``auto``) the fewest
    it can resolve to, from the memory model alone (B no larger than fits with balanced routing)."""
    t = spec.training
    if t.micro_batches != "auto":
        return int(t.micro_batches)
    if t.global_batch is None:
        return 1
    per_tile = max(t.global_batch // spec.cluster.systems // t.tiles, 1)
    if t.batch_per_tile != "auto":
        return max(per_tile // int(t.batch_per_tile), 1)

    bound = max(max_batch_per_tile(spec.hardware, spec.model, t), 1)
    largest = max((d for d in divisors(per_tile) if d <= bound), default=1)
    return per_tile // largest


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, smallest first (a global batch's splits; ``training`` sizes by them too)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def max_run_seconds_or_default() -> float:
    try:
        return max_run_seconds()
    except ConfigError:
        return DEFAULT_MAX_RUN_SECONDS


def check_routing(spec: ExperimentSpec) -> None:
    """Refuse sizing ``spec`` (``wsesim memory training``: it routes, and simulates nothing) when its routing
    arrays alone cannot be held here."""
    L, E = spec.model.layers, max(spec.model.experts, 1)
    nbytes = BASE_BYTES + L * E * ROUTE[1]
    if nbytes > memory_limit():
        fit = _largest(lambda n: replace(estimate_work(spec, micro_batches=1), seconds=0.0,
                                         bytes=BASE_BYTES + L * n * ROUTE[1]), E)
        raise ConfigError(f"this cannot be sized here: its routing {too_much_memory()}: about "
                          f"{_size(nbytes)} ({L:,} layers × {E:,} experts); --set model.experts={fit} "
                          f"would fit (now {E:,})")


def estimate_search(spec: ExperimentSpec, candidates: list[tuple[int, Any]]) -> WorkEstimate:
    """The cost of running every (G, B) candidate of ``spec`` in one process (``wsesim tune``, a tuned
    sweep point): the bases once, each candidate's run at its own tiles and micro-batches, the memory of
    the largest. Returned as the estimate of one run such that ``total_seconds(len(candidates))`` is the
    whole search's."""
    if not candidates:
        return estimate_work(spec)
    each = [estimate_work(_tiled(spec, G, B)) for G, B in candidates]
    setup = max(e.setup_seconds for e in each)
    total = setup + sum(e.seconds - e.setup_seconds for e in each)
    worst = max(each, key=lambda e: e.seconds)
    per_run = setup + (total - setup) / len(each)
    return replace(worst, seconds=per_run, setup_seconds=setup, bytes=max(e.bytes for e in each))


def _tiled(spec: ExperimentSpec, tiles: int, batch_per_tile: Any) -> ExperimentSpec:
    training = spec.training.model_copy(update={"tiles": tiles, "batch_per_tile": batch_per_tile})
    return spec.model_copy(update={"training": training})


def check_work(spec: ExperimentSpec, *, runs: int = 1, candidates: list[tuple[int, Any]] | None = None,
               wafer_maps: bool = False, micro_batches: int | None = None) -> WorkEstimate:
    """``estimate_work(spec)`` (of every candidate, with ``candidates``: ``estimate_search``), or
    ``ConfigError`` (one line: the estimate, the dominant term, the limit, the override that would fit)
    when ``runs`` such runs cannot finish on this machine."""
    if candidates:
        estimate, runs = estimate_search(spec, candidates), len(candidates)
    else:
        estimate = estimate_work(spec, wafer_maps=wafer_maps, micro_batches=micro_batches)
    refuse_work("this run", estimate.total_seconds(runs), estimate.bytes, lambda: estimate.describe(runs),
                lambda *_: _advice(spec, estimate, runs))
    return estimate


def _advice(spec: ExperimentSpec, e: WorkEstimate, runs: int = 1) -> str:
    """The override that would fit: the dominant term's count, the largest that the estimate lets finish
    (``runs`` times: a tuner's candidates)."""
    t, m = spec.training, spec.model
    if e.driver == "packet":
        return ("use simulation.fabric: flow (packet timing is for small meshes and single patterns: "
                "wsesim fabric), or a much smaller wafer")
    if e.driver == "mesh":
        k = spec.simulation.block
        return (f"use a coarser simulation.granularity (block:{max(16, 2 * k)} or more; "
                f"now {spec.simulation.granularity}) or a smaller mesh")
    if e.driver == "wafer maps":
        return f"leave out --out and --png (the maps of {spec.hardware.pes:,} PEs), or use a smaller mesh"
    if e.driver == "tiles":
        fit = _largest(lambda n: estimate_work(_tiled(spec, n, t.batch_per_tile),
                                               micro_batches=e.micro_batches), t.tiles, runs)
        return f"--set training.tiles={fit} would fit (now {t.tiles:,})"
    if e.driver == "routing" or (e.driver == "experts" and m.experts > 0):
        key = "experts" if m.experts >= m.layers or e.driver == "experts" else "layers"
        now = getattr(m, key)
        fit = _largest(lambda n: estimate_work(
            spec.model_copy(update={"model": m.model_copy(update={key: n})}),
            micro_batches=e.micro_batches), now, runs)
        cheapest = min(ENGINE_SECONDS, key=lambda name: ENGINE_SECONDS[name])
        engine = f" (or simulation.engine: {cheapest})" if spec.simulation.engine != cheapest else ""
        return f"--set model.{key}={fit} would fit (now {now:,}){engine}"
    fit = _largest(lambda n: estimate_work(spec, micro_batches=n), e.micro_batches, runs)
    if t.global_batch is not None:
        step = spec.cluster.systems * t.tiles * (1 if t.batch_per_tile == "auto" else int(t.batch_per_tile))
        per_micro_batch = max(t.global_batch // max(e.micro_batches, 1), 1)
        fit_batch = max(step, fit * per_micro_batch // step * step)
        return (f"--set training.global_batch={fit_batch} would fit (now {t.global_batch:,}: "
                f"{e.micro_batches:,} micro-batches)")
    return f"--set training.micro_batches={fit} would fit (now {e.micro_batches:,})"


def _largest(estimate_at: Any, now: int, runs: int = 1) -> int:
    """The largest count in [1, now) whose ``runs`` runs the estimate lets finish (1 if none): a binary
    search."""
    def fits(n: int) -> bool:
        e = estimate_at(n)
        return (e.bytes <= memory_limit()
                and e.total_seconds(runs) <= max_run_seconds_or_default())

    lo, hi = 1, max(now - 1, 1)
    if not fits(lo):
        return 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def check_sweep(points: int, seconds: float, peak_bytes: float, workers: int) -> None:
    """Refuse a sweep of ``points`` points (``seconds`` of work in all, the largest ``peak_bytes``) that
    cannot finish here on ``workers`` local processes, each holding one point at a time."""
    memory, limit_s = memory_limit(), max_sweep_seconds()
    running = max(min(workers, points), 1)
    wall, nbytes = seconds / running, running * peak_bytes
    if nbytes > memory and running > 1:
        fit = max(1, int(memory // max(peak_bytes, 1.0)))
        raise ConfigError(f"expected at most --workers {fit} here: {running} workers would hold up to "
                          f"{_size(nbytes)} at once (the limit is {_size(memory)}; the largest point "
                          f"needs {_size(peak_bytes)})", source="--workers")
    if wall > limit_s:
        raise ConfigError(f"this sweep cannot finish here: it would run longer than {_duration(limit_s)} "
                          f"(WSESIM_MAX_SWEEP_S): about {_duration(wall)} for {points:,} points on {running} "
                          f"worker{'s' if running > 1 else ''} ({_duration(seconds)} of work); use fewer "
                          "points, more --workers, or a --scheduler")


def sweep_duration(seconds: float, points: int, workers: int) -> str:
    """The sweep's estimated wall time, as its progress line says it ("about 5 minutes", "under 1 s")."""
    return about(seconds / max(min(workers, points), 1))


def check_fabric(nodes: int, pes: int, experts: int) -> None:
    """Refuse ``wsesim fabric --pattern dispatch --experts`` that cannot be laid out or held here."""
    if experts > pes:
        raise ConfigError(f"expected at most one expert region per PE (at most {pes:,} here), "
                          f"got {experts:,}", path="--experts")
    nbytes = BASE_BYTES + FABRIC_PAIR_BYTES * nodes * experts
    if nbytes > memory_limit():
        fit = max(1, int((memory_limit() - BASE_BYTES) / (FABRIC_PAIR_BYTES * nodes)))
        raise ConfigError(f"expected at most {fit:,} expert regions on {nodes:,} mesh nodes here (about "
                          f"{_size(nbytes)} of traffic, the limit is {_size(memory_limit())}), "
                          f"got {experts:,}: use fewer --experts or a coarser --granularity",
                          path="--experts")


__all__ = ["WorkEstimate", "check_routing", "check_work", "estimate_search", "estimate_work",
           "machine_memory", "max_run_seconds"]
