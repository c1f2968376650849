"""The latency half of the flow timing rule (docs/model.md §6): the path latency charged to each link.

A route's stages are its inject ramp, its h mesh links and its eject ramp. At the j-th mesh link a
route has u = j − 1 hops behind it and t = h − u hops to go (inject: u = 0, t = h; eject: u = h, t = 0),
so a head that reaches the link uncontended got there ``injection + u·hop`` cycles after issue, and a
head granted it at cycle g is delivered at g + ``t·hop`` + (L − 1) at the earliest (inject: the
injection latency is part of t). Over a link ℓ the flow rule charges

    latency_ℓ = injection + (u_min + t*) · hop

u_min: the fewest hops behind of any route over ℓ (the earliest the link can start); t*: the most hops
to go among the routes with the most hops behind (the heads that reach ℓ last, which a FIFO link serves
last). For a lone message this is its whole route, injection + h·hop; it is never more than the longest
route over the link (u_min + t* ≤ u* + t* = h of that route).

Each route is summarised per link by two numbers whose maxima over routes give u_min and (u*, t*):
−u, and the key u·W + t (largest u first, then largest t). Along a row or column leg u moves by one
hop per link, so the key is a per-route constant plus a per-link term, and the maxima over ranges of
links come from a segment tree (``range_max``). Product traffic (``OuterTraffic``) gets the same
numbers in closed form from prefix scans of where the active sources and destinations lie
(``outer_latency``), in O(nodes). Units: hops (the callers multiply by ``hop_cycles``).
"""

from __future__ import annotations

import numpy as np

from ..config.errors import InternalError
from .indices import index_dtype
from .mesh import EAST, EJECT, INJECT, LINKS_PER_NODE, NORTH, SOUTH, WEST, Mesh

NONE = -np.inf  # no route crosses the link
W = 65536.0     # key = u·W + t; routes have fewer hops than W


def decode(u_min: np.ndarray, key: np.ndarray) -> np.ndarray:
    """``u_min + t*`` per link from the maxima of −u (``u_min`` negated back by the caller) and of the
    key."""
    out = np.full(len(key), NONE)
    some = key > NONE
    u = np.floor(key[some] / W)
    out[some] = u_min[some] + key[some] - u * W
    return out


EMPTY = np.iinfo(np.int32).min // 2  # ``range_max`` of int32 values where no range covers a cell


def _floor_log2(n: np.ndarray) -> np.ndarray:
    """⌊log2 n⌋ of positive integers, as int64."""
    return np.floor(np.log2(n)).astype(np.int64)



def range_max(bounds: tuple[np.ndarray, np.ndarray], w: np.ndarray, rows: int, width: int) -> np.ndarray:
    """Largest ``w`` over the ranges [start, stop) (flat indices into a ``rows × width`` array, each range
    within one row, start ≤ stop) that cover each cell. ``w`` is one value per range, or a column of values
    per range (shape ``(n, c)``: c maxima at once); float values give ``NONE``, int32 ``EMPTY`` where no range
    covers a cell. Shape ``(rows, width)`` or ``(rows, width, c)``.

    A range of length n is the union of two blocks of 2^k cells, k = ⌊log2 n⌋, one at each end (they may
    overlap: harmless for a maximum), so each range marks two cells of level k; then each level passes its
    blocks' values down to the two halves of each block, level by level, to single cells. An empty range
    marks a level above the top one, which nothing reads (no range is filtered out)."""
    w = np.asarray(w)
    one = w.ndim == 1
    w = w.reshape(len(w), -1)
    cols, fill = w.shape[1], NONE if w.dtype.kind == "f" else EMPTY
    lo, hi = bounds
    size = rows * width
    # by length (a range lies within one row: at most width cells): its level, where that level's cells
    # start in the table, and the block's length 2^k; length 0 goes to the unread level
    k = _floor_log2(np.arange(1, width + 1))
    levels = int(k[-1]) + 1 if width else 1
    it = np.result_type(np.asarray(lo).dtype, index_dtype((levels + 1) * size))
    start = np.r_[levels, k].astype(it) * size
    block = np.r_[0, np.left_shift(1, k)].astype(it)
    length = hi - lo
    if len(length) and length.min() < 0:
        raise InternalError("expected ranges with start <= stop")
    at_level = start[length]
    first, last = lo + at_level, hi - block[length] + at_level  # the two blocks of 2^k: from each end
    table = np.full((cols, levels + 1, size), fill, dtype=w.dtype)
    for c in range(cols):
        cells = table[c].reshape(-1)
        np.maximum.at(cells, first, w[:, c])
        np.maximum.at(cells, last, w[:, c])
    # a block of 2^j at p holds the blocks of 2^(j−1) at p and p + 2^(j−1)
    for j in range(levels - 1, 0, -1):
        half, up, down = 1 << (j - 1), table[:, j], table[:, j - 1]
        np.maximum(down, up, out=down)
        np.maximum(down[:, half:], up[:, :-half], out=down[:, half:])
    out = np.moveaxis(table[:, 0], 0, -1)
    return out.reshape(rows, width) if one else out.reshape(rows, width, cols)


# ------------------------------------------------------------------------------------------ product traffic


def _scan(x: np.ndarray, op: str, axis: int, reverse: bool = False, shift: bool = False) -> np.ndarray:
    """Running max or min of ``x`` along ``axis`` (from the far end if ``reverse``); ``shift`` makes it
    exclusive of the cell itself (the identity, ∓inf, at the first cell)."""
    ufunc = np.maximum if op == "max" else np.minimum
    y = np.flip(x, axis) if reverse else x
    y = ufunc.accumulate(y, axis=axis)
    if shift:
        y = np.roll(y, 1, axis=axis)
        np.moveaxis(y, axis, 0)[0] = -np.inf if op == "max" else np.inf
    return np.flip(y, axis) if reverse else y


def _xy(a: np.ndarray, b: np.ndarray) -> dict[int, np.ndarray]:
    """``u_min + t*`` over each link (by direction, each ``rows × cols``; ``NONE`` where no route) of the
    XY routes of all pairs (s, d), s ≠ d, with ``a[s]`` and ``b[d]`` true. A route runs along the
    source's row to the destination's column, then along that column: it crosses east link
    (r, c)→(r, c+1) iff it starts in row r at a column ≤ c and ends at a column > c, and south link
    (r, c)→(r+1, c) iff it starts at a row ≤ r and ends in column c at a row > r. On a mesh link t
    depends only on the destination, so t* is the largest t over all destinations past the link."""
    R, C = a.shape
    r, c = np.arange(R)[:, None], np.arange(C)[None, :]
    inf = np.inf
    # the farthest destination row from row r in column c' (b), the nearest source column to c in row r' (a)
    col_has = b.any(axis=0)
    top, bottom = np.argmax(b, axis=0), R - 1 - np.argmax(b[::-1], axis=0)
    far_row = np.where(col_has, np.maximum(r - top, bottom - r), NONE)
    src_le = _scan(np.where(a, c, -inf), "max", 1)                 # nearest source column ≤ c in row r
    src_ge = _scan(np.where(a, c, inf), "min", 1, reverse=True)    # nearest source column ≥ c
    near_col = np.minimum(c - src_le, src_ge - c)                   # inf where row r has no source
    out = {}
    with np.errstate(invalid="ignore"):  # inf − inf where a side is empty: no route (NaN → NONE below)
        east, west, south, north = (np.full((R, C), NONE) for _ in range(4))
        # east: t* + c = max over columns c' > c of (c' + far_row); u_min = c − nearest source ≤ c
        east[:, :-1] = _scan(c + far_row, "max", 1, reverse=True)[:, 1:] - src_le[:, :-1]
        # west: t* − c = max over c' < c of (far_row − c'); u_min = nearest source ≥ c − c
        west[:, 1:] = _scan(far_row - c, "max", 1)[:, :-1] + src_ge[:, 1:]
        # south: u_min − r = min over source rows r' ≤ r of (near_col − r'); t* + r = lowest destination
        # below r
        lowest = _scan(np.where(b, r, NONE), "max", 0, reverse=True)
        south[:-1, :] = _scan(near_col - r, "min", 0)[:-1, :] + lowest[1:, :]
        # north: u_min + r = min over r' ≥ r of (near_col + r'); t* − r = −(highest destination above r)
        highest = _scan(np.where(b, r, inf), "min", 0)
        north[1:, :] = _scan(near_col + r, "min", 0, reverse=True)[1:, :] - highest[:-1, :]
        for d, v in ((EAST, east), (WEST, west), (SOUTH, south), (NORTH, north)):
            v[~np.isfinite(v)] = NONE
            out[d] = v
        # inject: u = 0, t* = the farthest destination; eject: u_min = the nearest other source, t = 0
        dr, dc = np.nonzero(b)
        far = np.max([sr * r + sc * c - (sr * dr + sc * dc).min() for sr in (1, -1) for sc in (1, -1)],
                     axis=0) if len(dr) else np.full((R, C), NONE)
        # not a source whose only destination is itself
        out[INJECT] = np.where(a & ~(b & (b.sum() == 1)), far, NONE)
        above = _scan(near_col - r, "min", 0, shift=True) + r           # sources in rows above
        below = _scan(near_col + r, "min", 0, reverse=True, shift=True) - r
        left = c - _scan(np.where(a, c, -inf), "max", 1, shift=True)    # same row, strictly left
        right = _scan(np.where(a, c, inf), "min", 1, reverse=True, shift=True) - c
        near = np.minimum(np.minimum(above, below), np.minimum(left, right))
        out[EJECT] = np.where(b & np.isfinite(near), near, NONE)
    return out


def outer_latency(mesh: Mesh, a: np.ndarray, b: np.ndarray, routing: str = "xy") -> np.ndarray:
    """``u_min + t*`` (hops) over each directed link of product traffic ``T[s, d] = a[s]·b[d]`` (the pairs
    ``s != d`` with bytes): shape ``(nodes * 6,)``, ``NONE`` where no route crosses. YX is XY on the
    transposed mesh, with east and south (west and north) swapped."""
    R, C = mesh.rows, mesh.cols
    A, B = a.reshape(R, C) > 0, b.reshape(R, C) > 0
    out = np.full((R, C, LINKS_PER_NODE), NONE)
    if routing == "xy":
        for d, v in _xy(A, B).items():
            out[:, :, d] = v
    else:
        swap = {EAST: SOUTH, WEST: NORTH, SOUTH: EAST, NORTH: WEST, INJECT: INJECT, EJECT: EJECT}
        for d, v in _xy(A.T, B.T).items():
            out[:, :, swap[d]] = v.T
    flat = out.reshape(-1)
    flat[mesh.link_parallel == 0] = NONE
    return flat


# ------------------------------------------------------------------------------- chosen links, per group


class RouteIndex:
    """The routes over chosen links, kept apart by group: (u_min, key) per (link, group), as
    ``flow._Segments.path`` gives them for every link at once, but computed only for the links asked for.

    Built from unicast messages' dimension-ordered routes: each message's row leg and column leg (a line
    of the mesh and a range of cells on it), its source and its destination. A link's routes are found
    through an index of the messages by line (by source for an inject ramp, by destination for an eject
    ramp), so asking for k links costs about k × (messages per line), not the whole traffic. The dispatch
    model uses it for the rare call in which some regions send nothing."""

    def __init__(self, mesh: Mesh, src: np.ndarray, dst: np.ndarray, group: np.ndarray, groups: int,
                 routing: str) -> None:
        R, C = mesh.rows, mesh.cols
        self.mesh, self.groups = mesh, groups
        remote = src != dst
        src, dst, self.group = src[remote], dst[remote], np.asarray(group)[remote]
        rs, cs = np.divmod(src, C)
        rd, cd = np.divmod(dst, C)
        self.hops = np.abs(rd - rs) + np.abs(cd - cs)
        xy = routing == "xy"
        east, south = cd > cs, rd > rs
        # row leg: line hr (east) or R + hr (west), cells [lo, hi), u = u0 + σ(p − cs) at cell p;
        # column leg: line vc (south) or C + vc (north), u = u0 + σ(p − rs)
        hr, vc = (rs, cd) if xy else (rd, cs)
        row_leg = (np.where(east, hr, hr + R), np.where(east, cs, cd + 1), np.where(east, cd, cs + 1),
                   np.where(east, 1, -1).astype(np.int8), cs, 0 if xy else np.abs(rd - rs))
        col_leg = (np.where(south, vc, vc + C), np.where(south, rs, rd + 1), np.where(south, rd, rs + 1),
                   np.where(south, 1, -1).astype(np.int8), rs, np.abs(cd - cs) if xy else 0)
        self.legs = [self._leg(*leg, lines) for leg, lines in ((row_leg, 2 * R), (col_leg, 2 * C))]
        self.by_src, self.by_dst = self._index(src, mesh.nodes), self._index(dst, mesh.nodes)

    @staticmethod
    def _index(key: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(messages sorted by key, where each key's run starts): a CSR index."""
        order = np.argsort(key, kind="stable").astype(index_dtype(len(key)))
        return order, np.searchsorted(key[order], np.arange(size + 1))

    def _leg(self, line: np.ndarray, lo: np.ndarray, hi: np.ndarray, sign: np.ndarray, p0: np.ndarray,
             u0: np.ndarray | int, lines: int) -> tuple[np.ndarray, ...]:
        order, start = self._index(line, lines)
        return order, start, lo, hi, sign, u0 - sign * p0

    @staticmethod
    def _gather(index: tuple[np.ndarray, np.ndarray], keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position among ``keys``, message) for every message filed under each key."""
        order, start = index
        a, b = start[keys], start[keys + 1]
        n = b - a
        owner = np.repeat(np.arange(len(keys)), n)
        first = np.repeat(a - np.cumsum(n) + n, n)
        return owner, order[first + np.arange(len(owner))]

    def query(self, links: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(u_min, key) of shape ``(len(links), groups)``: +inf and ``NONE`` where a group's routes miss the
        link."""
        R, C = self.mesh.rows, self.mesh.cols
        links = np.asarray(links, dtype=np.int64)
        node, d = np.divmod(links, LINKS_PER_NODE)
        r, c = np.divmod(node, C)
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (link's position, message, u) per route
        for leg, dirs, line, cell in ((self.legs[0], (EAST, WEST), np.where(d == EAST, r, R + r), c),
                                      (self.legs[1], (SOUTH, NORTH), np.where(d == SOUTH, c, C + c), r)):
            order, start, lo, hi, sign, base = leg
            pick = np.flatnonzero(np.isin(d, dirs))
            owner, m = self._gather((order, start), line[pick])
            p = cell[pick][owner]
            on = (lo[m] <= p) & (p < hi[m])
            m, p = m[on], p[on]
            found.append((pick[owner[on]], m, base[m] + sign[m] * p))
        for ramp, index in ((INJECT, self.by_src), (EJECT, self.by_dst)):  # inject: u = 0; eject: u = h
            pick = np.flatnonzero(d == ramp)
            owner, m = self._gather(index, node[pick])
            found.append((pick[owner], m, np.zeros_like(m) if ramp == INJECT else self.hops[m]))
        owner, m, u = (np.concatenate(x) for x in zip(*found, strict=True))
        cell = owner * self.groups + self.group[m]
        u_min = np.full(len(links) * self.groups, np.inf)
        key = np.full(len(links) * self.groups, NONE)
        np.minimum.at(u_min, cell, u.astype(np.float64))
        np.maximum.at(key, cell, u * W + (self.hops[m] - u))
        return u_min.reshape(len(links), -1), key.reshape(len(links), -1)
