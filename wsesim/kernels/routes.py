"""Routes a PE's router must hold at once (``fabric.route_paths``: a 5-bit route code, at most 32 paths per
PE on WSE-2; docs/model.md §10.6).

A *route* is one path of the schedule: a stream from its source to its destination, or one multicast
tree, which the routers copy. It occupies an entry at every router it touches, the source's and the
destination's included (``linkmap.line_routes``). Paths that are live at the same time are counted
together: a pipelined reduce and its multicast back are one phase; a ring allreduce's rows and columns
two phases, one after the other; SUMMA's steps are double-buffered, so two steps' multicasts are live;
Cannon's and MeshGEMM's shifts one at a time. The kernel needs the most over its routers and phases:

* a reduce tree over a line: at router x, the child → parent paths with parent ≤ x ≤ child — a chain 2
  (its input and its output), a star P − 1 at the root and PE 1 (every other PE's stream), a binary tree
  about log2 P; on a grid a first-column router holds its row's tree and its column's; an allreduce one
  more (the multicast back through every router);
* a ring: the folded ring's edges over each router (3 inside the line, every edge ≤ 2 hops);
* an all-to-all row phase over n PEs: each PE's shares leave as one eastward and one westward multicast
  (each receiver keeps its own share; the same link loads as n − 1 separate streams), so router x holds
  the eastward paths of PEs 0 … x and the westward of x … n − 1: n + 1;
* SUMMA: its row's A panel and its column's B panel, for two steps: 4;
* Cannon, MeshGEMM: a shift's ring edges over the router, in its row and in its column. Their skew, one
  path per block moved as the cycles charge it, would need about n routes at the middle of an n × n grid;
  it is reported in a note, not counted (an implementation lays the blocks out skewed as it loads them,
  as WaferLLM does, or relays them).
"""

from __future__ import annotations

import numpy as np

from .gemm import skew_routes
from .gemv import ROW_TREES
from .kinds import Algorithm, GemmAlgorithm, KernelKind, ReduceAlgorithm
from .lines import ring_order, topology
from .linkmap import line_routes, tree_messages


def tree_routes(algorithm: ReduceAlgorithm, n: int) -> np.ndarray:
    """Routes at each of n routers of a reduce tree over a line."""
    return line_routes(n, *tree_messages(topology(algorithm, n)[0])) if n > 1 else np.zeros(n, dtype=np.int64)


def ring_routes(n: int, phys: np.ndarray | None = None, step: int = -1) -> np.ndarray:
    """Routes at each router of a ring over a line, position i sending to i − ``step`` ... along ``phys``
    (the folded ring by default)."""
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    order = ring_order(n) if phys is None else phys
    return line_routes(n, order, np.roll(order, step))


def alltoall_routes(n: int) -> int:
    """One eastward multicast from PEs 0 … n − 2 and one westward from 1 … n − 1."""
    if n < 2:
        return 0
    x = np.arange(n)
    src = np.concatenate([x[:-1], x[1:]])
    dst = np.concatenate([np.full(n - 1, n - 1), np.zeros(n - 1, dtype=np.int64)])
    return int(line_routes(n, src, dst).max())


def skew_routes_needed(n: int, phys: np.ndarray) -> int:
    """The skew's paths at its busiest router: row i's paths at column c plus column c's at row i."""
    if n < 2:
        return 0
    lines = skew_routes(n, phys)
    return int((lines + lines.T).max())


def routes_needed(kind: KernelKind, algorithm: Algorithm, rows: int, cols: int) -> int:
    """The most routes any router of the schedule holds at once (see the module's docstring)."""
    if rows * cols < 2:
        return 0
    if kind == KernelKind.GEMM:
        if algorithm == GemmAlgorithm.SUMMA:
            return 2 * ((rows > 1) + (cols > 1))
        if rows != cols:
            return 0
        line = ring_routes(rows, np.arange(rows) if algorithm == GemmAlgorithm.CANNON else ring_order(rows),
                           step=1)
        return int(2 * line.max())
    if kind == KernelKind.GEMV:
        return int(tree_routes(ROW_TREES[algorithm], cols).max(initial=0)) + (cols > 1)
    if kind == KernelKind.BROADCAST:
        return 1
    if kind == KernelKind.ALLTOALL:
        return max(alltoall_routes(cols), alltoall_routes(rows))
    if algorithm == ReduceAlgorithm.RING:
        return int(max(ring_routes(cols).max(), ring_routes(rows).max()))
    row, col = tree_routes(algorithm, cols), tree_routes(algorithm, rows)
    need = int(max(row.max(), row[0] + col.max()))
    return need + (kind == KernelKind.ALLREDUCE)
