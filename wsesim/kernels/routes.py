"""Colours a kernel's schedule needs at its busiest router, checked against ``fabric.colours``
(docs/model.md §10.6, where the rule and each schedule's count are derived with their sources).

A router holds one route per colour, however many PEs' wavelets merge into it, so what counts is the
distinct colours whose routes touch a router at once, every route of the program counted together (none
is assumed reconfigured between phases). Along a line (``line_colours``, from the streams alone, so a new
``lines.TOPOLOGIES`` entry needs no rule of its own): the streams into one PE share a colour, a *group*
spanning from its lowest PE to its highest; groups whose spans share a router need different colours;
the spans are intervals, so the busiest router's count of covering spans is the answer. The all-to-all
follows the fabric's rule (``wsesim.fabric.colours``): one colour per direction of travel. Cannon's and
MeshGEMM's skew as direct paths is reported in a note (``skew_colours_needed``), not counted.
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
"""Colours by kind: (algorithm, rows, cols) -> the busiest router's (docs/model.md §10.6's table)."""


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
