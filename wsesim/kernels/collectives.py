"""Reduce, allreduce, broadcast and all-to-all on a rows × cols grid of PEs (docs/model.md §10.2).

Every PE holds B wavelets (``wavelets``). 1D when one side is 1; on a 2D grid every row reduces to its
first column and that column to PE (0, 0), a first-column PE taking its row and column children's
streams through one ramp (PE by PE up to ``EXACT_PES``, else one row and then the first column). Allreduce = reduce, then a broadcast of the root's stream
(pipelined: the root's wavelet j leaves once done), except ``ring`` (reduce-scatter + all-gather on a
folded ring; rows, then columns). Broadcast is one multicast route from PE (0, 0): the routers copy each
wavelet along row 0 and down every column, so the farthest PE, (R − 1) + (C − 1) hops away, holds
wavelet j at j + 1 + 2·T_R + d·t_h + T_OP. All-to-all is the row transpose: every PE sends a ⌈B/C⌉
share to every other PE of its row (then, on a 2D grid, of its column), timed as the busiest of its
ramps and links plus the longest path (the flow fidelity's rule; link loads from wsesim.fabric.flow).
"""

from __future__ import annotations

import numpy as np

from ..config.errors import ConfigError
from ..config.specs import HardwareSpec
from ..fabric.flow import link_loads
from ..fabric.mesh import EAST, LINKS_PER_NODE, NORTH, SOUTH, WEST, Mesh
from .lines import TOPOLOGIES, arrivals, grid_topology, reduce_line, ring_allreduce, ring_order, topology
from .machine import T_OP, Machine
from .result import KernelResult, LinkSummary

REDUCE_ALGORITHMS = tuple(TOPOLOGIES)
ALLREDUCE_ALGORITHMS = (*TOPOLOGIES, "ring")
MESH_LINKS = (EAST, WEST, SOUTH, NORTH)


def _links(hw: HardwareSpec, rows: int, cols: int, src: np.ndarray, dst: np.ndarray,
           wavelets: np.ndarray) -> LinkSummary:
    """Wavelets summed over the mesh links of these (src → dst) streams, node ids of a rows × cols
    PE mesh, routed row first: the existing flow fidelity's link loads."""
    if len(src) == 0:
        return LinkSummary()
    mesh = Mesh.from_hardware(hw, "pe", (rows, cols))
    load = link_loads(mesh, src, dst, wavelets.astype(np.float64)).reshape(-1, LINKS_PER_NODE)[:, MESH_LINKS]
    return LinkSummary(float(load.max()), int(np.count_nonzero(load > 0.5)), float(load.sum()))


def _tree_streams(parent: np.ndarray, rows: int, cols: int, b: int) -> tuple[np.ndarray, ...]:
    """(src, dst, wavelets) of a 2D reduce: every row's tree to column 0, then column 0's tree."""
    pc, pr = parent
    r, c = np.divmod(np.arange(rows * cols), cols)
    row_msgs = c > 0
    src = np.flatnonzero(row_msgs)
    dst = r[row_msgs] * cols + pc[c[row_msgs]]
    col = np.arange(1, rows)
    src = np.concatenate([src, col * cols]) if rows > 1 else src
    dst = np.concatenate([dst, pr[col] * cols]) if rows > 1 else dst
    return src, dst, np.full(len(src), b)


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


def reduce_2d(m: Machine, rows: int, cols: int, wavelets: int, algorithm: str,
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


def _result(kind: str, algorithm: str, m: Machine, rows: int, cols: int, wavelets: int, cycles: float,
            steps: int, hops: int, links: LinkSummary, copies: int, notes: tuple[str, ...] = ()) -> KernelResult:
    """A collective's result: compute = T_OP per dependent step, communication = the stream (B) and
    2·T_R + d·t_h per step along the slowest path, waiting = the rest (queues at busy ramps)."""
    need, reason = _sram(m, wavelets, copies)
    compute = float(steps * T_OP)
    comm = float(min(cycles - compute, (wavelets if cycles else 0) + steps * 2 * m.ramp + hops * m.hop))
    return KernelResult(kind, algorithm, rows, cols, (1, wavelets * m.per_wavelet, 1), m.dtype, cycles, compute,
                        max(0.0, comm), 0.0, need, links, m, not reason, reason, notes)


def run_reduce(hw: HardwareSpec, m: Machine, rows: int, cols: int, wavelets: int, algorithm: str) -> KernelResult:
    _check(m, rows, cols, wavelets)
    cycles, _, (row_topo, col_topo, depth) = reduce_2d(m, rows, cols, wavelets, algorithm)
    src, dst, w = _tree_streams((row_topo[0], col_topo[0]), rows, cols, wavelets)
    return _result("reduce", algorithm, m, rows, cols, wavelets, cycles, int(depth[0]), int(depth[1]),
                   _links(hw, rows, cols, src, dst, w), 2)


def run_broadcast(hw: HardwareSpec, m: Machine, rows: int, cols: int, wavelets: int,
                  algorithm: str = "multicast") -> KernelResult:
    _check(m, rows, cols, wavelets)
    if algorithm != "multicast":
        raise ConfigError(f"expected one of multicast, got \"{algorithm}\"", path="algorithm")
    d = rows + cols - 2
    cycles = float(m.transfer(wavelets, d)) if rows * cols > 1 else 0.0
    # one route: row 0 east from the root, and every column south from row 0 (the routers copy)
    links = LinkSummary(float(wavelets), d and (cols - 1) + cols * (rows - 1),
                        float(wavelets * ((cols - 1) + cols * (rows - 1))))
    return _result("broadcast", algorithm, m, rows, cols, wavelets, cycles, 1 if d else 0, d, links, 1)


def run_allreduce(hw: HardwareSpec, m: Machine, rows: int, cols: int, wavelets: int, algorithm: str) -> KernelResult:
    _check(m, rows, cols, wavelets)
    if algorithm == "ring":
        row_cycles, row_stages, row_d = ring_allreduce(m, cols, wavelets)
        col_cycles, col_stages, col_d = ring_allreduce(m, rows, wavelets)
        stages = row_stages + col_stages
        hops = row_stages * row_d + col_stages * col_d
        src, dst, w = _ring_streams(rows, cols, wavelets)
        return _result("allreduce", algorithm, m, rows, cols, wavelets, row_cycles + col_cycles, stages, hops,
                       _links(hw, rows, cols, src, dst, w), 3)
    if algorithm not in TOPOLOGIES:
        raise ConfigError(f"expected one of {', '.join(ALLREDUCE_ALGORITHMS)}, got \"{algorithm}\"", path="algorithm")
    cycles, root, (row_topo, col_topo, depth) = reduce_2d(m, rows, cols, wavelets, algorithm)
    d = rows + cols - 2
    if d:
        cycles = float(root[-1] + m.step(d))  # the root's last wavelet, multicast to the farthest PE
    src, dst, w = _tree_streams((row_topo[0], col_topo[0]), rows, cols, wavelets)
    reduce_links = _links(hw, rows, cols, src, dst, w)
    bcast = (cols - 1) + cols * (rows - 1)
    links = LinkSummary(reduce_links.max_wavelets + wavelets, max(reduce_links.links_used, bcast),
                        reduce_links.wavelet_hops + wavelets * bcast)
    return _result("allreduce", algorithm, m, rows, cols, wavelets, cycles, int(depth[0]) + (1 if d else 0),
                   int(depth[1]) + d, links, 2)


def _ring_streams(rows: int, cols: int, b: int) -> tuple[np.ndarray, ...]:
    """Every ring edge of every row and column, each carrying 2(P − 1) chunks of ⌈B / P⌉."""
    src, dst, w = [], [], []
    for n, line, step in ((cols, lambda k, i: k * cols + i, rows), (rows, lambda k, i: i * cols + k, cols)):
        if n < 2:
            continue
        order = ring_order(n)
        nxt = np.roll(order, -1)
        for k in range(step):
            src.append(line(k, order))
            dst.append(line(k, nxt))
            w.append(np.full(n, 2 * (n - 1) * -(-b // n)))
    if not src:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    return np.concatenate(src), np.concatenate(dst), np.concatenate(w)


def row_alltoall_cycles(m: Machine, n: int, wavelets: int) -> tuple[float, float, int]:
    """(cycles, busiest ramp or link in wavelets, hops) of an all-to-all over a line of n PEs, each
    sending ⌈B / n⌉ wavelets to each other: the eastward link after PE x carries (x + 1)(n − 1 − x)
    shares, each ramp n − 1. cycles = busiest + step(n − 1): the busiest resource streams its load one
    wavelet a cycle, and the last share still has the longest path to go."""
    if n < 2:
        return 0.0, 0.0, 0
    share = -(-wavelets // n)
    x = np.arange(n - 1)
    busiest = float(max(((x + 1) * (n - 1 - x)).max(), n - 1) * share)
    return busiest + m.step(n - 1), busiest, n - 1


def run_alltoall(hw: HardwareSpec, m: Machine, rows: int, cols: int, wavelets: int,
                 algorithm: str = "transpose") -> KernelResult:
    _check(m, rows, cols, wavelets)
    if algorithm != "transpose":
        raise ConfigError(f"expected one of transpose, got \"{algorithm}\"", path="algorithm")
    row, row_busy, row_d = row_alltoall_cycles(m, cols, wavelets)
    col, col_busy, col_d = row_alltoall_cycles(m, rows, wavelets)
    steps = (1 if cols > 1 else 0) + (1 if rows > 1 else 0)
    x = np.arange(max(rows, cols))
    e_row = rows * 2 * float(((x[: cols - 1] + 1) * (cols - 1 - x[: cols - 1])).sum()) * -(-wavelets // cols)
    e_col = cols * 2 * float(((x[: rows - 1] + 1) * (rows - 1 - x[: rows - 1])).sum()) * -(-wavelets // rows)
    used = rows * 2 * (cols - 1) + cols * 2 * (rows - 1)
    links = LinkSummary(max(row_busy, col_busy), used, e_row + e_col)
    return _result("alltoall", algorithm, m, rows, cols, wavelets, row + col, steps, row_d + col_d, links, 2,
                   ("time: the busiest ramp or link plus the longest path, per phase (flow rule)",))
