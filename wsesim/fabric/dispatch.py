"""MoE dispatch on the fabric (docs/model.md §6).

MoE dispatch: after attention the tokens sit spread over all PEs; each goes to the region of its
expert. ``dispatch_traffic`` lists those messages (planned by ``wsesim.fabric.dispatch_plan``);
``DispatchModel`` times them for any per-expert byte vector with one matrix–vector product (the engine
calls it many times per step). Combine is the same traffic reversed. Units: bytes, cycles.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from ..config.errors import InternalError
from .colours import DIRECTION_RULE, over_budget
from .dispatch_plan import Plan, region_plan
from .dispatch_plan import dispatch_plan as _dispatch_plan
from .flow import flow_cycles
from .grouped import group_blocks, grouped_links, grouped_loads, grouped_longest, grouped_path
from .latency import EMPTY, NONE, RouteIndex, decode
from .mesh import LINKS_PER_NODE, Mesh, check_routing
from .placement import Placement
from .traffic import GOLDEN, Traffic, busy_cycles, colours_per_node

# --------------------------------------------------------------------------------------------- MoE dispatch

_QUERY_ROWS = 128    # links per RouteIndex query: bounds its scratch arrays (links × messages per line)
EAGER_FRACTION = 32  # per-region latencies of every row at once when more than 1/32 of the rows are asked for


def _region_bytes(placement: Placement, expert_bytes: np.ndarray) -> np.ndarray:
    x = np.asarray(expert_bytes, dtype=np.float64).reshape(-1)
    experts = len(placement.expert_region_index)
    if len(x) != experts or not np.all(np.isfinite(x)) or (len(x) and x.min() < 0):
        raise InternalError(f"expected {experts} finite, non-negative byte counts (one per expert), "
                            f"got {len(x)} values")
    return np.bincount(placement.expert_region_index, x, minlength=len(placement.regions))


def dispatch_traffic(mesh: Mesh, placement: Placement, expert_bytes: np.ndarray, *,
                     reverse: bool = False) -> Traffic:
    """MoE dispatch as messages: ``expert_bytes[e]`` bytes (all tokens for expert ``e``, from the whole
    wafer) go from every node, in proportion to its PEs, to the region of expert ``e``; experts sharing
    a region share its messages, so there are at most nodes × (regions + 1) messages. ``reverse=True``
    gives the combine: the same bytes sent back, each region node taking its receivers in turn.
    Raises ``ConfigError`` for a vector of the wrong length or a negative count."""
    y = _region_bytes(placement, expert_bytes)
    src, dst, region, share = _dispatch_plan(mesh, placement)
    nbytes = share * y[region]
    keep = nbytes > 0
    src, dst, nbytes = src[keep], dst[keep], nbytes[keep]
    if not reverse:
        return Traffic(src, dst, nbytes)
    # Combine: each region node sends to many nodes. Each sender takes its receivers in golden-ratio
    # order, and the senders take turns (the same idea as dispatch's schedule, seen from the sender).
    sender, receiver = dst, src
    by_sender = np.lexsort((np.modf(receiver * GOLDEN)[0], sender))
    ordered = sender[by_sender]
    turn = np.empty(len(sender), dtype=np.int64)
    turn[by_sender] = np.arange(len(sender)) - np.searchsorted(ordered, ordered)
    issue = np.lexsort((sender, turn))
    return Traffic(sender[issue], receiver[issue], nbytes[issue])


_NO_U = np.iinfo(np.int32).max  # a region's u_min where none of its routes crosses the link (+inf)


def _narrow(u_min: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-region (u_min, key) as int32, exact: hops and keys are whole numbers below 2³¹ (as in
    ``flow._Segments.path``); +inf becomes ``_NO_U`` and ``NONE`` becomes ``EMPTY``."""
    return (np.where(np.isfinite(u_min), u_min, _NO_U).astype(np.int32),
            np.where(key > NONE, key, EMPTY).astype(np.int32))


GATHER_BYTES = 64 << 20  # a basis up to this size is gathered into a new array; a larger one moved in place


def _take_rows(a: np.ndarray, rows: np.ndarray, block: int = 256,
               gather_bytes: int = GATHER_BYTES) -> np.ndarray:
    """``a[rows]`` for distinct ``rows``. Up to ``gather_bytes`` a plain gather (one array more, briefly);
    beyond, built in ``a``'s own memory (``a`` is overwritten; the answer is a view of its first
    ``len(rows)`` rows), so a large basis is never held twice: each cycle of the permutation moves a block
    of rows at a time (scratch: ``block`` rows), a Python loop over the rows (~1 µs a row)."""
    if a.nbytes <= gather_bytes:
        return a[rows]
    k = len(rows)
    source = np.empty(len(a), dtype=np.int64)  # row i takes the row source[i]: ``rows``, then the rest
    source[:k] = rows
    unused = np.ones(len(a), dtype=bool)
    unused[rows] = False
    source[k:] = np.flatnonzero(unused)
    follow, seen = source.tolist(), bytearray(len(a))
    for start in range(len(a)):
        if seen[start] or follow[start] == start:
            continue
        cycle, i = [start], follow[start]
        while i != start:
            seen[i] = 1
            cycle.append(i)
            i = follow[i]
        c, first = np.array(cycle), a[start].copy()
        for lo in range(0, len(c) - 1, block):  # a[c[j]] takes a[c[j + 1]], which is still unchanged
            at = c[lo:lo + block + 1]
            a[at[:-1]] = a[at[1:]]
        a[c[-1]] = first
    return a[:k]


class DispatchModel:
    """Flow timing of MoE dispatch (or, with ``reverse=True``, combine) for any per-expert byte vector.

    Built once per (mesh, placement): a basis with one column per region, the busy cycles each directed
    link gets per byte sent to that region, and per link the path latency of all regions' routes
    together (``wsesim.fabric.latency``). ``cycles(expert_bytes)`` sums experts into regions, takes one
    matrix–vector product and adds the path latencies; it equals
    ``FlowFabric(mesh).simulate(dispatch_traffic(...)).cycles``. When some regions send nothing, the
    latency of a link depends on which: the two numbers it comes from (the fewest hops behind of a
    region's routes over the link, and the key of the last of them) are then found per region, for the
    few links that could be the slowest, and kept for later calls. ``plan``: the messages, in any order
    that keeps each region's in issue order (``region_plan``, the default, or ``dispatch_plan``).
    ``colours``, ``colour_reason``: the colours the busiest node needs and '' or why they are over its
    budget, by the rule ``wsesim fabric`` and ``wsesim kernel alltoall`` read (``wsesim.fabric.colours``).
    """

    def __init__(self, mesh: Mesh, placement: Placement, *, routing: str = "xy", reverse: bool = False,
                 plan: Plan | None = None) -> None:
        self.mesh, self.placement = mesh, placement
        self.routing, self.reverse = check_routing(routing), reverse
        src, dst, region, share = plan if plan is not None else region_plan(mesh, placement)
        if reverse:
            src, dst = dst, src
        tiles = len(placement.regions)
        bw = mesh.link_bytes_per_cycle
        # every region's loads at once, each region summed apart; the path data of all regions together
        loads, u_min, key, _ = grouped_links(mesh, src, dst, share, region, tiles, routing, longest=False)
        # keep only links some region uses (beyond rounding residue): the rest can never be the busiest
        peak = loads.max(axis=1)
        self._links = np.flatnonzero(peak > 1e-12 * max(float(peak.max()), 1e-300))
        self.colours, self.colour_reason = self._colours()
        # rows by their sum in cycles per byte, largest first: cycles() bounds row i by rowsum_i · max(y)
        # (+ its latency) and multiplies only the rows that could still win (exact, and a few % of the
        # rows for balanced traffic). The loads become cycles per byte in place (every link that exists:
        # the others' rows are zeros, never read), and are then moved into that order in place: the
        # basis is the one large array built.
        np.divide(loads, bw[:, None], out=loads, where=(bw > 0)[:, None])
        rowsum = loads.sum(axis=1)[self._links]  # each row's own sum, as the basis's row will give it
        order = np.argsort(-rowsum, kind="stable")
        self._rows = self._links[order]                                         # the link of each row
        self._cycle_basis = _take_rows(loads, self._rows)                       # cycles per byte
        self._neg_rowsum = -rowsum[order]  # ascending, for searchsorted
        self._path_all = decode(u_min[self._rows], key[self._rows])
        self._path_all_max = float(self._path_all.max(initial=0.0))
        # per (row, region) path data, found only when a call has regions that send nothing (most calls
        # have none): by row from an index of the routes, or for all rows at once (``_region_path``)
        self._messages = (src, dst, region, share)
        self._routes: RouteIndex | None = None
        self._have = np.zeros(len(self._rows), dtype=bool)
        self._row_u = self._row_key = np.empty((0, tiles), dtype=np.int32)

    @cached_property
    def _path_bound(self) -> np.ndarray:
        """Per row, a bound on its latency for any subset of regions: u_min + t* ≤ the hops of the longest
        route over it. Found when first needed (a call with regions that send nothing), by one more pass
        over the messages."""
        src, dst, region, _ = self._messages
        longest = grouped_longest(self.mesh, src, dst, region, len(self.placement.regions), self.routing)
        return longest[self._rows].astype(np.float64)

    @cached_property
    def _path_bound_max(self) -> float:
        return float(self._path_bound.max(initial=0.0))

    def _colours(self) -> tuple[int, str]:
        """(colours at the busiest node, '' or the reason it is over budget) of the links some region
        uses, by the one rule ``wsesim fabric`` and the all-to-all kernel read (``wsesim.fabric.colours``:
        one colour per direction of travel through a node)."""
        used = np.zeros(self.mesh.nodes * LINKS_PER_NODE)
        used[self._links] = 1.0
        per_node = colours_per_node(self.mesh, used)
        worst = int(np.argmax(per_node)) if len(per_node) else 0
        need = int(per_node[worst]) if len(per_node) else 0
        return need, over_budget(need, self.mesh.colour_budget, f"node {self.mesh.node_rc(worst)}",
                                 DIRECTION_RULE, f"{self.mesh.hw.fabric.colours} colours per PE router")

    def _region_path(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(u_min, key) per region of ``rows``, shape ``(len(rows), regions)``, computed once per row: row
        by row from an index of the routes (``RouteIndex``: about messages / mesh lines of work a row)
        while few rows are asked for; once more than ``1 / EAGER_FRACTION`` of the rows would have been,
        for every row at once (one grouped pass over the messages, about the cost of that many rows), as
        skewed routing with idle experts asks call after call. Kept as int32 (``_narrow``): the numbers are
        whole hops, with ``_NO_U`` for +inf and ``EMPTY`` for ``NONE``."""
        missing = rows[~self._have[rows]]
        if not len(missing):
            return self._row_u[rows], self._row_key[rows]
        regions = len(self.placement.regions)
        if not len(self._row_u):
            self._row_u = np.empty((len(self._rows), regions), dtype=np.int32)
            self._row_key = np.empty_like(self._row_u)
        if (int(self._have.sum()) + len(missing)) * EAGER_FRACTION > len(self._rows):
            self._all_region_paths(regions)
        else:
            if self._routes is None:
                self._routes = RouteIndex(self.mesh, *self._messages[:3], regions, self.routing)
            for part in np.array_split(missing, -(-len(missing) // _QUERY_ROWS)):
                self._row_u[part], self._row_key[part] = _narrow(*self._routes.query(self._rows[part]))
            self._have[missing] = True
        return self._row_u[rows], self._row_key[rows]

    def _all_region_paths(self, regions: int) -> None:
        """Every row's per-region latencies: one grouped pass over each block of regions' own messages (a
        region's numbers come from its messages alone), the blocks shared by two threads."""
        # local: the thread pool (concurrent.futures) loads only when messages are timed in parallel
        from concurrent.futures import ThreadPoolExecutor

        src, dst, region, _ = self._messages

        def part(lo: int, hi: int) -> None:
            mine = (region >= lo) & (region < hi)
            u_min, key = grouped_path(self.mesh, src[mine], dst[mine], region[mine] - lo, hi - lo,
                                      self.routing)
            self._row_u[:, lo:hi], self._row_key[:, lo:hi] = _narrow(u_min[:, self._rows].T,
                                                                     key[:, self._rows].T)

        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="wsesim-latency") as pool:
            for done in [pool.submit(part, lo, hi) for lo, hi in group_blocks(regions, len(region))]:
                done.result()
        self._have[:] = True

    def _path(self, rows: np.ndarray, active: np.ndarray) -> np.ndarray:
        """Path latency (hops) of ``rows`` with only the ``active`` regions sending."""
        if not active.any():
            return np.full(len(rows), NONE)
        u, k = (x[:, active] for x in self._region_path(rows))
        u, k = u.min(axis=1), k.max(axis=1)
        return decode(np.where(u == _NO_U, np.inf, u), np.where(k == EMPTY, NONE, k))

    @classmethod
    def pair(cls, mesh: Mesh, placement: Placement, *,
             routing: str = "xy") -> tuple[DispatchModel, DispatchModel]:
        """(dispatch, combine): both directions from one message plan, the plan's blocks and then the two
        models built side by side in two threads (numpy releases the GIL in the large array operations;
        each model reads only the shared plan, and its build holds scratch for one block of regions at a
        time besides its basis)."""
        # local: the thread pool (concurrent.futures) loads only when messages are timed in parallel
        from concurrent.futures import ThreadPoolExecutor

        mesh.link_bytes_per_cycle  # noqa: B018 - computed (and cached) once, before the threads read it
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="wsesim-dispatch") as pool:
            plan = region_plan(mesh, placement, pool)
            models = [pool.submit(cls, mesh, placement, routing=routing, reverse=reverse, plan=plan)
                      for reverse in (False, True)]
            return models[0].result(), models[1].result()

    @property
    def active_links(self) -> int:
        """Directed links some region's traffic uses: the rows of the basis."""
        return len(self._links)

    @property
    def experts(self) -> int:
        return len(self.placement.expert_region_index)

    def link_load(self, expert_bytes: np.ndarray) -> np.ndarray:
        """Bytes over each directed link (by link number), as ``FabricResult.link_load``. The loads per
        region are computed again for each call (the model keeps only cycles per byte, in its own order)."""
        y = _region_bytes(self.placement, expert_bytes)
        loads = grouped_loads(self.mesh, *self._messages[:2], self._messages[3], self._messages[2],
                              len(self.placement.regions), self.routing)  # found again: rarely asked for
        out = np.zeros(self.mesh.nodes * 6)
        out[self._links] = _take_rows(loads, self._links) @ y
        return out

    def cycles(self, expert_bytes: np.ndarray) -> tuple[float, float]:
        """(cycles, bytes over the busiest PE link) to move ``expert_bytes[e]`` bytes to (or, reversed, from)
        each expert ``e``'s region, by the flow model's rule (``flow_cycles``: each link's busy cycles − 1
        plus the path latency charged to it, over the links the regions that receive bytes use).

        Exact, without the whole product: rows come by load per byte, largest first; past the first few,
        a row can only win if its bound (load ≤ rowsum · max(y); latency ≤ the largest any row can have)
        beats the best so far, and those rows are a prefix."""
        y = _region_bytes(self.placement, expert_bytes)
        basis = self._cycle_basis
        if not len(basis) or not (y > 0).any():
            return 0.0, 0.0
        if not (y > 0).all():
            return self._cycles_with_idle_regions(y)
        hop, ymax, head = self.mesh.hop_cycles, float(y.max()), 256
        t = basis[:head] @ y
        busy = busy_cycles(t)
        charge = np.where(busy > 0, busy + self._path_all[:head] * hop, -np.inf)
        best_c = float(charge.max())
        need = min(float(t.max()), best_c - 1.0 - self._path_all_max * hop) / ymax
        cut = max(int(np.searchsorted(self._neg_rowsum, -need, side="left")), min(head, len(basis)))
        if cut > head:
            t = np.concatenate([t, basis[head:cut] @ y])
            busy = busy_cycles(t)
        return flow_cycles(self.mesh, busy, self._path_all[:cut]), float(t.max()) * self.mesh.wavelet_bytes

    def cycles_whole(self, expert_bytes: np.ndarray) -> float:
        """``cycles(expert_bytes)[0]`` by the same rule over every row at once, with no search for the rows
        that could win: for a small basis (a coarse mesh, as serving's), a few numpy calls where the search
        takes dozens. Each row's latency with only the regions that receive bytes is found from every
        row's per-region latencies (all rows', the first time some regions are idle)."""
        y = _region_bytes(self.placement, expert_bytes)
        active = y > 0
        if not len(self._cycle_basis) or not active.any():
            return 0.0
        busy = busy_cycles(self._cycle_basis @ y)
        if active.all():
            return flow_cycles(self.mesh, busy, self._path_all)
        by_u, by_key = self._by_region  # as ``_path``, each region's rows contiguous
        u, k = by_u[active].min(axis=0), by_key[active].max(axis=0)
        return flow_cycles(self.mesh, busy, decode(np.where(u == _NO_U, np.inf, u),
                                                   np.where(k == EMPTY, NONE, k)))

    @cached_property
    def _by_region(self) -> tuple[np.ndarray, np.ndarray]:
        """Every row's (u_min, key) per region (``_region_path``), region by region: ``(regions, rows)``."""
        u, k = self._region_path(np.arange(len(self._rows)))
        return np.ascontiguousarray(u.T), np.ascontiguousarray(k.T)

    def _cycles_with_idle_regions(self, y: np.ndarray) -> tuple[float, float]:
        """``cycles`` when some regions receive nothing: a link's latency is then that of the active
        regions' routes alone, found per region (``_path``) only for the rows that could win. The answer
        is at least the busiest row's charge: its busy cycles (a latency is never negative), plus its
        latency once that is known; a row can beat that only if its busy cycles plus the longest route
        over its link (≥ its latency) do, and rows past the prefix of load per byte that could cannot
        (as in ``cycles``)."""
        basis, active = self._cycle_basis, y > 0
        hop, ymax = self.mesh.hop_cycles, float(y.max())
        t = basis[:256] @ y
        busy = busy_cycles(t)
        if not (busy > 0).any():  # the active regions use none of the first rows: take the whole product
            t = basis @ y
            busy = busy_cycles(t)
        top = int(np.argmax(busy))
        floor = float(busy[top])
        if self._have[top]:  # its exact charge, when its latencies are known already: a higher floor
            floor += float(self._path(np.array([top]), active)[0]) * hop
        need = min(float(t.max()), floor - 1.0 - self._path_bound_max * hop) / ymax
        cut = int(np.searchsorted(self._neg_rowsum, -need, side="left"))
        if cut > len(t):
            t = np.concatenate([t, basis[len(t):cut] @ y])
            busy = busy_cycles(t)
        some = np.union1d(np.flatnonzero((busy > 0) & (busy + self._path_bound[:len(t)] * hop > floor)),
                          [top])
        path = np.full(len(t), NONE)
        path[some] = self._path(some, active)
        return flow_cycles(self.mesh, busy, path), float(t.max()) * self.mesh.wavelet_bytes


__all__ = ["DispatchModel", "dispatch_traffic"]
