"""MoE dispatch on the fabric (docs/model.md §6).

MoE dispatch: after attention the tokens sit spread over all PEs; each goes to the region of its
expert. ``dispatch_traffic`` lists those messages; ``DispatchModel`` times them for any per-expert byte
vector with one matrix–vector product (the engine calls it many times per step). Combine is the same
traffic reversed. Units: bytes, cycles.
"""

from __future__ import annotations

import numpy as np

from ..config.errors import ConfigError
from .flow import flow_cycles, link_loads
from .mesh import Mesh, check_routing
from .placement import Placement
from .traffic import (
    GOLDEN,
    Traffic,
)

# --------------------------------------------------------------------------------------------- MoE dispatch


def _dispatch_plan(mesh: Mesh, placement: Placement) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The messages of MoE dispatch: (src, dst, region, share of the region's bytes), in issue order.

    Source node ``s`` holds ``node_pes[s] / pes`` of the tokens; region node ``d`` takes its PEs' share
    of the region's bytes. Both marginals are met exactly, with at most one message per (source, region)
    plus one per region node, by the north-west corner rule: walk the sources in golden-ratio order
    (by the fractional part of ``s·0.618…``) and the region's nodes in row-major order, pairing them by
    cumulative share. Any run of that walk is spread over the whole wafer, so every destination node
    draws its bytes from all over it, as tokens do, not from one corner. Messages are issued in the
    shifted order of ``OuterTraffic.to_traffic``: at each step every source ``s`` sends to region
    ``(s + k) mod T``, with the shifts ``k`` taken in golden-ratio order.
    """
    n, tiles = mesh.nodes, len(placement.regions)
    p = mesh.node_pes / mesh.pes
    # golden-ratio (Weyl) order: any run of consecutive sources in it is spread over the whole wafer
    walk = np.argsort(np.modf(np.arange(n) * GOLDEN)[0], kind="stable")
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for r, region in enumerate(placement.regions):
        nodes, pes = mesh.region_nodes(region)
        order = walk
        c_src = np.cumsum(p[order])
        c_dst = np.cumsum(pes) / pes.sum()
        c_src[-1] = c_dst[-1] = 1.0  # both walks end exactly at the whole
        points = np.union1d(c_src, c_dst)
        lo = np.concatenate([[0.0], points[:-1]])
        keep = points - lo > 1e-12  # drop slivers where the two walks' boundaries coincide
        mid = (lo + points)[keep] / 2
        parts.append((order[np.searchsorted(c_src, mid)], nodes[np.searchsorted(c_dst, mid)],
                      np.full(int(keep.sum()), r), (points - lo)[keep]))
    src, dst, region, share = (np.concatenate(x) for x in zip(*parts, strict=True))
    step = np.argsort(np.argsort(np.modf(np.arange(tiles) * GOLDEN)[0], kind="stable"))  # rank of each shift
    issue = np.lexsort((src, step[(region - src) % tiles]))
    return src[issue], dst[issue], region[issue], share[issue]


def _region_bytes(placement: Placement, expert_bytes: np.ndarray) -> np.ndarray:
    x = np.asarray(expert_bytes, dtype=np.float64).reshape(-1)
    experts = len(placement.expert_region_index)
    if len(x) != experts or not np.all(np.isfinite(x)) or (len(x) and x.min() < 0):
        raise ConfigError(f"expected {experts} finite, non-negative byte counts (one per expert), got {len(x)} values",
                          path="expert_bytes")
    return np.bincount(placement.expert_region_index, x, minlength=len(placement.regions))


def dispatch_traffic(mesh: Mesh, placement: Placement, expert_bytes: np.ndarray, *, reverse: bool = False) -> Traffic:
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


class DispatchModel:
    """Flow timing of MoE dispatch (or, with ``reverse=True``, combine) for any per-expert byte vector.

    Built once per (mesh, placement): a basis with one column per region, the busy cycles each directed
    link gets per byte sent to that region. ``cycles(expert_bytes)`` sums experts into regions and takes
    one matrix–vector product; it equals ``FlowFabric(mesh).simulate(dispatch_traffic(...)).cycles``.
    """

    def __init__(self, mesh: Mesh, placement: Placement, *, routing: str = "xy", reverse: bool = False,
                 plan: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        self.mesh, self.placement = mesh, placement
        self.routing, self.reverse = check_routing(routing), reverse
        src, dst, region, share = plan if plan is not None else _dispatch_plan(mesh, placement)
        if reverse:
            src, dst = dst, src
        tiles = len(placement.regions)
        bw = mesh.link_bytes_per_cycle
        # each region's messages, in issue order: one stable sort instead of a mask per region
        by_region = np.argsort(region, kind="stable")
        bounds = np.searchsorted(region[by_region], np.arange(tiles + 1))
        parts = [by_region[bounds[r]:bounds[r + 1]] for r in range(tiles)]
        loads = np.stack([link_loads(mesh, src[i], dst[i], share[i], routing) for i in parts], axis=1)
        # keep only links some region uses (beyond rounding residue): the rest can never be the busiest
        self._links = np.flatnonzero(loads.max(axis=1) > 1e-12 * max(float(loads.max()), 1e-300))
        self._bytes_basis = loads[self._links]                                   # bytes per byte of region traffic
        cycle_basis = self._bytes_basis / bw[self._links, None]                 # cycles per byte
        # rows by their sum, largest first: cycles() bounds row i by rowsum_i · max(y) and multiplies only
        # the rows that could still be the busiest (exact, and a few % of the rows for balanced traffic)
        order = np.argsort(-cycle_basis.sum(axis=1), kind="stable")
        self._cycle_basis = np.ascontiguousarray(cycle_basis[order])
        self._neg_rowsum = -self._cycle_basis.sum(axis=1)  # ascending, for searchsorted
        hops = np.abs(src // mesh.cols - dst // mesh.cols) + np.abs(src % mesh.cols - dst % mesh.cols)
        hops[src == dst] = -1  # a message to its own node crosses no link
        self._region_hops = np.full(tiles, -1, dtype=hops.dtype)
        np.maximum.at(self._region_hops, region, hops)

    @classmethod
    def pair(cls, mesh: Mesh, placement: Placement, *, routing: str = "xy") -> tuple[DispatchModel, DispatchModel]:
        """(dispatch, combine): both directions from one message plan."""
        plan = _dispatch_plan(mesh, placement)
        return (cls(mesh, placement, routing=routing, plan=plan),
                cls(mesh, placement, routing=routing, reverse=True, plan=plan))

    @property
    def active_links(self) -> int:
        """Directed links some region's traffic uses: the rows of the basis."""
        return len(self._links)

    @property
    def experts(self) -> int:
        return len(self.placement.expert_region_index)

    def link_load(self, expert_bytes: np.ndarray) -> np.ndarray:
        """Bytes over each directed link (by link number), as ``FabricResult.link_load``."""
        out = np.zeros(self.mesh.nodes * 6)
        out[self._links] = self._bytes_basis @ _region_bytes(self.placement, expert_bytes)
        return out

    def cycles(self, expert_bytes: np.ndarray) -> tuple[float, float]:
        """(cycles, bytes over the busiest PE link) to move ``expert_bytes[e]`` bytes to (or, reversed, from)
        each expert ``e``'s region, by the flow model's rule (busiest link's busy cycles − 1 + longest
        route's latency, over the regions that receive bytes)."""
        y = _region_bytes(self.placement, expert_bytes)
        busiest = self._busiest(y)
        used = (y > 0) & (self._region_hops >= 0)
        if not used.any():
            return 0.0, 0.0
        return flow_cycles(self.mesh, busiest, float(self._region_hops[used].max()))

    def _busiest(self, y: np.ndarray, head: int = 256) -> float:
        """max over links of ``cycle_basis @ y`` (y ≥ 0), multiplying only rows whose bound can win."""
        basis = self._cycle_basis
        if not len(basis):
            return 0.0
        best = float((basis[:head] @ y).max())
        ymax = float(y.max())
        if ymax <= 0:
            return best
        # rows beyond the head with rowsum · ymax > best could still exceed it: a prefix, by the ordering
        cut = int(np.searchsorted(self._neg_rowsum, -best / ymax, side="left"))
        if cut > head:
            best = max(best, float((basis[head:cut] @ y).max()))
        return best


__all__ = ["DispatchModel", "dispatch_traffic"]
