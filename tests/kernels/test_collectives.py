"""Collectives on tiny8 (ramp T_R = 2, router hop 1, T_OP = 1; fp32: one value per 32-bit wavelet), each
expected value derived by hand from the rules of docs/model.md §10: a PE's wavelet j of its own data is on
its ramp at j + 1; it reaches a PE d hops away 2·T_R + d = 4 + d cycles later; the receiver consumes
arrivals one per cycle in arrival order, each done 1 cycle after it arrives (or after the previous one);
a PE sends its wavelet j once it has added wavelet j of every child. One dependent step over d hops is
step(d) = 5 + d. tiny8's instruction_issue is 0 cycles, so no collective here has overhead unless a test
overrides ``pe.instruction_issue_cycles``."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.loader import load_hardware
from wsesim.kernels import run_kernel
from wsesim.kernels.lines import (
    binary_tree,
    centred_chains,
    chain,
    group_size,
    ktree,
    ktree_allreduce,
    ktree_group,
    ktree_shape,
    reduce_line,
    ring_order,
    star,
    two_phase,
)
from wsesim.kernels.machine import Machine

HW = load_hardware("tiny8")


def cycles(kind: str, grid: tuple[int, int], algorithm: str, b: int) -> float:
    r = run_kernel(HW, kind, *grid, dtype="fp32", algorithm=algorithm, wavelets=b)
    assert r.feasible and r.overhead + r.compute + r.communication + r.waiting == pytest.approx(r.cycles)
    return r.cycles


def test_topologies() -> None:
    assert chain(4)[0].tolist() == [-1, 0, 1, 2]
    assert star(4)[1].tolist() == [0, 1, 2, 3]
    assert binary_tree(8)[0].tolist() == [-1, 0, 0, 2, 0, 4, 4, 6]
    assert (group_size(8), group_size(420), group_size(720), group_size(512)) == (3, 21, 27, 23)
    assert two_phase(8)[0].tolist() == [-1, 0, 1, 0, 3, 4, 3, 6]
    assert ring_order(8).tolist() == [0, 2, 4, 6, 7, 5, 3, 1]
    # centred_chains(5, 2): positions 2, 1, 3, 0, 4 get labels 0 … 4; 1 → 2, 3 → 2, 0 → 1, 4 → 3
    assert centred_chains(5, 2)[0].tolist() == [-1, 0, 0, 1, 2]
    # ktree(4): groups {0, 1}, {2, 3} with middles 1 and 3 (0 → 1, 2 → 3, 1 hop); the line's root is the
    # middle group's, (2 // 2)·2 + 1 = 3, so 1 → 3 over 2 hops
    assert ktree(4)[0].tolist() == [1, 3, 3, -1] and ktree(4)[1].tolist() == [1, 2, 1, 0]


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
    ("chain", (1, 8), 56), ("chain", (2, 2), 21), ("chain", (4, 4), 49), ("star", (1, 8), 26),
    ("tree", (1, 8), 36), ("two-phase", (1, 8), 36), ("tree", (4, 4), 39), ("star", (4, 4), 29),
    ("two-phase", (4, 4), 39), ("star", (2, 2), 21), ("tree", (2, 2), 21), ("two-phase", (2, 2), 21)])
def test_allreduce_is_the_reduce_then_a_multicast(algorithm: str, grid: tuple[int, int], expected: int) -> None:
    """The multicast is its own instruction, started once the reduce has ended at the root (its last
    wavelet ready at T, the reduce's cycles): the root's wavelet j leaves at T + j + 1, the last at T + B,
    and is done at the farthest PE (R − 1 + C − 1 hops) after step(d): T + B + step(d) = T + 1 + 5 + d.
    1×8 (d = 7): reduce + 13 (chain 43 → 56, star 13 → 26, tree and two-phase 23 → 36); 2×2 (d = 2):
    13 + 8 = 21; 4×4 (d = 6): + 12 (chain 37 → 49, tree and two-phase 27 → 39, star 17 → 29)."""
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
    """P = 512, B = 1 on WSE-2: Luczynski et al.'s 1 + 6 · 511 = 3,067, plus the reduce's one instruction
    issue (WSE-2's instruction_issue, 7 cycles), which their model does not count: 3,074. The critical path
    is 7 of overhead, 511 adds and 1 + 5 · 511 of wavelets on ramps and links, no waiting; the links carry
    one wavelet each."""
    wse2 = load_hardware("wse2")
    assert wse2.pe.instruction_issue_cycles == 7
    r = run_kernel(wse2, "reduce", 512, 1, dtype="fp32", algorithm="chain", wavelets=1)
    assert (r.cycles, r.overhead, r.compute, r.communication, r.waiting) == (3067 + 7, 7, 511, 2556, 0)
    assert (r.links.max_wavelets, r.links.links_used, r.links.wavelet_hops) == (1, 511, 511)


def test_the_sram_check_makes_a_result_not_a_crash() -> None:
    """Two copies of 5,000 wavelets (40,000 B) exceed tiny8's 36,864 B usable per PE."""
    r = run_kernel(HW, "reduce", 1, 8, dtype="fp32", algorithm="chain", wavelets=5000)
    assert not r.feasible and "36,864 B usable" in r.reason and r.cycles == 5000 + 42


@pytest.mark.parametrize("p", [2, 3, 8, 16, 64, 100])
@pytest.mark.parametrize("b", [1, 2, 7, 50])
def test_the_closed_forms(p: int, b: int) -> None:
    """docs/model.md §10.2 on WSE-2's T_R = 2, t_h = 1: chain reduce B + 6(P − 1); broadcast B + 5 + (P − 1);
    star (B = 1) P + 5; tree (P a power of 2, B = 1) 1 + 5·log2 P + (P − 1); chain allreduce the reduce and
    then the multicast, B + 6(P − 1) + B + 5 + (P − 1); ring allreduce ⌈B/P⌉ + 2(P − 1)·step(d) while the
    chunk is at most step(d) (d = 2, or 1 for P = 2). Each adds WSE-2's 7 cycles per instruction issued:
    a reduce and a broadcast 1, an allreduce 2 (the reduce, then the multicast), the ring 2(P − 1) (one
    per stage)."""
    wse2 = load_hardware("wse2")
    issue = 7
    assert wse2.pe.instruction_issue_cycles == issue

    def sim(kind: str, algorithm: str, wavelets: int = b) -> float:
        return run_kernel(wse2, kind, 1, p, dtype="fp32", algorithm=algorithm, wavelets=wavelets).cycles

    assert sim("reduce", "chain") == b + 6 * (p - 1) + issue
    assert sim("broadcast", "multicast") == b + 5 + (p - 1) + issue
    assert sim("reduce", "star", 1) == p + 5 + issue
    if p & (p - 1) == 0:
        assert sim("reduce", "tree", 1) == 1 + 5 * (p.bit_length() - 1) + (p - 1) + issue
    assert sim("allreduce", "chain") == b + 6 * (p - 1) + b + 5 + (p - 1) + 2 * issue
    step = 5 + (2 if p > 2 else 1)
    chunk = -(-b // p)
    if chunk <= step:
        assert sim("allreduce", "ring") == chunk + 2 * (p - 1) * step + 2 * (p - 1) * issue


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
    fidelity (wsesim.fabric.packet: every wavelet stream through FIFO links) on the same line, reading the
    same hop (both ramps, 2·T_R, charged at injection; t_h a hop), delivers the last wavelet exactly
    1 + T_OP = 2 cycles before the kernel model's root has added it (the kernel's first wavelet leaves at
    cycle 1, then the add, which the packet model does not count): so the kernel model's per-ramp queue
    loses nothing to the links."""
    import numpy as np

    from wsesim.fabric.mesh import Mesh
    from wsesim.fabric.packet import PacketFabric
    from wsesim.fabric.traffic import Traffic

    mesh = Mesh.from_hardware(HW, "pe", (1, p))
    traffic = Traffic(src=np.arange(1, p), dst=np.zeros(p - 1, dtype=np.int64), nbytes=np.full(p - 1, 4.0 * b))
    assert cycles("reduce", (1, p), "star", b) == PacketFabric(mesh).simulate(traffic).cycles + 2


def test_ktree_groups() -> None:
    """The smallest divisor of P not below √P: 420 → 21 (⌈√420⌉ = 21 divides it: 20 groups, WaferLLM's
    MeshGEMV configuration), 720 → 30 (⌈√720⌉ = 27, and 27, 28, 29 do not divide 720: 24 groups), 4 → 2,
    8 → 4 (⌈√8⌉ = 3 does not divide 8); 7 is prime, no divisor in 3 … 6: ⌈√7⌉ = 3, the last group short."""
    assert (ktree_group(420), ktree_group(720), ktree_group(4), ktree_group(8), ktree_group(7)) == (
        21, 30, 2, 4, 3)


def test_ktree_allreduce_by_hand() -> None:
    """tiny8, fp32 (T_R = 2, 1 cycle a hop, T_OP = 1), B = 1; (cycles, dependent steps, hops of the
    slowest path).
    p = 4: groups of 2, roots at 1 and 3, the line's at 3. Phase 1: PE 0's wavelet leaves at 1, arrives
    at 1 + 4 + 1 = 6, done 7 → T1 = 7; phase 2: root 1 streams from 7: leaves 8, 2 hops: arrives 14, done
    15 → T2 = 15; the scatter from 3 to 0: B + step(3) = 1 + 8 = 9 → 24; 3 steps, 1 + 2 + 3 = 6 hops.
    p = 2: one group, root 1: PE 0's arrives 6, done 7; no phase 2; scatter 1 + step(1) = 7 → 14.
    p = 8: groups of 4, middles 2 and 6, line root 6. Phase 1: 0 → 1 → 2 (PE 1 ready 7, arrives 12, done
    13) and 3 → 2 (arrives 6, done 7): T1 = 13; phase 2: root 2 leaves 14, 4 hops: arrives 22, done 23;
    scatter from 6 to 0: 1 + step(6) = 12 → 35; steps 2 + 1 + 1 = 4, hops 2 + 4 + 6 = 12.
    p = 420: groups of 21, middles 10 + 21k; phase 1: two chains of 10 PEs meet at 10, each end's
    wavelet ready at 1 + 6·9 = 55 at PEs 9 and 11, both arriving at 60: done 61, 62 → T1 = 62. Phase 2:
    20 roots 21 hops apart (step 26) to root 220 (group 10): 10 roots on the west, wavelet leaving
    at 63, root k ready at 63 + 26k, root 9's arriving at 63 + 234 + 25 = 322; 9 on the east, root 11's
    arriving at 63 + 8·26 + 25 = 296 (done 297); 322 done 323 = T2. Scatter from 220 to 0 (farther than
    419): 1 + step(220) = 226 → 549; steps 10 + 10 + 1 = 21, hops 10 + 10·21 + 220 = 440.
    p = 7 (groups 3, 3, 1; timed as three groups of 3, every group's phase 1 as a full one's): PEs 0 and
    2 arrive at 1 at 6: done 7, 8 → T1 = 8; roots 1 and "7" to 4, 3 hops: leave 9, arrive 16, 16 →
    done 17, 18; scatter from 4: 1 + step(4) = 10 → 28."""
    m = Machine.of(HW, "fp32")
    assert ktree_allreduce(m, 4, 1) == (24, 3, 6)
    assert ktree_allreduce(m, 2, 1) == (14, 2, 2)
    assert ktree_allreduce(m, 8, 1) == (35, 4, 12)
    assert ktree_allreduce(m, 420, 1) == (549, 21, 440)
    assert ktree_allreduce(m, 7, 1) == (28, 3, 8)
    assert ktree_allreduce(m, 1, 1) == (0, 0, 0)


def _ktree_per_wavelet(m: Machine, p: int, b: int) -> tuple[float, int, int]:
    """``ktree_allreduce`` with both reduce phases simulated wavelet by wavelet at every PE."""
    g, groups, root = ktree_shape(p)
    ready, d1 = reduce_line(m, centred_chains(g, g // 2), b)
    t1 = float(ready[0][-1]) if g > 1 else 0.0
    t2, d2 = t1, [0, 0]
    if groups > 1:
        ready, d2 = reduce_line(m, centred_chains(groups, groups // 2, g), b, own=t1 + np.arange(b) + 1.0)
        t2 = float(ready[0][-1])
    far = max(root, p - 1 - root)
    return (t2 + m.transfer(b, far), int(d1[0]) * (g > 1) + int(d2[0]) + 1,
            int(d1[1]) * (g > 1) + int(d2[1]) + far)


@pytest.mark.parametrize("hw", ["tiny8", "wse3", "half-cycle hops"])
def test_ktree_allreduce_shortcut_is_the_per_wavelet_simulation(hw: str) -> None:
    """``ktree_allreduce`` simulates only each phase's root wavelet by wavelet (a chain PE's stream is its
    child's shifted on whole cycles): the same figures, to the bit, as every PE's simulation, on lines
    of full, short and prime groups and streams of 1 to 4,097 wavelets; with a fractional hop latency it
    takes the per-wavelet path itself."""
    spec = (HW.model_copy(update={"fabric": HW.fabric.model_copy(update={"hop_latency_cycles": 0.5})})
            if hw == "half-cycle hops" else load_hardware(hw))
    m = Machine.of(spec, "fp16")
    for p in (*range(2, 40), 97, 420, 755, 1170):
        for b in (1, 2, 3, 17, 64, 333, 4097):
            assert ktree_allreduce(m, p, b) == _ktree_per_wavelet(m, p, b), (p, b)


def test_ktree_allreduce_kernel_is_the_rows_then_the_columns() -> None:
    """run_kernel's ktree allreduce: every row's K-tree allreduce, then every column's (above): 1×4: 24;
    1×8: 35; 4×4: 24 + 24 = 48; 2×2: 14 + 14 = 28. Split on 1×4: compute = 3 steps · T_OP = 3,
    communication B + 3·(2·T_R) + 6 hops = 1 + 12 + 6 = 19, waiting the other 2."""
    assert cycles("allreduce", (1, 4), "ktree", 1) == 24
    assert cycles("allreduce", (1, 8), "ktree", 1) == 35
    assert cycles("allreduce", (4, 4), "ktree", 1) == 48
    assert cycles("allreduce", (2, 2), "ktree", 1) == 28
    r = run_kernel(HW, "allreduce", 1, 4, dtype="fp32", algorithm="ktree", wavelets=1)
    assert (r.overhead, r.compute, r.communication, r.waiting) == (0, 3, 19, 2)


def test_ktree_is_not_a_reduce() -> None:
    from wsesim.config.errors import ConfigError

    with pytest.raises(ConfigError, match='got "ktree"'):
        run_kernel(HW, "reduce", 1, 4, dtype="fp32", algorithm="ktree", wavelets=1)


@pytest.mark.parametrize(("kind", "grid", "algorithm", "base", "instructions"), [
    ("reduce", (1, 8), "chain", 43, 1), ("broadcast", (1, 8), "multicast", 13, 1),
    ("allreduce", (1, 8), "chain", 56, 2), ("allreduce", (4, 4), "chain", 49, 2),
    ("allreduce", (1, 4), "ktree", 24, 3), ("allreduce", (4, 4), "ktree", 48, 6),
    ("allreduce", (1, 8), "ring", 99, 14), ("allreduce", (4, 4), "ring", 86, 12),
    ("alltoall", (4, 4), "transpose", 24, 2), ("alltoall", (1, 8), "transpose", 28, 1)])
def test_instruction_issue_adds_the_counted_instructions(kind: str, grid: tuple[int, int], algorithm: str,
                                                         base: int, instructions: int) -> None:
    """With ``pe.instruction_issue_cycles`` = 10, a collective takes its tiny8 cycles (above) plus 10 per
    instruction, all of it overhead: a reduce and a broadcast 1; an allreduce 2 (the reduce, then the
    multicast); the K-tree 3 per dimension that is more than one PE (1×4: 3, 4×4: 6); the ring one per
    stage, 2(P − 1) per dimension (1×8: 14, 4×4: 6 + 6); the all-to-all one per phase (4×4: 2, 1×8: 1)."""
    hw = HW.model_copy(update={"pe": HW.pe.model_copy(update={"instruction_issue_cycles": 10.0})})
    r = run_kernel(hw, kind, *grid, dtype="fp32", algorithm=algorithm, wavelets=1)
    assert (r.cycles, r.overhead) == (base + 10 * instructions, 10 * instructions)
    assert r.overhead + r.compute + r.communication + r.waiting == pytest.approx(r.cycles)
    assert cycles(kind, grid, algorithm, 1) == base


def test_rotating_reduces_by_hand() -> None:
    """WaferLLM's prefill Q·Kᵀ: one row reduce per step, its root at every PE once (tiny8: T_R = 2, one
    cycle a hop, step(1) = 6, latency(1) = 5, no issue). P = 2, B = 2: either root takes its one
    neighbour's wavelets at j + 1 + 5 = 6, 7, added at 7, 8: 8 + 8 = 16. P = 4, B = 1: root 0 (or 3) at
    the end of a chain of 3: 1 + 6·2 + 5 = 18, added 19; root 1 (or 2) between chains of 1 and 2: arrivals
    6 and 12, added 7 and 13: 13. 19 + 13 + 13 + 19 = 64. With a 10-cycle issue, one instruction a step."""
    from wsesim.kernels.lines import rotating_reduces
    from wsesim.kernels.machine import Machine

    m = Machine.of(HW, "fp16")
    assert rotating_reduces(m, 2, 2) == (16.0, 0.0)
    assert rotating_reduces(m, 4, 1) == (64.0, 0.0)
    hw = HW.model_copy(update={"pe": HW.pe.model_copy(update={"instruction_issue_cycles": 10.0})})
    assert rotating_reduces(Machine.of(hw, "fp16"), 4, 1) == (64.0, 40.0)


def test_wse3s_allreduce_turns_axis_by_re_routing_its_colours() -> None:
    """WaferLLM's WSE-3 code shares 5 colours between the axes and re-routes them when its allreduce turns
    from the rows to the columns (``fabric.reroute_colours: 5``), one issue each; its WSE-2 code keeps
    colours per axis (0). tiny8 with a 10-cycle issue and 5 re-routed colours: the 2D K-tree on 4 × 4 and
    2 × 2 turns once: 48 + 6 · 10 + 5 · 10 = 158 and 28 + 60 + 50 = 138, of which the turn 50; a line (1 × 8)
    never turns: 35 + 30 = 65. The chain allreduce is not WaferLLM's: no turn (49 + 20 on 4 × 4)."""
    hw = HW.model_copy(update={"pe": HW.pe.model_copy(update={"instruction_issue_cycles": 10.0}),
                               "fabric": HW.fabric.model_copy(update={"reroute_colours": 5})})

    def run(grid: tuple[int, int], algorithm: str = "ktree"):
        r = run_kernel(hw, "allreduce", *grid, dtype="fp32", algorithm=algorithm, wavelets=1)
        assert r.overhead + r.compute + r.communication + r.waiting == pytest.approx(r.cycles)
        return r.cycles, r.overhead, r.dsd_ops

    assert run((4, 4)) == (158, 110, 6) and run((2, 2)) == (138, 110, 6) and run((1, 8)) == (65, 30, 3)
    assert run((4, 4), "chain") == (69, 20, 2)
    assert load_hardware("wse3").fabric.reroute_colours == 5
    assert load_hardware("wse2").fabric.reroute_colours == 0
