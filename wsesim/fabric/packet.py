"""The packet fidelity (docs/model.md §6): every message walks the links of its route, stage by stage, in
global time order: a discrete-event model, vectorised in numpy, without a process per message.

Semantics: those of the SimPy reference (``packet-simpy``, wsesim/fabric/packet_simpy.py, whose docstring
states them with the reasons for its choices), reproduced cycle for cycle (tests/fabric/test_packet.py):
a message's head takes, stage by stage, the lane that frees first, FIFO, busy for its L wavelets
(virtual cut-through); at block granularity a message is ``min(K, L)`` stripes. Every stripe is issued at
cycle 0, grouped by source (sources in the order of their first message), each source's in issue order;
two heads reaching one link in the same cycle go in the order their previous stages were granted (by
cycle, then recursively by this same order). ``cycles`` is the cycle the last receiver holds the last
wavelet.

How (the calendar of windows): a head granted a mesh-link or inject stage at cycle s reaches its next
stage at s + latency, at least ``hop_cycles`` later (injects are granted only at cycle 0). So the
stages reached within one window of ``hop_cycles`` cycles cannot affect one another except through
the links they share, and they are granted together: all heads of the window, sorted by (link, cycle,
order), each link's queue served in rounds (``_Lanes.grant``). The window's heads then go to the
windows of their next stages, in grant order, which is what breaks the next ties. An eject ramp that
has at least as many lanes as the mesh lanes into its node never queues (at most that many bodies
can stream into it at once), so it is not booked. Multicast (a receiver mid-route, whose eject has no
latency) and hops of no latency break the window's premise; such traffic is granted one stage at a
time from a heap (``_one_by_one``), with the same semantics.
"""

from __future__ import annotations

import heapq

import numpy as np

from ..config.errors import ConfigError
from .flow import link_loads
from .mesh import EAST, EJECT, INJECT, LINKS_PER_NODE, NORTH, SOUTH, WEST, Mesh, check_routing
from .traffic import AnyTraffic, FabricResult, Traffic, listed, summarise

_LOW = (1 << 32) - 1  # a queued head is packed as (route position << 32) | wavelets


def stripes(mesh: Mesh, traffic: Traffic) -> tuple[np.ndarray, np.ndarray]:
    """(message, wavelets) of every stripe, in issue order. A message to its own node, or of no bytes,
    has none."""
    src, nbytes = traffic.src, traffic.nbytes
    total = np.ceil(nbytes / mesh.wavelet_bytes - 1e-9)
    total[(src == traffic.dst) | (nbytes <= 0)] = 0
    total = np.maximum(total, 0).astype(np.int64)
    count = np.minimum(mesh.block, total)
    msgs = np.flatnonzero(count > 0)
    first = np.full(mesh.nodes, len(src))
    np.minimum.at(first, src[msgs], msgs)
    msgs = msgs[np.argsort(first[src[msgs]], kind="stable")]  # by source, sources by their first message
    n = count[msgs]
    msg = np.repeat(msgs, n)
    j = np.arange(len(msg)) - np.repeat(np.cumsum(n) - n, n)
    return msg, total[msg] // n.repeat(n) + (j < total[msg] % n.repeat(n))


def route_codes(mesh: Mesh, src: np.ndarray, dst: np.ndarray, routing: str) -> tuple[np.ndarray, np.ndarray]:
    """Every route's stages as one flat array of ``link * 2 + is_last`` (inject, mesh links, eject), and
    where each message's stages start. Same dimension-ordered routes as ``Mesh.route``."""
    C = mesh.cols
    rs, cs = np.divmod(src, C)
    rd, cd = np.divmod(dst, C)
    sx, sy = np.sign(cd - cs), np.sign(rd - rs)
    lead = np.abs(cd - cs) if routing == "xy" else np.abs(rd - rs)  # hops of the first leg
    h = np.abs(cd - cs) + np.abs(rd - rs)
    off = np.cumsum(h + 2) - (h + 2)
    m = np.repeat(np.arange(len(src)), h + 2)
    k = np.arange(len(m)) - off[m]
    first = k <= lead[m]
    j = np.where(first, k - 1, k - 1 - lead[m])
    horizontal = first if routing == "xy" else ~first
    row = np.where(horizontal, rs[m] if routing == "xy" else rd[m], rs[m] + sy[m] * j)
    col = np.where(horizontal, cs[m] + sx[m] * j, cd[m] if routing == "xy" else cs[m])
    d = np.where(horizontal, np.where(sx[m] > 0, EAST, WEST), np.where(sy[m] > 0, SOUTH, NORTH))
    last = k == h[m] + 1
    link = np.where(k == 0, src[m] * LINKS_PER_NODE + INJECT,
                    np.where(last, dst[m] * LINKS_PER_NODE + EJECT, (row * C + col) * LINKS_PER_NODE + d))
    return link * 2 + last, off


def _radix(key: np.ndarray) -> np.ndarray:
    """Stable argsort of non-negative integer keys, in 16-bit passes of numpy's radix sort."""
    top = int(key.max()) if len(key) else 0
    if top < 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    if top >= 1 << 32:
        return np.argsort(key, kind="stable")
    order = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
    return order[np.argsort((key[order] >> 16).astype(np.uint16), kind="stable")]


class _Lanes:
    """The lanes of a set of links: ``free[link, lane]`` is the cycle the lane is next free (inf where a
    link has fewer lanes, or none)."""

    def __init__(self, parallel: np.ndarray, width: int) -> None:
        self.free = np.where(np.arange(width)[None, :] < parallel[:, None], 0.0, np.inf)

    def grant(self, link: np.ndarray, t: np.ndarray, w: np.ndarray, order: np.ndarray | None) -> np.ndarray:
        """Start cycle of each head (``link``, arrival ``t``, ``w`` wavelets), heads served per link by
        (``order`` key, position): the order heads reached each link.

        A link's queue is served up to ``width`` heads per round. With its lanes' free cycles sorted,
        F_0 ≤ F_1 ≤ …, the j-th head takes F_j (it starts at max(t_j, F_j), frees at c_j = start + w_j)
        as long as no earlier head of the round frees sooner (min c_i for i < j ≥ F_j); the round stops
        at the first head for which one does, and the next round starts there. This is the earliest-free
        lane of each head in turn, many at once. The last few queues go one head at a time in Python."""
        n, free = len(link), self.free
        if not n:
            return np.empty(0)
        key = link if order is None else link * (int(order.max()) + 1) + order
        o = _radix(key)
        lo, ts, ws = link[o], t[o], w[o]
        head = np.flatnonzero(np.r_[True, lo[1:] != lo[:-1]])  # first head of each link's queue
        end = np.r_[head[1:], n]
        out = np.empty(n)
        width = np.arange(free.shape[1])
        nxt, act = head.copy(), np.arange(len(head))
        while len(act) >= 8:
            rows, p, e = lo[nxt[act]], nxt[act], end[act]
            lanes = np.sort(free[rows], axis=1)
            idx = p[:, None] + width
            live = idx < e[:, None]
            np.minimum(idx, n - 1, out=idx)
            start = np.maximum(ts[idx], lanes)
            done = start + ws[idx]
            sooner = np.full_like(done, np.inf)
            np.minimum.accumulate(done[:, :-1], axis=1, out=sooner[:, 1:])
            take = np.logical_and.accumulate(live & (sooner >= lanes), axis=1)
            out[idx[take]] = start[take]
            free[rows] = np.where(take, done, lanes)
            nxt[act] = p + take.sum(axis=1)
            act = act[nxt[act] < e]
        for g in act.tolist():
            a, b, row = int(nxt[g]), int(end[g]), int(lo[nxt[g]])
            lanes = free[row].tolist()
            heapq.heapify(lanes)
            granted = []
            for ti, wi in zip(ts[a:b].tolist(), ws[a:b].tolist(), strict=True):
                s = ti if ti > lanes[0] else lanes[0]
                heapq.heapreplace(lanes, s + wi)
                granted.append(s)
            free[row] = lanes
            out[a:b] = granted
        res = np.empty(n)
        res[o] = out
        return res


def _order(t: np.ndarray, integral: bool) -> np.ndarray:
    """Each head's arrival cycle as a small non-negative integer with the same order (ties kept)."""
    if integral:
        return (t - t.min()).astype(np.int64)
    return np.unique(t, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _windows(mesh: Mesh, codes: np.ndarray, first: np.ndarray, w: np.ndarray) -> tuple[float, int]:
    """(cycles, stages granted) of unicast stripes whose routes start at ``codes[first]``."""
    K, par = mesh.block, mesh.link_parallel
    kind = np.arange(len(par)) % LINKS_PER_NODE
    mesh_lanes = _Lanes(np.where(kind < INJECT, par, 0), K)
    ramp_lanes = _Lanes(np.where(kind >= INJECT, par, 0), K * K)
    p = par.reshape(mesh.rows, mesh.cols, LINKS_PER_NODE)
    into = np.zeros((mesh.rows, mesh.cols), dtype=np.int64)  # mesh lanes into each node
    into[:, 1:] += p[:, :-1, EAST]
    into[:, :-1] += p[:, 1:, WEST]
    into[1:, :] += p[:-1, :, SOUTH]
    into[:-1, :] += p[1:, :, NORTH]
    queues = (p[:, :, EJECT] < into).reshape(-1)  # eject ramps that can queue, by node
    hop = mesh.hop_cycles
    integral = float(hop).is_integer() and float(mesh.injection_cycles).is_integer()
    pending: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    calendar: list[int] = []

    def queue(x: np.ndarray, t: np.ndarray, parent: np.ndarray | None, after: int) -> None:
        """Heads (packed) reaching their next stages at ``t``, listed in grant order: into the windows of
        those cycles, keeping that order within each."""
        win = np.maximum(np.floor(t / hop).astype(np.int64) + 1, after + 1)
        low = int(win.min())
        key = win - low if parent is None else (win - low) * (int(parent.max()) + 1) + parent
        if int(key.max()) > 0:
            o = _radix(key)
            x, t, win = x[o], t[o], win[o]
        cut = [0, *(np.flatnonzero(win[1:] != win[:-1]) + 1).tolist(), len(win)]
        for a, b in zip(cut[:-1], cut[1:], strict=True):
            i = int(win[a])
            if i not in pending:
                pending[i] = []
                heapq.heappush(calendar, i)
            pending[i].append((x[a:b], t[a:b]))

    # window 0: every stripe takes its inject ramp at cycle 0, in issue order
    starts = ramp_lanes.grant(codes[first] >> 1, np.zeros(len(first)), w.astype(np.float64), None)
    queue(((first + 1) << 32) | w, starts + mesh.injection_cycles, None, 0)
    finish, granted = 0.0, len(first)
    while calendar:
        i = heapq.heappop(calendar)
        chunks = pending.pop(i)
        x = np.concatenate([c[0] for c in chunks]) if len(chunks) > 1 else chunks[0][0]
        t = np.concatenate([c[1] for c in chunks]) if len(chunks) > 1 else chunks[0][1]
        granted += len(x)
        code = codes[x >> 32]
        last = (code & 1).astype(bool)
        if last.any():  # eject ramps: the body's tail is there L − 1 cycles after the grant
            link, te, we = code[last] >> 1, t[last], (x[last] & _LOW).astype(np.float64)
            q = queues[link // LINKS_PER_NODE]
            start = te.copy()
            if q.any():
                start[q] = ramp_lanes.grant(link[q], te[q], we[q], _order(te[q], integral))
            finish = max(finish, float((start + we - 1).max()))
            x, t, code = x[~last], t[~last], code[~last]
            if not len(x):
                continue
        order = _order(t, integral)
        start = mesh_lanes.grant(code >> 1, t, (x & _LOW).astype(np.float64), order)
        queue(x + (1 << 32), start + hop, order, i)
    return finish, granted


def _one_by_one(mesh: Mesh, traffic: Traffic, routing: str, msg: np.ndarray, w: np.ndarray
                ) -> tuple[float, int, dict[int, tuple[float, ...]]]:
    """(cycles, stages granted, multicast arrivals): one stage at a time from a heap of (cycle, order)."""
    latency = {INJECT: mesh.injection_cycles, EJECT: 0.0}
    lanes: dict[int, list[float]] = {}
    routes: dict[int, list[tuple[list[float], float, int]]] = {}
    arrivals: dict[int, list[float]] = {}
    for i in np.unique(msg).tolist():
        s, d = int(traffic.src[i]), int(traffic.dst[i])
        mc = bool(traffic.is_multicast[i])
        route = mesh.multicast_route(s, d) if mc else mesh.route(s, d, routing)
        stages, receiver = [], 0
        for link in route.links:
            k = link % LINKS_PER_NODE
            free = lanes.setdefault(link, [0.0] * int(mesh.link_parallel[link]))
            stages.append((free, latency.get(k, mesh.hop_cycles), receiver if k == EJECT and mc else -1))
            receiver += k == EJECT
        routes[i] = stages
        if mc:
            arrivals[i] = [0.0] * receiver
    heap = [(0.0, n, n, 0) for n in range(len(msg))]  # (cycle, order, stripe, stage)
    order, finish, granted = len(msg), 0.0, 0
    msgs, wavelets = msg.tolist(), w.tolist()
    while heap:
        t, _, n, k = heapq.heappop(heap)
        stages, size = routes[msgs[n]], wavelets[n]
        while True:  # a stage of no latency granted at once goes straight on to the next
            free, lat, receiver = stages[k]
            s = t if t > free[0] else free[0]
            heapq.heapreplace(free, s + size)
            granted += 1
            if receiver >= 0:
                got = arrivals[msgs[n]]
                got[receiver] = max(got[receiver], s + size - 1)
            k += 1
            if k == len(stages):
                finish = max(finish, s + size - 1)
                break
            if s + lat > t:
                heapq.heappush(heap, (s + lat, order, n, k))
                order += 1
                break
    return finish, granted, {i: tuple(v) for i, v in arrivals.items()}


class PacketFabric:
    """Packet fidelity: every message (every stripe at block granularity) through its route's stages,
    FIFO lanes per link, the same cycles as ``SimPyPacketFabric`` at a fraction of the cost.

    ``simulate`` takes a ``Traffic`` or an ``OuterTraffic`` (listed into messages, at most
    ``max_messages``, else ``ConfigError``). Link loads and route counts are the flow fidelity's (they
    depend on the routes, not on timing); ``cycles`` is the last delivery; ``events`` counts the stages
    granted (one per stripe per link of its route). ``method``: ``"windows"`` (vectorised, see the module
    docstring), ``"heap"`` (one stage at a time) or ``"auto"``: the heap below ``HEAP_STAGES`` stages,
    where its few microseconds per stage beat the windows' fixed cost per window, and always for
    multicast or hops of no latency. Both give the same cycles.
    """

    mode = "packet"
    HEAP_STAGES = 100_000

    def __init__(self, mesh: Mesh, routing: str = "xy", max_messages: int = 2_000_000,
                 method: str = "auto") -> None:
        if method not in ("auto", "windows", "heap"):
            raise ConfigError(f"expected one of auto, windows, heap, got {method!r}", path="method")
        self.mesh = mesh
        self.routing = check_routing(routing)
        self.max_messages = max_messages
        self.method = method

    def simulate(self, traffic: AnyTraffic) -> FabricResult:
        mesh = self.mesh
        traffic = listed(traffic, mesh, self.max_messages, "packet fidelity",
                         "the flow fidelity or a smaller mesh")
        msg, w = stripes(mesh, traffic)
        arrivals: dict[int, tuple[float, ...]] = {}
        used, stripe_of = np.unique(msg, return_inverse=True)
        hops = np.abs(traffic.src[used] // mesh.cols - traffic.dst[used] // mesh.cols) + np.abs(
            traffic.src[used] % mesh.cols - traffic.dst[used] % mesh.cols)
        stages = int((hops + 2)[stripe_of].sum())
        heap = self.method == "heap" or (self.method == "auto" and stages < self.HEAP_STAGES)
        if not len(msg):
            cycles, granted = 0.0, 0
        elif heap or traffic.multicast is not None or mesh.hop_cycles <= 0:
            cycles, granted, arrivals = _one_by_one(mesh, traffic, self.routing, msg, w)
        else:
            codes, offsets = route_codes(mesh, traffic.src[used], traffic.dst[used], self.routing)
            if len(codes) >= 1 << 31 or int(w.max()) > _LOW:
                raise ConfigError(f"{len(codes):,} route stages (or {int(w.max()):,} wavelets in one stripe) "
                                  "are too many for the packet fidelity; "
                                  "use the flow fidelity or a smaller mesh")
            cycles, granted = _windows(mesh, codes, offsets[stripe_of.reshape(-1)], w)
        return packet_result(mesh, self.mode, traffic, self.routing, cycles, granted, msg, arrivals)


def packet_result(mesh: Mesh, mode: str, traffic: Traffic, routing: str, cycles: float, events: int,
                  msg: np.ndarray, arrivals: dict[int, tuple[float, ...]]) -> FabricResult:
    """The ``FabricResult`` of a packet run: loads and route counts from the routes, bytes delivered
    from the messages that reached their receivers (any with a stripe) and those that stay on their node."""
    src, dst, nbytes = traffic.src, traffic.dst, traffic.nbytes
    delivered = np.zeros(len(src), dtype=bool)
    delivered[msg] = True
    delivered |= (src == dst) | (nbytes <= 0)
    live = nbytes > 0
    load = link_loads(mesh, src, dst, nbytes, routing, traffic.multicast)
    counts = link_loads(mesh, src[live], dst[live], np.ones(int(live.sum())), routing,
                        traffic.multicast[live] if traffic.multicast is not None else None)
    return summarise(mesh, mode, cycles=cycles, link_load=load, route_counts=counts,
                     messages=len(src), events=events, injected=float(nbytes.sum()),
                     delivered=float(nbytes[delivered].sum()), arrivals=arrivals)
