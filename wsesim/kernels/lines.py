"""Reduce trees over a line of PEs, and the per-wavelet dataflow that times them (docs/model.md §10.2).

A line is P PEs, 0 … P − 1, with the root at 0 (the west end of a row, or the north end of a column).
A topology gives every PE its parent and the hops to it; a PE sends its partial sum of wavelet j to its
parent once it has added wavelet j of every child (pipelined, as Luczynski et al.'s reduces run).

Timing (``Machine``): a leaf's wavelet j is on its ramp at j + 1; it reaches the parent
``2·T_R + d·t_h`` later; the parent consumes arriving wavelets one per cycle in arrival order (ties: the
child nearer the root first), each done T_OP after it arrives or after the one before, whichever is
later; its own wavelet j leaves when the last child's wavelet j is done. Links are taken as free (each
directed link of these trees carries one child's stream at a time, except where a parent's ramp is
already the bottleneck: the star, whose root ramp takes every stream); the link loads are reported beside.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..config.errors import ConfigError
from .kinds import ReduceAlgorithm
from .machine import T_OP, Machine

Topology = tuple[np.ndarray, np.ndarray]  # parent (−1 at the root) and hops to the parent, per PE


def chain(p: int) -> Topology:
    """PE i sends to i − 1: P − 1 dependent steps of one hop."""
    parent = np.arange(p) - 1
    return parent, np.where(parent >= 0, 1, 0)


def star(p: int) -> Topology:
    """Every PE sends straight to the root: one step, i hops, and the root's ramp takes every stream."""
    parent = np.where(np.arange(p) > 0, 0, -1)
    return parent, np.arange(p)


def binary_tree(p: int) -> Topology:
    """Recursive halving: PE i sends to i − lowbit(i), lowbit(i) hops: ⌈log2 P⌉ levels."""
    i = np.arange(p)
    low = i & -i
    return np.where(i > 0, i - low, -1), low


def group_size(p: int) -> int:
    """Two-phase groups: ⌈√P⌉ PEs (420 → 21, as WaferLLM's MeshGEMV configuration; 512 → 23)."""
    return max(1, math.isqrt(p - 1) + 1) if p > 1 else 1


def two_phase(p: int, group: int | None = None) -> Topology:
    """Chains inside groups of ``group`` PEs (⌈√P⌉ by default) to each group's first PE, then a chain
    over the group roots, ``group`` hops apart."""
    g = group or group_size(p)
    i = np.arange(p)
    head = i % g == 0
    parent = np.where(head, i - g, i - 1)
    parent[0] = -1
    return parent, np.where(i == 0, 0, np.where(head, g, 1))


TOPOLOGIES: dict[ReduceAlgorithm, Callable[[int], Topology]] = {
    ReduceAlgorithm.CHAIN: chain, ReduceAlgorithm.STAR: star, ReduceAlgorithm.TREE: binary_tree,
    ReduceAlgorithm.TWO_PHASE: two_phase}
"""Reduce trees by algorithm name (the ring is not a tree: ``ring_allreduce``)."""


def topology(name: str, p: int) -> Topology:
    if name not in TOPOLOGIES:
        raise ConfigError(f"expected one of {', '.join(TOPOLOGIES)}, got \"{name}\"", path="algorithm")
    return TOPOLOGIES[name](p)


def grid_topology(row: Topology, col: Topology, rows: int, cols: int) -> Topology:
    """A 2D reduce as one tree over the rows × cols PEs (id r·cols + c): every row's tree to column 0,
    then column 0's tree to PE (0, 0). Every parent has a smaller id than its children."""
    r, c = np.divmod(np.arange(rows * cols), cols)
    parent = np.where(c > 0, r * cols + row[0][c], col[0][r] * cols)
    hops = np.where(c > 0, row[1][c], col[1][r])
    parent[0] = -1
    return parent, hops


def fifo(arrivals: np.ndarray, start: float = -np.inf) -> np.ndarray:
    """Done times of wavelets served one per T_OP in the order given (already sorted), the first not
    before ``start``: done_i = max(a_i, done_{i−1}) + T_OP."""
    idx = np.arange(len(arrivals)) * T_OP
    base = np.maximum.accumulate(np.maximum(arrivals - idx, start))
    return base + idx + T_OP


def reduce_line(m: Machine, topo: Topology, wavelets: int, own: np.ndarray | None = None,
                extra: list[np.ndarray] | None = None) -> tuple[list[np.ndarray], np.ndarray]:
    """Per-wavelet ready times (the cycle each PE's wavelet j of its partial sum is on its ramp), and
    (steps, hops) of the slowest leaf-to-root path. A 2D reduce's column phase passes ``extra``, the
    arrival times of the row children's streams at a first-column PE (the same at every one, because
    every row does the same): every PE of the column takes them through its ramp with its column
    children's; ``own`` is then a leaf's ready times (its row's result)."""
    parent, hops = topo
    p = len(parent)
    if own is None:
        own = np.arange(wavelets, dtype=np.float64) + 1
    children: list[list[int]] = [[] for _ in range(p)]
    for i in range(1, p):
        children[int(parent[i])].append(i)
    ready: list[np.ndarray] = [own] * p
    order = _postorder(parent, children)
    lag = 2 * m.ramp
    for i in order:
        streams = [*(extra or ()), *(ready[c] + lag + int(hops[c]) * m.hop for c in sorted(children[i]))]
        arr = np.concatenate(streams)
        key = np.argsort(arr, kind="stable")
        done = np.empty_like(arr)
        done[key] = fifo(arr[key])
        ready[i] = np.maximum(done.reshape(len(streams), wavelets).max(axis=0), own)
    return ready, _depths(parent, hops, children, m)


def arrivals(m: Machine, topo: Topology, ready: list[np.ndarray], node: int = 0) -> list[np.ndarray]:
    """When the streams of ``node``'s children reach it (the order ``reduce_line`` merges them in)."""
    parent, hops = topo
    kids = np.flatnonzero(parent == node)
    return [ready[int(c)] + 2 * m.ramp + int(hops[c]) * m.hop for c in kids]


def _postorder(parent: np.ndarray, children: list[list[int]]) -> list[int]:
    """Every PE with children, after all of its descendants (deepest first)."""
    depth = np.zeros(len(parent), dtype=np.int64)
    for i in range(1, len(parent)):  # parents precede children in every topology here (parent < i)
        depth[i] = depth[parent[i]] + 1
    return [int(i) for i in np.argsort(-depth, kind="stable") if children[int(i)]]


def _depths(parent: np.ndarray, hops: np.ndarray, children: list[list[int]], m: Machine) -> np.ndarray:
    """(steps, hops) of the slowest leaf-to-root path by latency: Σ (2·T_R + d·t_h + T_OP)."""
    p = len(parent)
    cost = np.zeros(p, dtype=np.int64)
    steps = np.zeros(p, dtype=np.int64)
    hop_sum = np.zeros(p, dtype=np.int64)
    for i in range(1, p):
        j = int(parent[i])
        cost[i] = cost[j] + m.step(int(hops[i]))
        steps[i] = steps[j] + 1
        hop_sum[i] = hop_sum[j] + int(hops[i])
    worst = int(np.argmax(cost))
    return np.array([steps[worst], hop_sum[worst]])


def ring_order(p: int) -> np.ndarray:
    """The folded ring over a line: even PEs eastward, odd PEs back westward (0, 2, 4, …, 5, 3, 1), so
    every ring edge is at most 2 hops and every directed link carries one ring edge."""
    return np.concatenate([np.arange(0, p, 2), np.arange(1, p, 2)[::-1]])


def ring_allreduce(m: Machine, p: int, wavelets: int) -> tuple[float, int, int]:
    """A ring allreduce over P PEs on the folded ring: 2(P − 1) stages (reduce-scatter, then
    all-gather) of c = ⌈B / P⌉ wavelets, each PE receiving one chunk per stage from its ring
    predecessor ``d`` ≤ 2 hops away, pipelined per wavelet (a wavelet is forwarded once added). Every
    PE does the same in each stage, so one PE's input stream is simulated: the arrivals of stage s are
    the done times of stage s − 1 plus 2·T_R + d·t_h, served one per cycle after stage s − 1's.
    Returns (cycles, stages, the worst edge's hops)."""
    if p < 2 or wavelets <= 0:
        return 0.0, 0, 0
    c = -(-wavelets // p)
    d = int(np.abs(np.diff(ring_order(p))).max())
    lag = 2 * m.ramp + d * m.hop
    done = np.arange(c, dtype=np.float64) + 1  # stage 0: each PE's own chunk, wavelet j on its ramp at j + 1
    stages = 2 * (p - 1)
    last = -np.inf
    for _ in range(stages):
        done = fifo(done + lag, start=last)
        last = float(done[-1])
    return last, stages, d
