"""The messages of MoE dispatch (docs/model.md §6.4): which node sends which share of a region's bytes to
which of its nodes, and in what order.

Source node ``s`` holds ``node_pes[s] / pes`` of the tokens; region node ``d`` takes its PEs' share of
the region's bytes. Both marginals are met exactly, with at most one message per (source, region) plus
one per region node, by the north-west corner rule: walk the sources in golden-ratio order (by the
fractional part of ``s·0.618…``) and the region's nodes in row-major order, pairing them by cumulative
share. Any run of that walk is spread over the whole wafer, so every destination node draws its bytes
from all over it, as tokens do, not from one corner. Messages are issued in the shifted order of
``OuterTraffic.to_traffic``: at each step every source ``s`` sends to region ``(s + k) mod T``, with the
shifts ``k`` taken in golden-ratio order.

Many regions at once: the sources' cumulative shares ``c_src`` are the same for every region, so a
region's breakpoints are ``c_src`` with its own few node boundaries ``c_dst`` merged in (a boundary equal
to a source's is one breakpoint); each interval between breakpoints is one message, from the source whose
share ends at or after it to the region node whose share ends at or after it.

``dispatch_plan`` gives the messages in issue order (the traffic itself); ``region_plan`` gives the same
messages region by region, each region's in issue order, a block of regions at a time: all the dispatch
model needs (its sums run over one region's messages in their order), with scratch for one block (a
block per thread when two build them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..config.errors import InternalError
from .grouped import BLOCK_MESSAGES
from .indices import index_dtype
from .mesh import Mesh
from .placement import Placement
from .traffic import GOLDEN

if TYPE_CHECKING:
    from concurrent.futures import Executor

Plan = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""(src, dst, region, share of the region's bytes), one entry per message."""


@dataclass(frozen=True)
class _Walks:
    """The two walks: sources in golden-ratio order with their cumulative shares, and every region's
    nodes (regions one after another) with theirs and where they fall among the sources'."""

    walk: np.ndarray    # the sources in walk order
    c_src: np.ndarray   # their cumulative shares
    nodes: np.ndarray   # every region's nodes, region after region
    sizes: np.ndarray   # nodes per region
    first: np.ndarray   # each region's first node in ``nodes``
    c_dst: np.ndarray   # each node's cumulative share within its region
    left: np.ndarray    # the first source share ≥ the node's boundary
    kept: np.ndarray    # the boundary is not a source's (so it adds a breakpoint)
    right: np.ndarray   # the first source share > the boundary
    index: type[np.signedinteger]  # for the (region × source) arrays


def _walks(mesh: Mesh, placement: Placement) -> _Walks:
    n, tiles = mesh.nodes, len(placement.regions)
    # golden-ratio (Weyl) order: any run of consecutive sources in it is spread over the whole wafer
    walk = np.argsort(np.modf(np.arange(n) * GOLDEN)[0], kind="stable")
    c_src = np.cumsum((mesh.node_pes / mesh.pes)[walk])
    c_src[-1] = 1.0
    per_region = [mesh.region_nodes(r) for r in placement.regions]
    nodes, pes = (np.concatenate(x) for x in zip(*per_region, strict=True))
    sizes = np.array([len(x) for x, _ in per_region])
    first = np.cumsum(sizes) - sizes
    total = np.cumsum(pes)
    before = (total - pes)[first]                                 # PEs of the regions before (exact ints)
    c_dst = (total - np.repeat(before, sizes)) / np.repeat(total[first + sizes - 1] - before, sizes)
    c_dst[first + sizes - 1] = 1.0                                # both walks end exactly at the whole
    if np.any(np.diff(c_src) <= 0):
        raise InternalError("the sources' cumulative shares must increase")
    left = np.searchsorted(c_src, c_dst, side="left")
    kept = c_src[np.minimum(left, n - 1)] != c_dst                # a boundary equal to a source's is merged
    it = index_dtype(tiles * (n + 1) + len(c_dst))                # indices as narrow as the largest allows
    return _Walks(walk.astype(it), c_src, nodes.astype(it), sizes, first, c_dst, left, kept, left + ~kept, it)


def _points(w: _Walks, lo: int, hi: int) -> Plan:
    """The messages to regions ``lo .. hi − 1``, region after region, each region's in walk order."""
    n, tiles, it = len(w.walk), hi - lo, w.index
    a, b = int(w.first[lo]), int(w.first[hi - 1] + w.sizes[hi - 1])  # the block's nodes in ``w.nodes``
    sizes, first = w.sizes[lo:hi], w.first[lo:hi] - a
    kept, left, right, c_dst = w.kept[a:b], w.left[a:b], w.right[a:b], w.c_dst[a:b]
    reg = np.repeat(np.arange(tiles), sizes)
    # per region and source i: boundaries merged in before it (kept, left ≤ i), and below it (right ≤ i)
    grid = np.zeros((tiles, n + 1), dtype=it)
    np.add.at(grid, (reg[kept], left[kept]), 1)
    merged_before = np.cumsum(grid, axis=1, dtype=it)[:, :n]
    grid[:] = 0
    np.add.at(grid, (reg, right), 1)
    below = np.cumsum(grid, axis=1, dtype=it, out=grid)[:, :n]
    length = n + np.bincount(reg[kept], minlength=tiles)
    offset = np.cumsum(length) - length
    point = np.empty(int(length.sum()))
    src_of = np.empty(len(point), dtype=it)
    dst_of = np.empty(len(point), dtype=it)
    # a source boundary's place
    at = offset.astype(it)[:, None] + np.arange(n, dtype=it)[None, :] + merged_before
    point[at] = w.c_src[None, :]
    src_of[at] = np.arange(n, dtype=it)[None, :]
    dst_of[at] = first.astype(it)[:, None] + below
    del grid, merged_before, below, at
    rank = np.arange(len(c_dst)) - first[reg]                     # a node boundary's rank in its region
    kept_rank = np.cumsum(kept) - kept - np.repeat((np.cumsum(kept) - kept)[first], sizes)
    at = offset[reg[kept]] + left[kept] + kept_rank[kept]
    point[at] = c_dst[kept]
    src_of[at] = left[kept]
    dst_of[at] = first[reg[kept]] + rank[kept]
    share = np.r_[0.0, point[:-1]]                                # each interval's lower end, then its width
    share[offset] = 0.0
    np.subtract(point, share, out=share)
    del point
    keep = share > 1e-12  # drop slivers where the two walks' boundaries coincide
    region = np.repeat(np.arange(lo, hi, dtype=it), length)[keep]
    return w.walk[src_of[keep]], w.nodes[a:b][dst_of[keep]], region, share[keep]


def _shift_rank(tiles: int) -> np.ndarray:
    """The rank of each shift ``k`` (region − source mod T) in golden-ratio order: the order of issue."""
    return np.argsort(np.argsort(np.modf(np.arange(tiles) * GOLDEN)[0], kind="stable"))


def dispatch_plan(mesh: Mesh, placement: Placement) -> Plan:
    """The messages of MoE dispatch in issue order, all regions at once."""
    w = _walks(mesh, placement)
    n, tiles, it = len(w.walk), len(w.sizes), w.index
    src, dst, region, share = _points(w, 0, tiles)
    # issue order: by the rank of the shift (region − src) mod T, then by source; a stable counting sort
    # (the messages of one (region, source) pair are consecutive and keep their order)
    key = _shift_rank(tiles).astype(it)[(region - src) % tiles] * n + src
    issue = _stable_order(key, tiles * n, it)
    return src[issue], dst[issue], region[issue], share[issue]


def _stable_order(key: np.ndarray, size: int, it: type[np.signedinteger]) -> np.ndarray:
    """The stable sort of ``key`` (integers in [0, size) whose equal values are consecutive: the messages
    of one (region, source) pair), by counting: ``argsort(key, kind="stable")`` in a few linear passes."""
    counts = np.bincount(key, minlength=size)
    start = np.cumsum(counts, dtype=it)
    start -= counts.astype(it)
    del counts
    run = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]).astype(it)
    place = np.arange(len(key), dtype=it)
    place -= np.repeat(run, np.diff(np.r_[run, len(key)]))       # the place within its run
    place += start[key]
    del start
    order = np.empty(len(place), dtype=it)
    order[place] = np.arange(len(place), dtype=it)
    return order


def region_plan(mesh: Mesh, placement: Placement, pool: Executor | None = None) -> Plan:
    """The messages of ``dispatch_plan`` sorted by region, each region's in issue order (a stable sort by
    region of the issue order), built a block of regions at a time: by ``pool``'s threads when given
    (numpy releases the GIL in the blocks' large array operations), each block written in its place."""
    w = _walks(mesh, placement)
    n, tiles, it = len(w.walk), len(w.sizes), w.index
    step = _shift_rank(tiles)
    most = tiles * n + int(w.kept.sum())  # messages before slivers are dropped
    src, dst, region, share = np.empty(most, it), np.empty(most, it), np.empty(most, it), np.empty(most)
    # a region's issue order is its sources' by (shift rank, source). The sources of shift k are those
    # ≡ r − k (mod T), ``per_residue`` of each residue, so source s of region r comes after every source
    # of the shifts ranked before its own, and after the s // T of its residue below it
    per_residue = np.bincount(np.arange(n) % tiles, minlength=tiles)
    shift_of_rank = np.argsort(step)
    per_block = max(1, BLOCK_MESSAGES // n)
    blocks = -(-tiles // per_block)
    blocks = min(tiles, blocks + blocks % 2)  # an even count where it can be: two threads share them evenly
    bounds = [(tiles * i // blocks, tiles * (i + 1) // blocks) for i in range(blocks)]
    # each block at the most its regions could take (a whole walk each, and its merged boundaries), then
    # moved down over the slivers dropped before it: the plan is the one large array built
    room = np.r_[0, np.cumsum(n + np.bincount(np.repeat(np.arange(tiles), w.sizes)[w.kept], minlength=tiles))]

    def block(lo: int, hi: int) -> int:
        s, d, r, f = _points(w, lo, hi)
        taken = per_residue[(np.arange(lo, hi)[:, None] - shift_of_rank[None, :]) % tiles]
        before = np.cumsum(taken, axis=1) - taken  # per region and shift rank: sources issued before it
        r0 = r - lo
        rank = before[r0, step[(r - s) % tiles]] + s // tiles
        # a stable sort of the block by (region, rank): a source's messages keep their walk order
        order = _stable_order((r0 * n + rank).astype(it), (hi - lo) * n, it)
        at = slice(int(room[lo]), int(room[lo]) + len(order))
        src[at], dst[at], region[at], share[at] = s[order], d[order], r[order], f[order]
        return len(order)

    done = 0
    for (lo, _), length in zip(bounds, (pool.map if pool else map)(lambda b: block(*b), bounds), strict=True):
        if done < room[lo]:  # blocks still being built lie above ``room[lo]``: this writes below them
            for a in (src, dst, region, share):
                a[done:done + length] = a[int(room[lo]):int(room[lo]) + length]
        done += length
    return src[:done], dst[:done], region[:done], share[:done]


__all__ = ["Plan", "dispatch_plan", "region_plan"]
