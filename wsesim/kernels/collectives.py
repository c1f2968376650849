"""Reduce, allreduce, broadcast and all-to-all on a rows × cols grid of PEs (docs/model.md §10.2).

Every PE holds B wavelets (``wavelets``). 1D when one side is 1; on a 2D grid every row reduces to its
first column and that column to PE (0, 0), a first-column PE taking its row and column children's streams
through one ramp (PE by PE up to ``EXACT_PES``, else one row and then the first column). Allreduce =
reduce, then a broadcast of the root's stream (pipelined: the root's wavelet j leaves once done), except
``ring`` (reduce-scatter + all-gather on a folded ring; rows, then columns). Broadcast is one multicast
route from PE (0, 0): the routers copy each wavelet along row 0 and down every column, so the farthest
PE, (R − 1) + (C − 1) hops away, holds wavelet j at j + 1 + 2·T_R + d·t_h + T_OP. All-to-all is the row
transpose: every PE sends a ⌈B/C⌉ share to every other PE of its row (then, on a 2D grid, of its column),
timed as the busiest of its ramps and links plus the longest path (the flow fidelity's rule). Every
kernel's link map: ``linkmap``.
"""

from __future__ import annotations

import numpy as np

from ..config.errors import ConfigError
from ..fabric.mesh import NORTH, WEST
from .kinds import Algorithm, AlltoallAlgorithm, BroadcastAlgorithm, KernelKind, ReduceAlgorithm, algorithms
from .lines import (
    TOPOLOGIES,
    Topology,
    arrivals,
    grid_topology,
    ktree,
    ktree_allreduce,
    phases,
    reduce_line,
    ring_allreduce,
    ring_order,
    topology,
)
from .linkmap import (
    LinkMap,
    Term,
    allreduce_line_loads,
    col_terms,
    line_loads,
    multicast_terms,
    ones,
    row_terms,
    tree_messages,
    unit,
)
from .machine import T_OP, Machine
from .result import KernelResult


def tree_terms(row_topo: Topology, col_topo: Topology, rows: int, cols: int, b: float) -> list[Term]:
    """A 2D reduce's links: every row's tree to column 0 (west), then column 0's tree (north); parents
    are nearer the root than their children, so nothing goes east or south."""
    _, west = line_loads(cols, *tree_messages(row_topo[0]), b)
    _, north = line_loads(rows, *tree_messages(col_topo[0]), b)
    return [(WEST, ones(rows), west), (NORTH, north, unit(cols))]


def _check(m: Machine, rows: int, cols: int, wavelets: int) -> None:
    m.check_grid(rows, cols)
    if wavelets < 1:
        raise ConfigError(f"expected a positive number of wavelets, got {wavelets}", path="wavelets")


def _sram(m: Machine, wavelets: int, copies: int) -> tuple[float, str]:
    need = copies * wavelets * m.wavelet_bytes
    if need <= m.sram_bytes:
        return need, ""
    return need, (f"{copies} x {wavelets:,} wavelets need {need:,.0f} B per PE, more than the "
                  f"{m.sram_bytes:,.0f} B usable ({m.name}: pe.sram less pe.reserved_sram)")


EXACT_PES = 4096
"""Up to this many PEs a 2D reduce is simulated PE by PE as one tree; above, by classes: one row, then
the first column, each of its PEs taking the row children's streams (the same in every row) and its
column children's through one ramp. tests/kernels checks that the two give the same cycles."""


def reduce_2d(m: Machine, rows: int, cols: int, wavelets: int, algorithm: ReduceAlgorithm,
              exact: bool | None = None) -> tuple[float, np.ndarray, tuple]:
    """(cycles, root's ready times, (row tree, column tree, (steps, hops) of the slowest path)) of a
    reduce to PE (0, 0); ``exact`` chooses PE by PE (default: up to ``EXACT_PES`` PEs)."""
    row_topo, col_topo = topology(algorithm, cols), topology(algorithm, rows)
    if rows > 1 and cols > 1 and (rows * cols <= EXACT_PES if exact is None else exact):
        ready, depth = reduce_line(m, grid_topology(row_topo, col_topo, rows, cols), wavelets)
        return float(ready[0][-1]), ready[0], (row_topo, col_topo, depth)
    ready, depth = reduce_line(m, row_topo, wavelets)
    root = ready[0]
    if rows > 1:
        ready, col_depth = reduce_line(m, col_topo, wavelets, own=root, extra=arrivals(m, row_topo, ready))
        root = ready[0]
        depth = depth + col_depth
    return float(root[-1]), root, (row_topo, col_topo, depth)


def _result(kind: KernelKind, algorithm: Algorithm, m: Machine, rows: int, cols: int, wavelets: int,
            cycles: float, steps: int, hops: int, links: LinkMap, copies: int,
            notes: tuple[str, ...] = (), instructions: int = 1, turns: int = 0) -> KernelResult:
    """A collective's result: ``instructions`` DSD operations issued one after another at a PE
    (``pe.instruction_issue`` each, before the wavelets they move: the overhead) and ``turns`` from one axis
    to the other (``Machine.turn`` each), compute = T_OP per dependent step, communication = the stream (B)
    and 2·T_R + d·t_h per step along the slowest path, waiting = the rest (queues at busy ramps)."""
    need, reason = _sram(m, wavelets, copies)
    overhead = float(instructions * m.issue + turns * m.turn) if cycles else 0.0
    compute = float(steps * T_OP)
    comm = float(min(cycles - compute, (wavelets if cycles else 0) + m.path(steps, hops)))
    return KernelResult(kind, algorithm, rows, cols, (1, wavelets * m.per_wavelet, 1), m.dtype,
                        cycles + overhead, compute, max(0.0, comm), 0.0, need, links, m, not reason, reason,
                        notes, overhead=overhead, dsd_ops=float(instructions) if cycles else 0.0)


def run_reduce(m: Machine, rows: int, cols: int, wavelets: int,
               algorithm: ReduceAlgorithm) -> KernelResult:
    _check(m, rows, cols, wavelets)
    cycles, _, (row_topo, col_topo, depth) = reduce_2d(m, rows, cols, wavelets, algorithm)
    links = LinkMap(rows, cols, lambda: tree_terms(row_topo, col_topo, rows, cols, wavelets))
    return _result(KernelKind.REDUCE, algorithm, m, rows, cols, wavelets, cycles, int(depth[0]),
                   int(depth[1]), links, 2)


def run_broadcast(m: Machine, rows: int, cols: int, wavelets: int,
                  algorithm: BroadcastAlgorithm = BroadcastAlgorithm.MULTICAST) -> KernelResult:
    _check(m, rows, cols, wavelets)
    if algorithm != BroadcastAlgorithm.MULTICAST:
        raise ConfigError(f"expected one of multicast, got \"{algorithm}\"", path="algorithm")
    d = rows + cols - 2
    cycles = float(m.transfer(wavelets, d)) if rows * cols > 1 else 0.0
    # one route: row 0 east from the root, and every column south from row 0 (the routers copy)
    links = LinkMap(rows, cols, lambda: multicast_terms(rows, cols, wavelets))
    return _result(KernelKind.BROADCAST, algorithm, m, rows, cols, wavelets, cycles, 1 if d else 0, d, links,
                   1)


def run_allreduce(m: Machine, rows: int, cols: int, wavelets: int,
                  algorithm: ReduceAlgorithm) -> KernelResult:
    _check(m, rows, cols, wavelets)
    if algorithm == ReduceAlgorithm.RING:
        row_cycles, row_stages, row_d = ring_allreduce(m, cols, wavelets)
        col_cycles, col_stages, col_d = ring_allreduce(m, rows, wavelets)
        stages = row_stages + col_stages
        hops = row_stages * row_d + col_stages * col_d
        links = LinkMap(rows, cols, lambda: ring_terms(rows, cols, wavelets))
        return _result(KernelKind.ALLREDUCE, algorithm, m, rows, cols, wavelets, row_cycles + col_cycles,
                       stages, hops, links, 3, instructions=stages)
    if algorithm == ReduceAlgorithm.KTREE:  # every row's K-tree allreduce, then every column's
        (rc, rs, rh), (cc, cs, ch) = ktree_allreduce(m, cols, wavelets), ktree_allreduce(m, rows, wavelets)
        row_topo, col_topo = ktree(cols), ktree(rows)
        links = LinkMap(rows, cols, lambda: ktree_terms(row_topo, col_topo, rows, cols, wavelets))
        turns = int(rows > 1 and cols > 1)  # from the rows' routes to the columns'
        note = "rows, then columns: 3 phases each (WaferLLM's two_tree_allreduce)" + (
            f"; the turn between them re-routes {m.reroutes} colours" if turns and m.reroutes else "")
        return _result(KernelKind.ALLREDUCE, algorithm, m, rows, cols, wavelets, rc + cc, rs + cs, rh + ch,
                       links, 2, (note,), instructions=phases(algorithm) * ((rows > 1) + (cols > 1)),
                       turns=turns)
    if algorithm not in TOPOLOGIES:
        raise ConfigError(f"expected one of {', '.join(algorithms(KernelKind.ALLREDUCE))}, "
                          f"got \"{algorithm}\"", path="algorithm")
    cycles, root, (row_topo, col_topo, depth) = reduce_2d(m, rows, cols, wavelets, algorithm)
    d = rows + cols - 2
    if d:
        # the multicast is its own instruction, issued once the reduce has ended at the root
        cycles = float(root[-1] + m.transfer(wavelets, d))
    links = LinkMap(rows, cols, lambda: [*tree_terms(row_topo, col_topo, rows, cols, wavelets),
                                         *multicast_terms(rows, cols, wavelets)])
    return _result(KernelKind.ALLREDUCE, algorithm, m, rows, cols, wavelets, cycles,
                   int(depth[0]) + (1 if d else 0), int(depth[1]) + d, links, 2,
                   instructions=phases(algorithm))


def ktree_terms(row_topo: Topology, col_topo: Topology, rows: int, cols: int, b: float) -> list[Term]:
    """The K-tree allreduce's links: every row's tree (both ways, toward its centre) and the multicast
    from the centre to both ends, then every column's."""
    return [*row_terms(ones(rows), *allreduce_line_loads(cols, row_topo[0], b)),
            *col_terms(*allreduce_line_loads(rows, col_topo[0], b), ones(cols))]


def ring_line_loads(n: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) loads of a ring allreduce over a line of n PEs: every edge of the folded
    ring carries 2(n − 1) chunks of ⌈B / n⌉."""
    if n < 2:
        return np.zeros(n), np.zeros(n)
    order = ring_order(n)
    return line_loads(n, order, np.roll(order, -1), 2 * (n - 1) * -(-b // n))


def ring_terms(rows: int, cols: int, b: int) -> list[Term]:
    """The ring allreduce's links: every row's ring (east, west), then every column's (south, north)."""
    return [*row_terms(ones(rows), *ring_line_loads(cols, b)),
            *col_terms(*ring_line_loads(rows, b), ones(cols))]


def alltoall_line_loads(n: int, share: int) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) loads of an all-to-all over a line of n PEs, ``share`` wavelets from every PE
    to every other: the link x → x + 1 carries the (x + 1)(n − 1 − x) shares from PEs 0 … x to PEs
    x + 1 … n − 1, the link x → x − 1 the x(n − x) from x … n − 1 to 0 … x − 1."""
    x = np.arange(n, dtype=np.float64)
    return (x + 1) * (n - 1 - x) * share, x * (n - x) * share


def row_alltoall_cycles(m: Machine, n: int, wavelets: int) -> tuple[float, float, int]:
    """(cycles, busiest ramp or link in wavelets, hops) of an all-to-all over a line of n PEs, each
    sending ⌈B / n⌉ wavelets to each other: the eastward link after PE x carries (x + 1)(n − 1 − x)
    shares, each ramp n − 1. cycles = busiest + step(n − 1): the busiest resource streams its load one
    wavelet a cycle, and the last share still has the longest path to go."""
    if n < 2:
        return 0.0, 0.0, 0
    share = -(-wavelets // n)
    busiest = float(max(alltoall_line_loads(n, share)[0].max(), (n - 1) * share))
    return busiest + m.step(n - 1), busiest, n - 1


def run_alltoall(m: Machine, rows: int, cols: int, wavelets: int,
                 algorithm: AlltoallAlgorithm = AlltoallAlgorithm.TRANSPOSE) -> KernelResult:
    _check(m, rows, cols, wavelets)
    if algorithm != AlltoallAlgorithm.TRANSPOSE:
        raise ConfigError(f"expected one of transpose, got \"{algorithm}\"", path="algorithm")
    row, _, row_d = row_alltoall_cycles(m, cols, wavelets)
    col, _, col_d = row_alltoall_cycles(m, rows, wavelets)
    steps = (1 if cols > 1 else 0) + (1 if rows > 1 else 0)
    links = LinkMap(rows, cols, lambda: [
        *row_terms(ones(rows), *alltoall_line_loads(cols, -(-wavelets // cols))),
        *col_terms(*alltoall_line_loads(rows, -(-wavelets // rows)), ones(cols))])
    return _result(KernelKind.ALLTOALL, algorithm, m, rows, cols, wavelets, row + col, steps, row_d + col_d,
                   links, 2, ("time: the busiest ramp or link plus the longest path, per phase (flow rule)",),
                   instructions=steps)
