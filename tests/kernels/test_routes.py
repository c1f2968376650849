"""The colour limit (wsesim.kernels.routes): the colours a schedule's busiest router holds at once, a
colour's route being one configuration however many streams merge into it; each count derived by hand,
and a schedule that needs more than ``fabric.colours`` is infeasible with the reason (a result, not a
crash)."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.loader import load_hardware
from wsesim.kernels import run_kernel
from wsesim.kernels.routes import line_colours

HW = load_hardware("tiny8")
WSE2 = load_hardware("wse2")


def colours(kind: str, grid: tuple[int, int], algorithm: str, hw=HW) -> int:
    shape = {"gemm": (8, 8, 8), "gemv": (1, 16, 16)}.get(kind)
    return run_kernel(hw, kind, *grid, algorithm=algorithm, shape=shape, dtype="fp32").colours


def test_line_colours_by_hand() -> None:
    """Chain over 4 (1 → 0, 2 → 1, 3 → 2): spans [0, 1], [1, 2], [2, 3]; routers 1 and 2 lie in two:
    1, 2, 2, 1. Star over 4: one group (every stream into PE 0), span [0, 3]: 1 everywhere. Streams into
    PE 0 from 1 and 3 and into PE 1 from 2: spans [0, 3] and [1, 2]: 1, 2, 2, 1."""
    assert line_colours(4, [1, 2, 3], [0, 1, 2]).tolist() == [1, 2, 2, 1]
    assert line_colours(4, [1, 2, 3], [0, 0, 0]).tolist() == [1, 1, 1, 1]
    assert line_colours(4, np.array([1, 3, 2]), np.array([0, 0, 1])).tolist() == [1, 2, 2, 1]


def test_colours_by_hand() -> None:
    """Chain over 1×4 and 1×8: a PE's input and output alternate, 2; on 4×4 a first-column router holds
    its row's group at the root (1) and the column chain's two: 3. Star over 1×8: 1. Binary tree over
    1×8: groups into 0 {1, 2, 4} [0, 4], into 2 {3} [2, 3], into 4 {5, 6} [4, 6], into 6 {7} [6, 7]: at
    most two over a router, 2; its allreduce adds the multicast back: 3. Two-phase over 1×8 (groups of
    3: heads 0, 3, 6): [0, 3], [1, 2], [3, 6], [4, 5], [6, 7]: 2. Ring (folded 0, 2, 4, 6, 7, 5, 3, 1):
    router 2 lies in 0 → 2, 2 → 4 and 3 → 1: 3; on 4×4 the rows' and the columns' rings: 6. All-to-all:
    one colour per direction of travel, 2 on a line, 4 on a grid. Broadcast 1. SUMMA 4 (2 on one row).
    Cannon 4×4: j → j − 1 and the wrap 0 → 3 over the line, 3, in the row and the column: 6; MeshGEMM's
    folded ring 3 too. GEMV pipeline: the chain's 2 and the multicast back: 3."""
    assert colours("reduce", (1, 4), "chain") == colours("reduce", (1, 8), "chain") == 2
    assert colours("reduce", (4, 4), "chain") == 3
    assert colours("reduce", (1, 8), "star") == 1
    assert colours("reduce", (1, 8), "tree") == 2 and colours("allreduce", (1, 8), "tree") == 3
    assert colours("reduce", (1, 8), "two-phase") == 2
    assert colours("allreduce", (1, 8), "ring") == 3 and colours("allreduce", (4, 4), "ring") == 6
    assert colours("alltoall", (1, 8), "transpose") == 2 and colours("alltoall", (8, 8), "transpose") == 4
    assert colours("broadcast", (4, 4), "multicast") == 1
    assert colours("gemm", (4, 4), "summa") == 4 and colours("gemm", (1, 8), "summa") == 2
    assert colours("gemm", (4, 4), "cannon") == colours("gemm", (4, 4), "meshgemm") == 6
    assert colours("gemv", (4, 4), "pipeline") == 3


def test_a_star_over_512_pes_is_one_colour() -> None:
    """Luczynski et al.'s star over 512 PEs: every stream merges into the root's one colour, each router
    switched from its ramp to what passes: 1 of 24, feasible on a row or a column."""
    for grid in ((1, 512), (512, 1)):
        r = run_kernel(WSE2, "reduce", *grid, dtype="fp32", algorithm="star")
        assert (r.colours, r.feasible) == (1, True)


def test_when_colours_run_out_the_kernel_is_infeasible() -> None:
    """With 2 colours a router, the 4×4 chain (3 at a first-column router) and the 1×8 ring (3) cannot be
    routed, the reason says so and the cycles are still the schedule's; the 1×8 chain (2) fits."""
    few = HW.model_copy(update={"fabric": HW.fabric.model_copy(update={"colours": 2})})
    r = run_kernel(few, "reduce", 4, 4, dtype="fp32", algorithm="chain")
    assert not r.feasible and r.cycles > 0
    assert r.reason == ("its busiest router needs 3 colours (wsesim.kernels.routes), over its budget of 2 "
                        "(fabric.colours of tiny8)")
    assert not run_kernel(few, "allreduce", 1, 8, dtype="fp32", algorithm="ring").feasible
    assert run_kernel(few, "reduce", 1, 8, dtype="fp32", algorithm="chain").feasible


def test_the_tree_allreduce_over_the_wafer_fits_and_the_skew_is_a_note() -> None:
    """Tree allreduce over 750 × 994: the column's nested spans put 6 over one router of its 750, its
    row's group at the root 1, the multicast back 1: 8. MeshGEMM on 720 × 720 fits by its shifts (6);
    its skew as direct paths would not, which a note says."""
    r = run_kernel(WSE2, "allreduce", 750, 994, dtype="fp32", algorithm="tree")
    assert (r.colours, r.feasible) == (8, True)
    g = run_kernel(WSE2, "gemm", 720, 720, algorithm="meshgemm", shape=(4096,) * 3)
    assert (g.colours, g.feasible) == (6, True) and any("the skew as direct paths" in n for n in g.notes)
    assert not any("skew as direct" in n for n in run_kernel(HW, "gemm", 4, 4, algorithm="cannon",
                                                               shape=(8, 8, 8)).notes)


@pytest.mark.parametrize("grid", [(32, 32), (64, 64), (750, 994)])
def test_alltoall_fits_by_the_fabrics_rule(grid: tuple[int, int]) -> None:
    """All-to-all on 32×32 and larger: 4 colours (east, west, south, north), as ``wsesim fabric`` counts
    the same pattern, and a note names the shared rule."""
    r = run_kernel(WSE2, "alltoall", *grid, dtype="fp32")
    assert (r.colours, r.feasible) == (4, True)
    assert any("wsesim.fabric.colours" in n for n in r.notes)
