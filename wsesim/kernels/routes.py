"""Colours a kernel's schedule needs at its busiest router, checked against ``fabric.colours`` (24
routable colours per PE on WSE-2, the Cerebras SDK's figure; docs/model.md §10.6).

A colour is a virtual channel on the physical links; the 5-bit route code WaferLLM (OSDI '25, §3)
mentions, "at most 2^5 routing paths per core", is this colour-ID space, of which 24 are routable. A
router holds one route per colour: the inputs it accepts (the ramp, mesh directions) and the outputs it
forwards to, however many PEs' wavelets merge into it. A router's entries are therefore the distinct
colours whose routes touch it at once, not the streams through it: Luczynski et al. (HPDC '24, the
spcl/spatial-collectives ``star`` module) run a star reduce over 512 PEs on one colour, every router
sending its own ramp west and then switched to pass what comes from the east.

The rule, for streams ``src → dst`` along a line (``line_colours``), from the parent structure alone:

* the streams into one PE share a colour (merged by switches, as the star's): a *group*, whose span is
  the interval from its lowest to its highest PE, receiver and senders included;
* two groups whose spans share a router need different colours: one route cannot both deliver a stream
  to the ramp and pass another on, nor take a PE's output on the colour its input arrives on;
* spans on a line are intervals, and an interval graph needs as many colours as the most intervals over
  one point: router x holds the groups whose spans cover it, and the busiest router's count is what the
  schedule needs. So a chain over P PEs needs 2 (a PE's input and output alternate), a star 1, the
  binary tree about ½·log2 P + 1 (its spans nest: 5 over 512 PEs, 6 over 994), two-phase 3 from 10 PEs
  up (a group's chain inside the span of the group roots' chain), and a new ``lines.TOPOLOGIES`` entry
  whatever its parent array gives.

Each schedule, every route it sets up counted at once (the routes are configured as the program loads;
a colour is not assumed to be reconfigured between phases):

* a reduce tree on a grid: every row's tree to its root column, then that column's tree; a root-column
  router holds its row's groups at the root and the column's groups at its row; an allreduce adds one
  colour for the multicast back (one route through every router, copied east and south);
* the ring allreduce: the folded ring's edges as streams (each PE receives from one): 3 a line inside
  it, the rows' and the columns' rings both: 6;
* broadcast: the one multicast, 1;
* all-to-all (transpose): by the fabric's rule (``wsesim.fabric.colours``), one colour per direction of
  travel. A row's eastward shares share one colour: each router first passes and delivers what comes
  from the west (its PE keeps its own share), then is switched to send its own eastward, as the star's
  routers switch; westward the mirror. So 2 a line, 4 on a grid, whatever its size: the rule
  ``wsesim fabric`` and the training step's dispatch (``DispatchModel.colours``) apply too. (The cycles
  charged are the links' loads, ``collectives.row_alltoall_cycles``, not the switches' order.)
* GEMV (pipeline, MeshGEMV): the row's reduce tree and the multicast back, + 1;
* SUMMA: a panel multicast spans its whole line (one colour per step), double-buffered so two steps'
  are live, in the row and in the column: 4 (2 on one line);
* Cannon, MeshGEMM: the row's and the column's shifts at once, each edge a group: Cannon's j → j − 1
  and the wrap over the whole line 3 a line, MeshGEMM's folded ring 3: 6. Their skew as direct paths
  (each block its own receiver, so its own colour) would need about n at the middle of an n × n grid;
  it is reported in a note, not counted (an implementation lays the blocks out skewed as it loads them,
  as WaferLLM does, or relays them).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..fabric.colours import direction_colours, line_directions
from .gemm import skew_routes
from .gemv import ROW_TREES
from .kinds import Algorithm, GemmAlgorithm, KernelKind, ReduceAlgorithm
from .lines import ring_order, topology
from .linkmap import line_routes, tree_messages

Streams = Callable[[int], tuple[np.ndarray, np.ndarray]]
"""(src, dst) of a schedule's streams along a line of n PEs."""


def line_colours(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Colours at each of n routers: the groups (streams into one PE) whose span min … max of the
    receiver and its senders covers the router (``line_routes`` over the groups' spans)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    lo, hi = np.full(n, n, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    np.minimum.at(lo, dst, np.minimum(src, dst))
    np.maximum.at(hi, dst, np.maximum(src, dst))
    group = np.flatnonzero(hi >= 0)
    return line_routes(n, lo[group], hi[group])


def tree_streams(algorithm: ReduceAlgorithm) -> Streams:
    """Every PE but the root to its parent, for any reduce topology (``lines.topology``)."""
    return lambda n: tree_messages(topology(algorithm, n)[0])


def ring_streams(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The folded ring (``lines.ring_order``): each position to the next."""
    order = ring_order(n)
    return order, np.roll(order, -1)


def cannon_streams(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Cannon's shift: j → j − 1, and 0 → n − 1 across the whole line."""
    j = np.arange(n)
    return j, (j - 1) % n


def colours_at(streams: Streams, n: int) -> np.ndarray:
    """Colours at each of n routers of ``streams`` (none on a line of one PE)."""
    return line_colours(n, *streams(n)) if n > 1 else np.zeros(n, dtype=np.int64)


def tree_root(algorithm: ReduceAlgorithm, n: int) -> int:
    """The PE a reduce tree over n PEs ends at (its parent −1)."""
    return int(np.flatnonzero(topology(algorithm, n)[0] < 0)[0])


def grid_tree_colours(algorithm: ReduceAlgorithm, rows: int, cols: int) -> int:
    """A reduce tree on a grid: rows' trees to the root column, then its tree: max(row's busiest,
    row[root] + column's busiest)."""
    row, col = colours_at(tree_streams(algorithm), cols), colours_at(tree_streams(algorithm), rows)
    return int(max(row.max(), row[tree_root(algorithm, cols)] + col.max()))


def both_lines(streams: Streams, rows: int, cols: int) -> int:
    """Row and column phases' routes at once: router (r, c) holds row[c] + col[r]."""
    return int(colours_at(streams, cols).max() + colours_at(streams, rows).max())


def alltoall_colours(rows: int, cols: int) -> int:
    """The fabric's direction rule over the row phase (east, west) and the column phase (south, north)."""
    return sum(int(direction_colours(*line_directions(n)).max()) for n in (rows, cols) if n > 1)


def reduce_colours(algorithm: ReduceAlgorithm, rows: int, cols: int) -> int:
    if algorithm == ReduceAlgorithm.RING:
        return both_lines(ring_streams, rows, cols)
    return grid_tree_colours(algorithm, rows, cols)


def allreduce_colours(algorithm: ReduceAlgorithm, rows: int, cols: int) -> int:
    """The reduce and, for a tree, its multicast back (+ 1); the ring leaves the sum everywhere."""
    return reduce_colours(algorithm, rows, cols) + (algorithm != ReduceAlgorithm.RING)


def gemm_colours(algorithm: GemmAlgorithm, rows: int, cols: int) -> int:
    if algorithm == GemmAlgorithm.SUMMA:
        return 2 * ((rows > 1) + (cols > 1))
    if algorithm in (GemmAlgorithm.STREAM, GemmAlgorithm.STREAM_DW):  # one multicast line, one ring
        broadcast, ring = (rows, cols) if algorithm == GemmAlgorithm.STREAM else (cols, rows)
        return int(broadcast > 1) + int(colours_at(ring_streams, ring).max(initial=0))
    if rows != cols:
        return 0  # infeasible already: a square grid only
    return both_lines(cannon_streams if algorithm == GemmAlgorithm.CANNON else ring_streams, rows, cols)


def gemv_colours(algorithm: Algorithm, rows: int, cols: int) -> int:
    return int(colours_at(tree_streams(ROW_TREES[algorithm]), cols).max(initial=0)) + (cols > 1)


COLOURS: dict[KernelKind, Callable[..., int]] = {
    KernelKind.GEMM: gemm_colours, KernelKind.GEMV: gemv_colours, KernelKind.REDUCE: reduce_colours,
    KernelKind.ALLREDUCE: allreduce_colours, KernelKind.BROADCAST: lambda algorithm, rows, cols: 1,
    KernelKind.ALLTOALL: lambda algorithm, rows, cols: alltoall_colours(rows, cols)}
"""Colours by kind: (algorithm, rows, cols) -> the busiest router's (see the module's docstring)."""


def colours_needed(kind: KernelKind, algorithm: Algorithm, rows: int, cols: int) -> int:
    """The most colours any router of the schedule holds at once (0 on one PE)."""
    return COLOURS[kind](algorithm, rows, cols) if rows * cols > 1 else 0


def skew_colours_needed(n: int, phys: np.ndarray) -> int:
    """The skew's paths as direct streams, each its own colour, at its busiest router: row i's at column
    c plus column c's at row i."""
    if n < 2:
        return 0
    lines = skew_routes(n, phys)
    return int((lines + lines.T).max())
