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
from functools import lru_cache

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


def ktree_group(p: int) -> int:
    """The K-tree's group: the smallest divisor of P not below √P, so that the groups are equal, as
    WaferLLM's configurations choose them (420 → 20 groups of 21, 720 → 24 groups of 30); ⌈√P⌉ when
    that divisor is more than twice √P (a prime P), the last group then shorter."""
    root = group_size(p)
    for g in range(root, 2 * root + 1):
        if p % g == 0:
            return g
    return root


def two_phase(p: int, group: int | None = None) -> Topology:
    """Chains inside groups of ``group`` PEs (⌈√P⌉ by default) to each group's first PE, then a chain
    over the group roots, ``group`` hops apart."""
    g = group or group_size(p)
    i = np.arange(p)
    head = i % g == 0
    parent = np.where(head, i - g, i - 1)
    parent[0] = -1
    return parent, np.where(i == 0, 0, np.where(head, g, 1))


def ktree_shape(p: int) -> tuple[int, int, int]:
    """(group size g, groups G, the line's root) of the K-tree over P PEs: groups of ``ktree_group``,
    the root the middle group's middle PE, (G // 2)·g + g // 2 (WaferLLM's ``root_2nd_phase``)."""
    g = min(ktree_group(p), p) if p > 1 else 1
    groups = -(-p // g)
    return g, groups, min((groups // 2) * g + g // 2, max(p - 1, 0))


def ktree(p: int) -> Topology:
    """The K-tree's messages in physical positions (its links and routes; its timing is
    ``ktree_allreduce``): inside each group of g PEs, i sends toward the group's middle PE; each group
    root toward the middle group's root, g hops. Parents are not numbered before their children here."""
    g, _, centre = ktree_shape(p)
    i = np.arange(p)
    start, mid = i - i % g, i - i % g + g // 2
    parent = np.where(i < mid, i + 1, i - 1)
    roots = np.unique(mid[mid < p])
    parent[roots] = np.where(roots < centre, roots + g, roots - g)
    parent[centre] = -1
    last = start[-1] if p else 0
    if p and mid[-1] >= p:  # a short last group: a chain to its first PE, which sends to the previous root
        parent[last:] = np.arange(last, p) - 1
        parent[last] = last - g + g // 2
    return parent, np.abs(np.where(parent >= 0, parent - i, 0))


TOPOLOGIES: dict[ReduceAlgorithm, Callable[[int], Topology]] = {
    ReduceAlgorithm.CHAIN: chain, ReduceAlgorithm.STAR: star, ReduceAlgorithm.TREE: binary_tree,
    ReduceAlgorithm.TWO_PHASE: two_phase, ReduceAlgorithm.KTREE: ktree}
"""Reduce trees by algorithm name (the ring is not a tree: ``ring_allreduce``). The K-tree's entry is its
messages for the link and route counts; it is timed by ``ktree_allreduce`` (its phases do not pipeline
into one another, and its root is not PE 0)."""


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
    for i in order:
        streams = [*(extra or ()), *(ready[c] + m.latency(int(hops[c])) for c in sorted(children[i]))]
        arr = np.concatenate(streams)
        key = np.argsort(arr, kind="stable")
        done = np.empty_like(arr)
        done[key] = fifo(arr[key])
        ready[i] = np.maximum(done.reshape(len(streams), wavelets).max(axis=0), own)
    return ready, _depths(parent, hops, m)


def arrivals(m: Machine, topo: Topology, ready: list[np.ndarray], node: int = 0) -> list[np.ndarray]:
    """When the streams of ``node``'s children reach it (the order ``reduce_line`` merges them in)."""
    parent, hops = topo
    kids = np.flatnonzero(parent == node)
    return [ready[int(c)] + m.latency(int(hops[c])) for c in kids]


def _postorder(parent: np.ndarray, children: list[list[int]]) -> list[int]:
    """Every PE with children, after all of its descendants (deepest first)."""
    depth = np.zeros(len(parent), dtype=np.int64)
    for i in range(1, len(parent)):  # parents precede children in every topology here (parent < i)
        depth[i] = depth[parent[i]] + 1
    return [int(i) for i in np.argsort(-depth, kind="stable") if children[int(i)]]


def _depths(parent: np.ndarray, hops: np.ndarray, m: Machine) -> np.ndarray:
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


def centred_chains(n: int, root: int, spacing: int = 1) -> Topology:
    """Two chains over n positions converging on ``root`` (PE i < root sends to i + 1, i > root to
    i − 1, each ``spacing`` hops), relabelled so that the root is 0 and every parent precedes its
    children (``reduce_line``'s order): label 2k − 1 is root − k, label 2k is root + k."""
    pos = [root]
    for k in range(1, n):
        pos += [x for x in (root - k, root + k) if 0 <= x < n]
    label = {x: i for i, x in enumerate(pos)}
    parent = np.array([-1] + [label[x + 1 if x < root else x - 1] for x in pos[1:]], dtype=np.int64)
    return parent, np.where(parent >= 0, spacing, 0)


def ktree_allreduce(m: Machine, p: int, wavelets: int) -> tuple[float, int, int]:
    """WaferLLM's allreduce over a line of P PEs (its ``two_tree_allreduce``), three phases, each one
    vector instruction at every PE, so a phase starts when the one before it has ended at that PE:

    1. in every group of g PEs (``ktree_group``) two chains converge on the group's middle PE, g // 2,
       pipelined per wavelet, ending at T₁ (every full group alike);
    2. the same over the group roots, g hops apart, to the middle group's root (G // 2)·g + g // 2,
       each root streaming its sum from T₁ (its wavelet j leaves at T₁ + j + 1), ending at T₂;
    3. the root multicasts the sum both ways: T₂ + B + step(the farther end).

    Returns (cycles, dependent steps, hops of the slowest path)."""
    if p < 2 or wavelets <= 0:
        return 0.0, 0, 0
    g, groups, root = ktree_shape(p)
    t1, d1 = _centred_reduce(m, g, 1, wavelets, 0.0)
    t1 = t1 if g > 1 else 0.0
    t2, d2 = t1, (0, 0)
    if groups > 1:
        t2, d2 = _centred_reduce(m, groups, g, wavelets, t1)
    far = max(root, p - 1 - root)
    steps = d1[0] * (g > 1) + d2[0] + 1
    return t2 + m.transfer(wavelets, far), steps, d1[1] * (g > 1) + d2[1] + far


def _centred_reduce(m: Machine, n: int, spacing: int, wavelets: int,
                    t0: float) -> tuple[float, tuple[int, int]]:
    """``reduce_line`` over ``centred_chains(n, n // 2, spacing)``, every PE's own wavelet j ready at
    t0 + j + 1: (the root's last wavelet's ready time, (steps, hops) of the slowest path). On whole
    cycles (every latency and t0 an integer, as every preset's are) each chain PE's stream is its child's
    shifted by latency + T_OP, exactly as the per-wavelet FIFO computes it (arrivals a cycle apart are
    never queued), so only the root's merge of its two chains is simulated wavelet by wavelet; otherwise
    the whole line is (``reduce_line``), as before."""
    lat = m.latency(spacing)
    if not (float(lat).is_integer() and float(t0).is_integer()):
        own = t0 + np.arange(wavelets, dtype=np.float64) + 1 if t0 else None
        ready, depth = reduce_line(m, centred_chains(n, n // 2, spacing), wavelets, own=own)
        return float(ready[0][-1]), (int(depth[0]), int(depth[1]))
    root, o = n // 2, t0 + 1  # a leaf's wavelet j is ready at o + j
    chains = [c for c in (root, n - 1 - root) if c > 0]  # the west chain's PEs, then the east's
    j = np.arange(wavelets, dtype=np.float64)
    own = o + j
    if not chains:
        return float(own[-1]), (0, 0)
    streams = []
    for length in chains:  # the chain's PE next to the root: its stream's offset after length − 1 shifts
        off = o
        for _ in range(length - 1):
            off = max(off + lat + T_OP, o)
        streams.append(j + (off + lat))
    arr = np.concatenate(streams)
    key = np.argsort(arr, kind="stable")
    done = np.empty_like(arr)
    done[key] = fifo(arr[key])
    last = max(float(done.reshape(len(streams), wavelets).max(axis=0)[-1]), float(own[-1]))
    longest = max(chains)
    return last, (longest, longest * spacing)


def phases(algorithm: ReduceAlgorithm) -> int:
    """Instructions one PE issues, one after another, for an allreduce over a line: its reduce and then
    its multicast, two; the K-tree three (two reduce phases and its scatter, WaferLLM's code). A reduce
    is one; the ring's stages are counted by ``ring_allreduce``'s caller."""
    return 3 if algorithm == ReduceAlgorithm.KTREE else 2


@lru_cache(maxsize=1024)
def rotating_reduces(m: Machine, p: int, wavelets: int) -> tuple[float, float]:
    """(network, issue) cycles of P reduces of B wavelets over a line of P PEs, one per step of
    WaferLLM's prefill Q·Kᵀ (``matmul_T_reduce_add``: after each step's block product every PE's
    partial scores are summed along its row, at a root that moves along the folded ring, so over the P
    steps every PE is the root once). A reduce with its root at r is two chains converging on r, of
    r and P − 1 − r PEs: the chain PE k hops out has wavelet j ready at j + 1 + step(1)·(k − 1) (a
    chain never queues), so the root takes the two neighbours' streams at j + 1 + step(1)·(L − 1) +
    latency(1) and adds them one a cycle (``fifo``). Each reduce is one instruction, issued after the
    step's FMACs (the code calls it synchronously), so nothing overlaps it."""
    if p < 2 or wavelets <= 0:
        return 0.0, 0.0
    j = np.arange(wavelets, dtype=np.float64) + 1
    total = 0.0
    for r in range(p):
        streams = [j + m.step(1) * (n - 1) + m.latency(1) for n in (r, p - 1 - r) if n > 0]
        arr = np.sort(np.concatenate(streams), kind="stable")
        total += max(float(fifo(arr)[-1]), float(j[-1]))
    return total, float(p * m.issue)


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
    lag = m.latency(d)
    done = np.arange(c, dtype=np.float64) + 1  # stage 0: each PE's own chunk, wavelet j on its ramp at j + 1
    stages = 2 * (p - 1)
    last = -np.inf
    for _ in range(stages):
        done = fifo(done + lag, start=last)
        last = float(done[-1])
    return last, stages, d
