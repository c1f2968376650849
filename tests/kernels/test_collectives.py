"""Collectives on tiny8 (ramp T_R = 2, router hop 1, T_OP = 1; fp32: one value per 32-bit wavelet), each
expected value derived by hand from the rules of docs/model.md §10: a PE's wavelet j of its own data is on
its ramp at j + 1; it reaches a PE d hops away 2·T_R + d = 4 + d cycles later; the receiver consumes
arrivals one per cycle in arrival order, each done 1 cycle after it arrives (or after the previous one);
a PE sends its wavelet j once it has added wavelet j of every child. One dependent step over d hops is
step(d) = 5 + d."""

from __future__ import annotations

import pytest

from wsesim.config.loader import load_hardware
from wsesim.kernels import run_kernel
from wsesim.kernels.lines import binary_tree, chain, group_size, ring_order, star, two_phase

HW = load_hardware("tiny8")


def cycles(kind: str, grid: tuple[int, int], algorithm: str, b: int) -> float:
    r = run_kernel(HW, kind, *grid, dtype="fp32", algorithm=algorithm, wavelets=b)
    assert r.feasible and r.compute + r.communication + r.waiting == pytest.approx(r.cycles)
    return r.cycles


def test_topologies() -> None:
    assert chain(4)[0].tolist() == [-1, 0, 1, 2]
    assert star(4)[1].tolist() == [0, 1, 2, 3]
    assert binary_tree(8)[0].tolist() == [-1, 0, 0, 2, 0, 4, 4, 6]
    assert (group_size(8), group_size(420), group_size(720), group_size(512)) == (3, 21, 27, 23)
    assert two_phase(8)[0].tolist() == [-1, 0, 1, 0, 3, 4, 3, 6]
    assert ring_order(8).tolist() == [0, 2, 4, 6, 7, 5, 3, 1]


@pytest.mark.parametrize(("grid", "b", "expected"), [((1, 8), 1, 43), ((1, 8), 4, 46), ((2, 2), 1, 13),
                                                      ((2, 2), 4, 16), ((4, 4), 1, 37), ((4, 4), 4, 40)])
def test_chain_reduce_is_b_plus_6_per_hop(grid: tuple[int, int], b: int, expected: int) -> None:
    """Luczynski et al.'s B + (2·T_R + 2)(P − 1): 1×8: 1 + 6·7 = 43, 4 + 42 = 46. 2D: the row phase's
    result is ready at B + 6(C − 1) on every first-column PE, the column adds 6(R − 1): 2×2: 1 + 6 + 6
    = 13; 4×4: 1 + 18 + 18 = 37 (B = 4: +3)."""
    assert cycles("reduce", grid, "chain", b) == expected


def test_star_reduce_by_hand() -> None:
    """1×8, B = 1: PE i's wavelet reaches the root at 1 + 4 + i = 6 … 12, one a cycle: done 7 … 13 → 13.
    B = 4: 28 wavelets arrive from cycle 6 on, never fewer than one waiting: 6 + 28 = 34.
    4×4, B = 1: each row's root gets 6, 7, 8 → done 9; the column's PEs send at 9, arriving 14, 15, 16
    → done 17. 2×2, B = 1: row 1 + 5 → 7; column 7 + 5 → 13 (as the chain: one child each)."""
    assert cycles("reduce", (1, 8), "star", 1) == 13
    assert cycles("reduce", (1, 8), "star", 4) == 34
    assert cycles("reduce", (4, 4), "star", 1) == 17
    assert cycles("reduce", (2, 2), "star", 1) == 13


def test_tree_reduce_by_hand() -> None:
    """1×8 binary tree (7→6→4→0, 5→4, 3→2→0, 1→0), B = 1: PE 6 done 1 + 5 + 1 = 7; PE 4: from 5 at 6
    (done 7) and from 6 at 7 + 4 + 2 = 13 (done 14); the root: from 1 at 6, from 2 at 13, from 4 at 14 + 4
    + 4 = 22 → 23 = B + (2·T_R + 1)·D + L with D = 3 steps, L = 1 + 2 + 4 hops: 1 + 15 + 7.
    4×4: a row of 4 (3→2→0, 1→0): PE 2 done 7, root gets 6 and 7 + 6 = 13 → 14 = 1 + 5·2 + 3; the column
    repeats it from 14: 14 + 13 = 27."""
    assert cycles("reduce", (1, 8), "tree", 1) == 23
    assert cycles("reduce", (1, 8), "tree", 4) == 26  # the same path, 3 wavelets later
    assert cycles("reduce", (4, 4), "tree", 1) == 27
    assert cycles("reduce", (2, 2), "tree", 1) == 13


def test_two_phase_reduce_by_hand() -> None:
    """1×8, groups of ⌈√8⌉ = 3 ({0,1,2}, {3,4,5}, {6,7}), B = 1: PEs 1, 4, 6 done 7; PE 3 gets 4's at 12
    and 6's at 7 + 4 + 3 = 14 → 15; the root gets 1's at 12 and 3's at 15 + 7 = 22 → 23.
    B = 4: PE 3's arrivals 12, 13, 14, 14, 15, 15, 16, 17 (4's first on ties) are done 13 … 20, its sums
    j = 0 … 3 at 16, 18, 19, 20; the root's: 1's at 12 … 15 (done 13 … 16), 3's at 23, 25, 26, 27 → 28.
    4×4, groups of 2 ({0,1}, {2,3}): PE 2 done 7, root: 6 and 7 + 6 = 13 → 14; column from 14 → 27."""
    assert cycles("reduce", (1, 8), "two-phase", 1) == 23
    assert cycles("reduce", (1, 8), "two-phase", 4) == 28
    assert cycles("reduce", (4, 4), "two-phase", 1) == 27
    assert cycles("reduce", (2, 2), "two-phase", 1) == 13


@pytest.mark.parametrize(("algorithm", "grid", "expected"), [
    ("chain", (1, 8), 55), ("chain", (2, 2), 20), ("chain", (4, 4), 48), ("star", (1, 8), 25),
    ("tree", (1, 8), 35), ("two-phase", (1, 8), 35), ("tree", (4, 4), 38), ("star", (4, 4), 28),
    ("two-phase", (4, 4), 38), ("star", (2, 2), 20), ("tree", (2, 2), 20), ("two-phase", (2, 2), 20)])
def test_allreduce_is_the_reduce_then_a_multicast(algorithm: str, grid: tuple[int, int], expected: int) -> None:
    """The root's last wavelet, multicast to the farthest PE (R − 1 + C − 1 hops): + step(d) = 5 + d.
    1×8: reduce + 12 (chain 43 → 55, star 13 → 25, tree and two-phase 23 → 35); 2×2: 13 + 7 = 20;
    4×4: + 11 (chain 37 → 48, tree and two-phase 27 → 38, star 17 → 28)."""
    assert cycles("allreduce", grid, algorithm, 1) == expected


def test_ring_allreduce_by_hand() -> None:
    """Folded ring 0, 2, 4, 6, 7, 5, 3, 1: every edge ≤ 2 hops, so a stage's wavelet arrives 4 + 2 = 6
    after it left and is done 1 later. 1×8, B = 1 (chunks of ⌈1/8⌉ = 1): 14 stages of 7 after the first
    wavelet leaves at 1: 1 + 98 = 99 (B = 4: still one wavelet a chunk, 99). 2×2: rows then columns, each
    2 stages of a 1-hop edge (6): 1 + 12 = 13, twice: 26. 2×2, B = 4 (chunks of 2): stage 1 arrives 6, 7,
    done 7, 8; stage 2 arrives 12, 13 → 14; twice: 28. 4×4 (d = 2, 6 stages a side): 2 × (1 + 42) = 86."""
    assert cycles("allreduce", (1, 8), "ring", 1) == 99
    assert cycles("allreduce", (1, 8), "ring", 4) == 99
    assert cycles("allreduce", (2, 2), "ring", 1) == 26
    assert cycles("allreduce", (2, 2), "ring", 4) == 28
    assert cycles("allreduce", (4, 4), "ring", 1) == 86


def test_broadcast_and_alltoall_by_hand() -> None:
    """Broadcast: one multicast route, B + step(R − 1 + C − 1): 1×8: 1 + 12 = 13 (B = 4: 16); 2×2: 1 + 7
    = 8; 4×4: 1 + 11 = 12. All-to-all (row transpose, shares of ⌈B/n⌉): the busiest eastward link of n
    PEs carries max (x + 1)(n − 1 − x) shares (16 for n = 8, 4 for n = 4, 1 for n = 2), then step(n − 1):
    1×8: 16 + 12 = 28; 4×4: (4 + 8) twice = 24; 2×2: (1 + 6) twice = 14."""
    assert cycles("broadcast", (1, 8), "multicast", 1) == 13
    assert cycles("broadcast", (1, 8), "multicast", 4) == 16
    assert cycles("broadcast", (2, 2), "multicast", 1) == 8
    assert cycles("broadcast", (4, 4), "multicast", 1) == 12
    assert cycles("alltoall", (1, 8), "transpose", 1) == 28
    assert cycles("alltoall", (4, 4), "transpose", 1) == 24
    assert cycles("alltoall", (2, 2), "transpose", 1) == 14


def test_luczynski_chain_anchor_and_split() -> None:
    """P = 512, B = 1 on WSE-2: 1 + 6 · 511 = 3,067; the critical path is 511 adds and 1 + 5 · 511 of
    wavelets on ramps and links, no waiting; the links carry one wavelet each."""
    r = run_kernel(load_hardware("wse2"), "reduce", 512, 1, dtype="fp32", algorithm="chain", wavelets=1)
    assert (r.cycles, r.compute, r.communication, r.waiting) == (3067, 511, 2556, 0)
    assert (r.links.max_wavelets, r.links.links_used, r.links.wavelet_hops) == (1, 511, 511)


def test_the_sram_check_makes_a_result_not_a_crash() -> None:
    """Two copies of 5,000 wavelets (40,000 B) exceed tiny8's 36,864 B usable per PE."""
    r = run_kernel(HW, "reduce", 1, 8, dtype="fp32", algorithm="chain", wavelets=5000)
    assert not r.feasible and "36,864 B usable" in r.reason and r.cycles == 5000 + 42


@pytest.mark.parametrize("p", [2, 3, 8, 16, 64, 100])
@pytest.mark.parametrize("b", [1, 2, 7, 50])
def test_the_closed_forms(p: int, b: int) -> None:
    """docs/model.md §10.2 on WSE-2's T_R = 2, t_h = 1: chain reduce B + 6(P − 1); broadcast B + 5 + (P − 1);
    star (B = 1) P + 5; tree (P a power of 2, B = 1) 1 + 5·log2 P + (P − 1); ring allreduce
    ⌈B/P⌉ + 2(P − 1)·step(d) while the chunk is at most step(d) (d = 2, or 1 for P = 2)."""
    wse2 = load_hardware("wse2")

    def sim(kind: str, algorithm: str, wavelets: int = b) -> float:
        return run_kernel(wse2, kind, 1, p, dtype="fp32", algorithm=algorithm, wavelets=wavelets).cycles

    assert sim("reduce", "chain") == b + 6 * (p - 1)
    assert sim("broadcast", "multicast") == b + 5 + (p - 1)
    assert sim("reduce", "star", 1) == p + 5
    if p & (p - 1) == 0:
        assert sim("reduce", "tree", 1) == 1 + 5 * (p.bit_length() - 1) + (p - 1)
    step = 5 + (2 if p > 2 else 1)
    chunk = -(-b // p)
    if chunk <= step:
        assert sim("allreduce", "ring") == chunk + 2 * (p - 1) * step


@pytest.mark.parametrize("algorithm", ["chain", "star", "tree", "two-phase"])
@pytest.mark.parametrize("grid", [(2, 2), (4, 4), (5, 7), (16, 16)])
@pytest.mark.parametrize("b", [1, 3, 64])
def test_the_class_shortcut_equals_the_pe_by_pe_tree(algorithm: str, grid: tuple[int, int], b: int) -> None:
    """Above 4,096 PEs a 2D reduce simulates one row and then the first column (every first-column PE
    taking the row children's streams with its column children's); below, every PE. Both give the
    same per-wavelet times at the root."""
    from wsesim.kernels.collectives import reduce_2d
    from wsesim.kernels.machine import Machine

    m = Machine.of(HW, "fp32")
    exact, classes = reduce_2d(m, *grid, b, algorithm, exact=True), reduce_2d(m, *grid, b, algorithm, exact=False)
    assert exact[0] == classes[0] and (exact[1] == classes[1]).all()


def test_a_first_column_pe_takes_both_streams_through_one_ramp() -> None:
    """2×2 chain, B = 4: PE (1, 0) gets (1, 1)'s wavelets at 6 … 9 (done 7 … 10); the root gets (0, 1)'s
    at 6 … 9 and (1, 0)'s at 12 … 15: 16. With B = 8 the two streams meet at the root: (0, 1)'s at 6 … 13
    (done 7 … 14), (1, 0)'s at 12 … 19 queue behind them: 8 + 8 wavelets from cycle 6 → done 22."""
    assert cycles("reduce", (2, 2), "chain", 4) == 16
    assert cycles("reduce", (2, 2), "chain", 8) == 22


def test_colours_are_counted_and_checked() -> None:
    """A binary tree's groups nest: 6 over the busiest router of column 0 (its 750 rows), 1 for its
    row's group at the root, 1 for the multicast back = 8 of WSE-2's 24; with 7 the schedule cannot be
    routed (a result, not a crash)."""
    wse2 = load_hardware("wse2")
    r = run_kernel(wse2, "allreduce", 750, 994, dtype="fp32", algorithm="tree", wavelets=1)
    assert (r.colours, r.feasible) == (8, True)
    few = wse2.model_copy(update={"fabric": wse2.fabric.model_copy(update={"colours": 7})})
    r = run_kernel(few, "allreduce", 750, 994, dtype="fp32", algorithm="tree", wavelets=1)
    assert not r.feasible and "needs 8 colours" in r.reason
    assert run_kernel(HW, "reduce", 1, 8, dtype="fp32", algorithm="chain").colours == 2


@pytest.mark.parametrize("p", [3, 4, 8])
@pytest.mark.parametrize("b", [1, 2, 4, 16])
def test_star_reduce_agrees_with_the_packet_fidelity(p: int, b: int) -> None:
    """The star is where links are shared: every stream crosses the links next to the root. The packet
    fidelity (wsesim.fabric.packet: every wavelet stream through FIFO links) on the same line, with its
    injection latency set to T_R and its hop to t_h, delivers the last wavelet exactly 1 + T_R + T_OP = 4
    cycles before the kernel model's root has added it (the kernel's first wavelet leaves at cycle 1, then
    the ramp up and the add, which the packet model does not count): so the kernel model's per-ramp queue
    loses nothing to the links."""
    import numpy as np

    from wsesim.fabric.mesh import Mesh
    from wsesim.fabric.packet import PacketFabric
    from wsesim.fabric.traffic import Traffic

    fabric = HW.fabric.model_copy(update={"injection_latency_cycles": 2.0, "hop_latency_cycles": 1.0})
    mesh = Mesh.from_hardware(HW.model_copy(update={"fabric": fabric}), "pe", (1, p))
    traffic = Traffic(src=np.arange(1, p), dst=np.zeros(p - 1, dtype=np.int64), nbytes=np.full(p - 1, 4.0 * b))
    assert cycles("reduce", (1, p), "star", b) == PacketFabric(mesh).simulate(traffic).cycles + 4
