"""The flow fidelity: per-link byte loads of dimension-ordered routes, vectorised in numpy, and the phase
time the flow rule takes from them. The model (the rule, why it holds, and how far it is from the packet
fidelity) is docs/model.md §6.2; this module computes it without a Python loop over messages or hops.

Loads: a route's row (or column) segment adds its bytes at its first link and removes them after its
last, and a running sum along each row (or column) gives every link's load. Product traffic
(``OuterTraffic``) needs no message list at all: the load on a link is (bytes from the sources on one
side) × (share of destinations on the other), both prefix sums. Path latencies: range maxima over the
route segments, or prefix scans of where the sources and destinations lie (``wsesim.fabric.latency``).
The dispatch model's grouped passes (one column per region, ``wsesim.fabric.grouped``) go a block of
regions at a time, so their scratch does not grow with the traffic. Units: bytes, cycles.
"""

from __future__ import annotations

import numpy as np

from ..config.errors import InternalError
from .indices import as_index, index_dtype
from .latency import EMPTY, NONE, W, decode, outer_latency, range_max
from .mesh import EAST, EJECT, INJECT, LINKS_PER_NODE, NORTH, SOUTH, WEST, Mesh, check_routing
from .traffic import AnyTraffic, FabricResult, OuterTraffic, busy_cycles, summarise


class _Segments:
    """Where each remote message's route starts and stops along rows and columns, as flat indices into
    difference arrays: computed once per traffic, then summed with any weights (bytes, or ones). The
    indices are int32 wherever the mesh allows (``index_dtype``): half the memory of int64."""

    def __init__(self, mesh: Mesh, src: np.ndarray, dst: np.ndarray, routing: str,
                 multicast: np.ndarray | None) -> None:
        R, C = mesh.rows, mesh.cols
        self.mesh = mesh
        self.remote = src != dst
        it = index_dtype(max(mesh.nodes, 2 * R * (C + 1), 2 * C * (R + 1)))  # the largest index kept here
        src, dst = src[self.remote].astype(it, copy=False), dst[self.remote].astype(it, copy=False)
        self.src, self.dst = src, dst
        # row and column by table look-up: a gather from a small table beats integer division
        row_of, col_of = np.divmod(np.arange(mesh.nodes, dtype=it), C)
        rs, cs, rd, cd = row_of[src], col_of[src], row_of[dst], col_of[dst]
        self.hops = np.abs(rd - rs) + np.abs(cd - cs)
        self.rc = rs, cs, rd, cd
        self.routing = routing
        # row of the horizontal leg, column of the vertical
        hr, vc = (rs, cd) if routing == "xy" else (rd, cs)
        east, south = cd > cs, rd > rs
        # east links (c -> c+1) at columns cs..cd-1 of row block 0; west links (c -> c-1) at columns
        # cd+1..cs of row block 1 (a message with cd == cs gets an empty west range)
        key = np.where(east, hr, hr + R) * (C + 1)
        self.h = (key + np.where(east, cs, cd + 1), key + np.where(east, cd, cs + 1))
        # south links (r -> r+1) at rows rs..rd-1 of column block 0; north links at rows rd+1..rs of block 1
        key = np.where(south, vc, vc + C) * (R + 1)
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

    def loads(self, weight: np.ndarray, group: np.ndarray | None = None, groups: int = 1,
              out: np.ndarray | None = None) -> np.ndarray:
        """Sum of ``weight`` (one per message of the traffic) over each directed link, shape (nodes * 6,),
        or (nodes * 6, groups) with each message's ``group`` (0 .. groups − 1) summed apart (a link's
        groups side by side: the dispatch model's basis, one row per link). ``out``: where to write the
        grouped sums, shape (nodes * 6, groups), a view into a larger array (a block of its columns):
        the same numbers, without a block-sized scratch array and its copy."""
        mesh, R, C = self.mesh, self.mesh.rows, self.mesh.cols
        w = np.asarray(weight, dtype=np.float64)[self.remote]
        g = (np.zeros(len(w), dtype=np.int32) if group is None
             else as_index(np.asarray(group)[self.remote], groups))
        if out is None:
            load = np.zeros((R, C, LINKS_PER_NODE, groups))
        else:  # every cell below is written when there are messages (each direction, ramps included)
            load = out.reshape(R, C, LINKS_PER_NODE, groups)  # a view: only the link axis is split
            if not np.may_share_memory(load, out):
                raise InternalError("expected a view of the output array, got a copy")
            if not len(w):
                load[...] = 0.0
        if len(w):
            # the running sums go straight into the link array (a view per direction: no copies)
            _running(self.h, w, 2 * R, C + 1, g, groups, out=(load[:, :, EAST], load[:, :, WEST]),
                     transpose=False)
            _running(self.v, w, 2 * C, R + 1, g, groups, out=(load[:, :, SOUTH], load[:, :, NORTH]),
                     transpose=True)
            size = R * C * groups
            load[:, :, INJECT] = np.bincount(as_index(self.src, size) * groups + g, w,
                                             minlength=size).reshape(R, C, groups)
            uni = np.ones(len(w), dtype=bool) if self.mc is None else ~self.mc
            load[:, :, EJECT] = np.bincount((as_index(self.dst, size) * groups + g)[uni], w[uni],
                                            minlength=size).reshape(R, C, groups)
            if self.mc is not None:
                lo, hi, width = self.m
                e = _running((lo, hi), w[self.mc], R + C, width, g[self.mc], groups)
                load[:, :, EJECT] += e[:R, :C] + e[R:, :R].transpose(1, 0, 2)
        flat = _clean(mesh, load.reshape(-1, groups) if out is None else out)
        return flat[:, 0] if group is None else flat

    def path(self, live: np.ndarray | None = None, group: np.ndarray | None = None, groups: int = 1,
             numbers: str = "latency") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(u_min, key, longest) over each directed link from the ``live`` messages' routes (None: every
        message's) (``wsesim.fabric.latency``): the fewest hops behind of any route over the link, the
        largest ``u·W + t`` (``decode`` gives the hops the flow rule charges the link) and the most hops of
        any route over it (a bound on those hops for any subset of the routes: u_min + t* ≤ h). Shape
        (nodes * 6,) each, or (groups, nodes * 6) with each message's ``group`` (0 .. groups − 1) kept
        apart; ``NONE`` keys (and +inf, 0) where no route. ``numbers`` says which are computed (the others
        come back +inf, ``NONE`` or 0 everywhere): ``"latency"`` (u_min and key), ``"all"`` (and the
        longest route: over all the messages together only) or ``"longest"``."""
        mesh, R, C = self.mesh, self.mesh.rows, self.mesh.cols
        latency, longest = numbers in ("latency", "all"), numbers in ("all", "longest")
        if longest and group is not None or not (latency or longest):
            raise InternalError(f"expected latency, all or longest (over all messages), got {numbers}")
        sel: np.ndarray | slice = slice(None) if live is None else np.asarray(live, dtype=bool)[self.remote]
        rs, cs, rd, cd = (x[sel] for x in self.rc)
        h = self.hops[sel]
        g = (np.zeros(len(h), dtype=np.int32) if group is None
             else as_index(np.asarray(group)[self.remote][sel], groups))
        # kept as int32 (keys < 2^31), EMPTY where no route; one column per number: the key, −u for u_min,
        # the longest route, as asked for
        nc, hc = 2 * latency + longest, 2 * latency  # columns, and the longest route's
        out = np.full((groups, R, C, LINKS_PER_NODE, nc), EMPTY, dtype=np.int32)
        if len(h):
            # a leg starting at position p0 with u0 hops behind it has u = u0 + σ(p − p0) at position p
            xy, w = self.routing == "xy", int(W)
            legs = ((self.h, 2 * R, C + 1, np.where(cd > cs, 1, -1), cs, 0 if xy else np.abs(rd - rs),
                     (EAST, WEST)),
                    (self.v, 2 * C, R + 1, np.where(rd > rs, 1, -1), rs, np.abs(cd - cs) if xy else 0,
                     (SOUTH, NORTH)))
            for bounds, rows, width, sign, p0, u0, (fwd, back) in legs:
                base = u0 - sign * p0
                cols = np.stack(([base * (w - 1) + h, -base] if latency else []) + ([h] if longest else []),
                                axis=1).astype(np.int32)
                # each group its own copy of the lines
                if group is None:
                    at = bounds[0][sel], bounds[1][sel]
                else:
                    shift = as_index(g, groups * rows * width) * (rows * width)
                    at = bounds[0][sel] + shift, bounds[1][sel] + shift
                x = range_max(at, cols, groups * rows, width)
                x = x.reshape(groups, rows, width, nc)[:, :, :width - 1]
                if latency:
                    p = (np.arange(width - 1)[None, :]
                         * np.repeat([1, -1], rows // 2)[:, None]).astype(np.int32)
                    some = x[..., 0] > EMPTY
                    x[..., 0] += np.where(some, p * (w - 1), 0).astype(np.int32)  # σ·p: +p forward, −p back
                    x[..., 1] -= np.where(some, p, 0).astype(np.int32)
                half = x[:, :rows // 2], x[:, rows // 2:]
                if fwd == EAST:
                    out[:, :, :, fwd], out[:, :, :, back] = half
                else:
                    out[:, :, :, fwd], out[:, :, :, back] = (half[0].transpose(0, 2, 1, 3),
                                                             half[1].transpose(0, 2, 1, 3))
            ramps = out.reshape(groups * R * C, LINKS_PER_NODE, nc)
            if group is None:
                at_src, at_dst = self.src[sel], self.dst[sel]
            else:
                at = as_index(g, groups * R * C) * (R * C)
                at_src, at_dst = at + self.src[sel], at + self.dst[sel]
            h32 = h.astype(np.int32)
            if latency:
                np.maximum.at(ramps[:, INJECT, 0], at_src, h32)      # inject: u = 0, t = h
                ramps[at_src, INJECT, 1] = 0
                np.maximum.at(ramps[:, EJECT, 0], at_dst, h32 * w)   # eject: u = h, t = 0
                np.maximum.at(ramps[:, EJECT, 1], at_dst, -h32)
            for ramp, at in ((INJECT, at_src), (EJECT, at_dst)) if longest else ():
                np.maximum.at(ramps[:, ramp, hc], at, h32)
            if self.mc is not None:  # a multicast's k-th receiver: u = k, t = h − k (few: one at a time)
                for gi, r0, c0, r1, c1 in zip(*(x[self.mc[sel]] for x in (g, rs, cs, rd, cd)), strict=True):
                    n = abs(r1 - r0) + abs(c1 - c0)
                    k = np.arange(1, n + 1)
                    nodes = gi * R * C + (r0 + np.sign(r1 - r0) * k) * C + c0 + np.sign(c1 - c0) * k
                    if latency:
                        np.maximum.at(ramps[:, EJECT, 0], nodes, k * w + (n - k))
                        np.maximum.at(ramps[:, EJECT, 1], nodes, -k)
                    if longest:
                        np.maximum.at(ramps[:, EJECT, hc], nodes, n)
        out = out.reshape(groups, -1, nc)
        out[:, mesh.link_parallel.reshape(-1) == 0] = EMPTY
        none = out[..., 0] <= EMPTY  # every number is EMPTY where no route crosses, and only there
        key = out[..., 0].astype(np.float64) if latency else np.full(none.shape, NONE)
        u_min = -out[..., 1].astype(np.float64) if latency else np.full(none.shape, np.inf)
        most = out[..., hc].astype(np.float64) if longest else np.zeros(none.shape)
        key[none], u_min[none], most[none] = NONE, np.inf, 0.0
        return (u_min[0], key[0], most[0]) if group is None else (u_min, key, most)


def _running(bounds: tuple[np.ndarray, np.ndarray], w: np.ndarray, rows: int, width: int,
             group: np.ndarray | None = None, groups: int = 1,
             out: tuple[np.ndarray, np.ndarray] | None = None, transpose: bool = False) -> np.ndarray | None:
    """Add ``w`` from flat index ``start`` up to (not including) ``stop`` within each row of a
    ``rows × width`` array, each ``group`` apart: a difference array and a running sum along the rows.
    Returns shape ``(rows, width, groups)``; or, given ``out`` (two arrays, for the first and second half
    of the rows, each ``(rows / 2, width − 1, groups)``, or ``(width − 1, rows / 2, groups)`` with
    ``transpose``), writes the sums there, without the last column (a stop sentinel)."""
    size = rows * width
    at = [as_index(b, groups * size) * groups for b in bounds]
    if group is not None:
        at = [a + group for a in at]
    acc = np.bincount(at[0], w, minlength=groups * size)
    acc -= np.bincount(at[1], w, minlength=groups * size)
    acc = acc.reshape(rows, width, groups)
    if out is None:
        return np.cumsum(acc, axis=1)
    half = rows // 2
    for part, target in zip((acc[:half, :-1], acc[half:, :-1]), out, strict=True):
        np.cumsum(part, axis=1, out=target.transpose(1, 0, 2) if transpose else target)
    return None


def link_loads(mesh: Mesh, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, routing: str = "xy",
               multicast: np.ndarray | None = None) -> np.ndarray:
    """Sum of ``weight`` over every directed link each message's route uses (shape ``(nodes * 6,)``).

    With ``weight`` = bytes this is the link load in bytes; with ones it counts routes. Messages to
    their own node use no link. A multicast also loads the eject ramp of every node after its source.
    """
    return _Segments(mesh, np.asarray(src), np.asarray(dst), routing, multicast).loads(weight)


def _clean(mesh: Mesh, load: np.ndarray) -> np.ndarray:
    """Flat loads (or a stack of them, one column per group), in place, with the rounding residue of
    the running sums removed: zero on links that do not exist, and nothing below zero."""
    flat = np.maximum(load, 0.0, out=load)
    flat[mesh.link_parallel.reshape(-1) == 0] = 0.0
    return flat


def _prefix(x: np.ndarray, axis: int) -> np.ndarray:
    """Inclusive prefix sums of ``x`` along ``axis``."""
    return np.cumsum(x, axis=axis)


def outer_link_loads(mesh: Mesh, a: np.ndarray, b: np.ndarray, routing: str = "xy") -> np.ndarray:
    """Link loads of product traffic ``T[s, d] = a[s]·b[d]`` (``s != d``) in O(nodes), shape
    ``(nodes * 6,)``.

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
    return _clean(mesh, load.reshape(-1))


def flow_cycles(mesh: Mesh, busy: np.ndarray, path_hops: np.ndarray) -> float:
    """The flow timing rule (docs/model.md §6), written once, over any set of links: ``busy[ℓ]`` the
    cycles link ℓ is busy (whole wavelets, as ``busy_cycles``), ``path_hops[ℓ]`` its u_min + t*
    (``wsesim.fabric.latency``; ``NONE`` where no route crosses it). The phase takes max over loaded
    links of ``busy − 1 + injection + path_hops · hop`` (0 with no load)."""
    loaded = busy > 0
    if not loaded.any():
        return 0.0
    return float((busy[loaded] + path_hops[loaded] * mesh.hop_cycles).max()) - 1.0 + mesh.injection_cycles


def link_busy(mesh: Mesh, link_load: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(busy cycles, unrounded wavelet cycles) of each link with these loads (``busy_cycles`` link by
    link)."""
    bw = mesh.link_bytes_per_cycle
    t = np.divide(link_load, bw, out=np.zeros_like(link_load), where=bw > 0)
    return busy_cycles(t), t


def phase_cycles(mesh: Mesh, link_load: np.ndarray, path_hops: np.ndarray) -> tuple[float, float]:
    """(cycles, bytes over the busiest PE link) for a phase with these loads and path latencies per link."""
    busy, t = link_busy(mesh, link_load)
    return flow_cycles(mesh, busy, path_hops), (float(t.max()) if len(t) else 0.0) * mesh.wavelet_bytes


class FlowFabric:
    """Flow fidelity: link loads of all messages at once; time from each link's busy cycles and the path
    latency charged to it.

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
            cycles, _ = phase_cycles(mesh, load, outer_latency(mesh, a, b, self.routing))
            total = traffic.bytes_total
            return summarise(mesh, self.mode, cycles=cycles, link_load=load, route_counts=counts,
                             messages=traffic.messages, events=0, injected=total, delivered=total)
        traffic.check(mesh)
        src, dst, nbytes, mc = traffic.src, traffic.dst, traffic.nbytes, traffic.multicast
        live = nbytes > 0
        segments = _Segments(mesh, src, dst, self.routing, mc)
        load = segments.loads(nbytes)
        counts = segments.loads(live.astype(np.float64))  # a message with no bytes sets up no route
        remote = live & (src != dst)
        cycles, _ = phase_cycles(mesh, load, decode(*segments.path(live)[:2]))
        arrivals = {}
        if mc is not None:
            for i in np.flatnonzero(mc & remote):  # few: arrival of each receiver, uncontended
                route = mesh.multicast_route(int(src[i]), int(dst[i]))
                first = mesh.link_bytes_per_cycle[route.links[1]]
                tail = busy_cycles(nbytes[i] / first) - 1.0
                arrivals[int(i)] = tuple(mesh.injection_cycles + k * mesh.hop_cycles + tail
                                         for k in range(1, route.hops + 1))
        total = float(nbytes.sum())
        return summarise(mesh, self.mode, cycles=cycles, link_load=load, route_counts=counts,
                         messages=len(traffic), events=0, injected=total, delivered=total, arrivals=arrivals)


def _check_len(mesh: Mesh, n: int) -> None:
    if n != mesh.nodes:
        raise InternalError(f"expected one weight per node ({mesh.nodes}), got {n}")
