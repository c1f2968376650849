"""The flow fidelity (docs/model.md §6): per-link byte loads of dimension-ordered routes, vectorised in numpy.

Phase time = the busiest link's busy cycles + the longest route's latency, in the form that makes a
lone message exact (the convention both fidelities keep): a message of L wavelets over h hops takes
``injection + h·hop + (L − 1)`` cycles. So

    cycles = max(ceil(max over links of load_bytes / link_bytes_per_cycle) − 1, 0)
             + injection + (longest route in hops) × hop.

Loads are computed without a Python loop over messages or hops: a route's row (or column) segment adds
its bytes at its first link and removes them after its last, and a cumulative sum along each row (or
column) gives every link's load. Product traffic (``OuterTraffic``) needs no message list at all: the load
on a link is (bytes from the sources on one side) × (share of destinations on the other), both prefix sums.
Units: bytes, cycles.

What flow does not see, against the packet fidelity (measured by tests/fabric/test_fabric.py): it charges the
busiest link alone, as if every link could be busy from the start. When several links in series are
nearly as busy, FIFO queues feeding one another leave the downstream ones idle at first (tandem loss),
and with a message or two per link a message can wait at several links in turn. Packet is then slower:
within 5 % for all-to-all, transpose, hotspot and skewed MoE dispatch on 8 × 8 and 16 × 16 meshes, but
up to ~20–30 % for equal-sized dispatch to a few regions and for sparse random permutations.
"""

from __future__ import annotations

import numpy as np

from ..config.errors import ConfigError
from .mesh import EAST, EJECT, INJECT, LINKS_PER_NODE, NORTH, SOUTH, WEST, Mesh, check_routing
from .traffic import AnyTraffic, FabricResult, OuterTraffic, busy_cycles, summarise


class _Segments:
    """Where each remote message's route starts and stops along rows and columns, as flat indices into
    difference arrays: computed once per traffic, then summed with any weights (bytes, or ones)."""

    def __init__(self, mesh: Mesh, src: np.ndarray, dst: np.ndarray, routing: str,
                 multicast: np.ndarray | None) -> None:
        R, C = mesh.rows, mesh.cols
        self.mesh = mesh
        self.remote = src != dst
        src, dst = src[self.remote], dst[self.remote]
        self.src, self.dst = src, dst
        # row and column by table look-up: a gather from a small table beats int64 division
        row_of, col_of = np.divmod(np.arange(mesh.nodes), C)
        rs, cs, rd, cd = row_of[src], col_of[src], row_of[dst], col_of[dst]
        self.hops = np.abs(rd - rs) + np.abs(cd - cs)
        hr, vc = (rs, cd) if routing == "xy" else (rd, cs)  # row of the horizontal leg, column of the vertical
        east, south = cd > cs, rd > rs
        # east links (c -> c+1) at columns cs..cd-1 of row block 0; west links (c -> c-1) at columns
        # cd+1..cs of row block 1 (a message with cd == cs gets an empty west range)
        key = (hr + R * ~east) * (C + 1)
        self.h = (key + np.where(east, cs, cd + 1), key + np.where(east, cd, cs + 1))
        # south links (r -> r+1) at rows rs..rd-1 of column block 0; north links at rows rd+1..rs of block 1
        key = (vc + C * ~south) * (R + 1)
        self.v = (key + np.where(south, rs, rd + 1), key + np.where(south, rd, rs + 1))
        self.mc = multicast[self.remote] if multicast is not None and multicast[self.remote].any() else None
        if self.mc is not None:
            # a multicast's receivers: every node after the source along its row or column
            mc = self.mc
            m_rs, m_cs, m_rd, m_cd = rs[mc], cs[mc], rd[mc], cd[mc]
            row = m_rs == m_rd
            lo = np.where(row, np.where(m_cd > m_cs, m_cs + 1, m_cd), np.where(m_rd > m_rs, m_rs + 1, m_rd))
            hi = np.where(row, np.where(m_cd > m_cs, m_cd + 1, m_cs), np.where(m_rd > m_rs, m_rd + 1, m_rs))
            width = max(R, C) + 1
            key = np.where(row, m_rs, R + m_cs) * width
            self.m = (key + lo, key + hi, width)

    def loads(self, weight: np.ndarray) -> np.ndarray:
        """Sum of ``weight`` (one per message of the traffic) over each directed link, shape (nodes * 6,)."""
        mesh, R, C = self.mesh, self.mesh.rows, self.mesh.cols
        w = np.asarray(weight, dtype=np.float64)[self.remote]
        load = np.zeros((R, C, LINKS_PER_NODE))
        if not len(w):
            return load.reshape(-1)
        h = _running(self.h, w, 2 * R, C + 1)[:, :C]
        load[:, :, EAST], load[:, :, WEST] = h[:R], h[R:]
        v = _running(self.v, w, 2 * C, R + 1)[:, :R]
        load[:, :, SOUTH], load[:, :, NORTH] = v[:C].T, v[C:].T
        load[:, :, INJECT] = np.bincount(self.src, w, minlength=R * C).reshape(R, C)
        if self.mc is None:
            load[:, :, EJECT] = np.bincount(self.dst, w, minlength=R * C).reshape(R, C)
        else:
            uni = ~self.mc
            load[:, :, EJECT] = np.bincount(self.dst[uni], w[uni], minlength=R * C).reshape(R, C)
            lo, hi, width = self.m
            e = _running((lo, hi), w[self.mc], R + C, width)
            load[:, :, EJECT] += e[:R, :C] + e[R:, :R].T
        return _clean(mesh, load)


def _running(bounds: tuple[np.ndarray, np.ndarray], w: np.ndarray, rows: int, width: int) -> np.ndarray:
    """Add ``w`` from flat index ``start`` up to (not including) ``stop`` within each row of a
    ``rows × width`` array: a difference array and a running sum along the rows."""
    acc = np.bincount(bounds[0], w, minlength=rows * width)
    acc -= np.bincount(bounds[1], w, minlength=rows * width)
    return np.cumsum(acc.reshape(rows, width), axis=1)


def link_loads(mesh: Mesh, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, routing: str = "xy",
               multicast: np.ndarray | None = None) -> np.ndarray:
    """Sum of ``weight`` over every directed link each message's route uses (shape ``(nodes * 6,)``).

    With ``weight`` = bytes this is the link load in bytes; with ones it counts routes. Messages to
    their own node use no link. A multicast also loads the eject ramp of every node after its source.
    """
    return _Segments(mesh, np.asarray(src), np.asarray(dst), routing, multicast).loads(weight)


def _clean(mesh: Mesh, load: np.ndarray) -> np.ndarray:
    """Flat loads with the rounding residue of the running sums removed: zero on links that do not
    exist, and nothing below zero."""
    flat = np.maximum(load.reshape(-1), 0.0)
    flat[mesh.link_parallel == 0] = 0.0
    return flat


def _prefix(x: np.ndarray, axis: int) -> np.ndarray:
    """Inclusive prefix sums of ``x`` along ``axis``."""
    return np.cumsum(x, axis=axis)


def outer_link_loads(mesh: Mesh, a: np.ndarray, b: np.ndarray, routing: str = "xy") -> np.ndarray:
    """Link loads of product traffic ``T[s, d] = a[s]·b[d]`` (``s != d``) in O(nodes), shape ``(nodes * 6,)``.

    Under XY a message crosses the east link (r, c)→(r, c+1) iff it starts in row r at a column ≤ c
    and ends in a column > c (any row): load = (a summed over row r, columns ≤ c) × (b summed over
    columns > c). It crosses the south link (r, c)→(r+1, c) iff it starts in a row ≤ r (any column)
    and ends in column c at a row > r. YX swaps the roles of rows and columns.
    """
    R, C = mesh.rows, mesh.cols
    A, B = a.reshape(R, C), b.reshape(R, C)
    load = np.zeros((R, C, LINKS_PER_NODE))
    if routing == "xy":
        # horizontal leg in the source's row, toward the destination's column
        a_left, a_right = _prefix(A, 1), _prefix(A[:, ::-1], 1)[:, ::-1]      # row r, cols <= c / >= c
        b_col = B.sum(axis=0)
        b_le, b_ge = _prefix(b_col, 0), _prefix(b_col[::-1], 0)[::-1]         # cols <= c / >= c
        load[:, :-1, EAST] = a_left[:, :-1] * b_ge[None, 1:]
        load[:, 1:, WEST] = a_right[:, 1:] * b_le[None, :-1]
        # vertical leg in the destination's column
        a_row = A.sum(axis=1)
        a_up, a_down = _prefix(a_row, 0), _prefix(a_row[::-1], 0)[::-1]       # rows <= r / >= r
        b_above, b_below = _prefix(B, 0), _prefix(B[::-1], 0)[::-1]          # col c, rows <= r / >= r
        load[:-1, :, SOUTH] = a_up[:-1, None] * b_below[1:, :]
        load[1:, :, NORTH] = a_down[1:, None] * b_above[:-1, :]
    else:
        # vertical leg in the source's column, toward the destination's row
        a_up, a_down = _prefix(A, 0), _prefix(A[::-1], 0)[::-1]
        b_row = B.sum(axis=1)
        b_le, b_ge = _prefix(b_row, 0), _prefix(b_row[::-1], 0)[::-1]
        load[:-1, :, SOUTH] = a_up[:-1, :] * b_ge[1:, None]
        load[1:, :, NORTH] = a_down[1:, :] * b_le[:-1, None]
        # horizontal leg in the destination's row
        a_col = A.sum(axis=0)
        a_left, a_right = _prefix(a_col, 0), _prefix(a_col[::-1], 0)[::-1]
        b_left, b_right = _prefix(B, 1), _prefix(B[:, ::-1], 1)[:, ::-1]
        load[:, :-1, EAST] = a_left[None, :-1] * b_right[:, 1:]
        load[:, 1:, WEST] = a_right[None, 1:] * b_left[:, :-1]
    load[:, :, INJECT] = A * (b.sum() - B)
    load[:, :, EJECT] = B * (a.sum() - A)
    return _clean(mesh, load)


def routes_per_node(mesh: Mesh, route_counts: np.ndarray) -> np.ndarray:
    """Routes through each node, from per-link route counts: every route enters each node of its path
    once, over a link, except at its source, where it enters over the inject ramp."""
    u = route_counts.reshape(mesh.rows, mesh.cols, LINKS_PER_NODE)
    n = u[:, :, INJECT].copy()
    n[:, 1:] += u[:, :-1, EAST]
    n[:, :-1] += u[:, 1:, WEST]
    n[1:, :] += u[:-1, :, SOUTH]
    n[:-1, :] += u[1:, :, NORTH]
    return np.rint(n).astype(np.int64).reshape(-1)


def _max_manhattan(mesh: Mesh, s_nodes: np.ndarray, d_nodes: np.ndarray) -> int:
    """Longest |Δr| + |Δc| between any node of ``s_nodes`` and any of ``d_nodes`` (O(n))."""
    if not len(s_nodes) or not len(d_nodes):
        return 0
    rs, cs = np.divmod(s_nodes, mesh.cols)
    rd, cd = np.divmod(d_nodes, mesh.cols)
    return int(max((sr * rs + sc * cs).max() - (sr * rd + sc * cd).min()
                   for sr in (1, -1) for sc in (1, -1)))


def flow_cycles(mesh: Mesh, busiest: float, longest_hops: float) -> tuple[float, float]:
    """The flow timing rule (docs/model.md §6), written once: a phase whose busiest link is busy for
    ``busiest`` cycles and whose longest route has ``longest_hops`` hops takes ``busy − 1 + injection +
    hops · hop`` cycles (the last wavelet leaves the busiest link, then crosses the longest route).
    Returns (cycles, bytes over the busiest PE link)."""
    if busiest <= 0:
        return 0.0, 0.0
    latency = mesh.injection_cycles + longest_hops * mesh.hop_cycles
    return max(busy_cycles(busiest) - 1.0, 0.0) + latency, busiest * mesh.wavelet_bytes


def phase_cycles(mesh: Mesh, link_load: np.ndarray, longest_hops: float) -> tuple[float, float]:
    """(cycles, bytes over the busiest PE link) for a phase with these loads and this longest route."""
    bw = mesh.link_bytes_per_cycle
    t = np.divide(link_load, bw, out=np.zeros_like(link_load), where=bw > 0)
    return flow_cycles(mesh, float(t.max()) if len(t) else 0.0, longest_hops)


class FlowFabric:
    """Flow fidelity: link loads of all messages at once; time from the busiest link and the longest route.

    ``simulate`` takes a ``Traffic`` (explicit messages) or an ``OuterTraffic`` (product form, O(nodes)
    for any number of messages). ``routing`` is ``"xy"`` (default) or ``"yx"``.
    """

    mode = "flow"

    def __init__(self, mesh: Mesh, routing: str = "xy") -> None:
        self.mesh = mesh
        self.routing = check_routing(routing)

    def simulate(self, traffic: AnyTraffic) -> FabricResult:
        mesh = self.mesh
        if isinstance(traffic, OuterTraffic):
            a, b = traffic.src_weight, traffic.dst_weight
            _check_len(mesh, len(a))
            load = outer_link_loads(mesh, a, b, self.routing)
            counts = outer_link_loads(mesh, (a > 0).astype(float), (b > 0).astype(float), self.routing)
            hops = _max_manhattan(mesh, np.flatnonzero(a > 0), np.flatnonzero(b > 0))
            if traffic.messages == 0:
                hops = 0
            cycles, _ = phase_cycles(mesh, load, hops)
            total = traffic.bytes_total
            return summarise(mesh, self.mode, cycles=cycles, link_load=load, routes_per_node=routes_per_node(mesh, counts),
                             messages=traffic.messages, events=0, injected=total, delivered=total)
        traffic.check(mesh)
        src, dst, nbytes, mc = traffic.src, traffic.dst, traffic.nbytes, traffic.multicast
        live = nbytes > 0
        segments = _Segments(mesh, src, dst, self.routing, mc)
        load = segments.loads(nbytes)
        counts = segments.loads(live.astype(np.float64))  # a message with no bytes sets up no route
        remote = live & (src != dst)
        hops = segments.hops[live[segments.remote]]
        longest = int(hops.max()) if len(hops) else 0
        cycles, _ = phase_cycles(mesh, load, longest)
        arrivals = {}
        if mc is not None:
            for i in np.flatnonzero(mc & remote):  # few: arrival of each receiver, uncontended
                route = mesh.multicast_route(int(src[i]), int(dst[i]))
                first = mesh.link_bytes_per_cycle[route.links[1]]
                tail = busy_cycles(nbytes[i] / first) - 1.0
                arrivals[int(i)] = tuple(mesh.injection_cycles + k * mesh.hop_cycles + tail
                                         for k in range(1, route.hops + 1))
        total = float(nbytes.sum())
        return summarise(mesh, self.mode, cycles=cycles, link_load=load, routes_per_node=routes_per_node(mesh, counts),
                         messages=len(traffic), events=0, injected=total, delivered=total, arrivals=arrivals)


def _check_len(mesh: Mesh, n: int) -> None:
    if n != mesh.nodes:
        raise ConfigError(f"expected one weight per node ({mesh.nodes}), got {n}")
