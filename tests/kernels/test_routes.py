"""The route limit (wsesim.kernels.routes): the paths a PE's router holds at once, each count derived by
hand from the schedule, and a schedule that needs more than ``fabric.route_paths`` is infeasible with
the reason (a result, not a crash), as with the colours."""

from __future__ import annotations

import pytest

from wsesim.config.loader import load_hardware
from wsesim.kernels import run_kernel

HW = load_hardware("tiny8")
WSE2 = load_hardware("wse2")


def routes(kind: str, grid: tuple[int, int], algorithm: str, hw=HW) -> int:
    shape = {"gemm": (8, 8, 8), "gemv": (1, 16, 16)}.get(kind)
    return run_kernel(hw, kind, *grid, algorithm=algorithm, shape=shape).routes


def test_routes_by_hand() -> None:
    """Star over 1×8: every PE's stream passes PE 1's router and ends at the root's: 7. Chain: a PE's
    input and output, 2; on 4×4 a first-column router also ends its row's stream from column 1: 1 + 2.
    Binary tree over 1×8: router 0 ends 1 → 0, 2 → 0, 4 → 0; router 4 is on 4 → 0, 5 → 4, 6 → 4: 3;
    its allreduce adds the multicast back: 4. Ring (folded 0, 2, 4, 6, 7, 5, 3, 1): router 2 is on
    0 → 2, 2 → 4 and 3 → 1: 3. All-to-all over 8: router x holds the eastward multicasts of PEs 0 … x
    and the westward of x … 7: 9; over 2: 2. Broadcast: the one multicast, 1. SUMMA: a row's and a
    column's panel for two steps, 4 (2 on one row). Cannon 4×4: a router holds the shift's j → j − 1
    paths into and out of it and the wrap 0 → 3 passing, in its row and its column: 6; MeshGEMM's folded
    ring also 3 a line. GEMV pipeline: the chain's 2 and the multicast back: 3."""
    assert routes("reduce", (1, 8), "star") == 7
    assert routes("reduce", (1, 8), "chain") == 2
    assert routes("reduce", (4, 4), "chain") == 3
    assert routes("reduce", (1, 8), "tree") == 3
    assert routes("allreduce", (1, 8), "tree") == 4
    assert routes("allreduce", (1, 8), "ring") == 3
    assert routes("alltoall", (1, 8), "transpose") == 9
    assert routes("alltoall", (2, 2), "transpose") == 2
    assert routes("broadcast", (4, 4), "multicast") == 1
    assert routes("gemm", (4, 4), "summa") == 4 and routes("gemm", (1, 8), "summa") == 2
    assert routes("gemm", (4, 4), "cannon") == routes("gemm", (4, 4), "meshgemm") == 6
    assert routes("gemv", (4, 4), "pipeline") == 3


def test_a_star_over_a_long_row_exceeds_the_route_code() -> None:
    """WSE-2's 5-bit route code holds 32 paths. A star over 33 PEs needs 32 at PE 1's router (the 31
    streams from PEs 2 … 32 passing, and its own): it fits; over 34, 33: infeasible, with the reason,
    and the cycles still those of the schedule."""
    fits = run_kernel(WSE2, "reduce", 1, 33, dtype="fp32", algorithm="star")
    assert (fits.routes, fits.feasible) == (32, True)
    over = run_kernel(WSE2, "reduce", 1, 34, dtype="fp32", algorithm="star")
    assert (over.routes, over.feasible) == (33, False) and over.cycles > fits.cycles
    assert over.reason == "needs 33 routes at its busiest router, more than the 32 of wse2 (fabric.route_paths)"
    few = HW.model_copy(update={"fabric": HW.fabric.model_copy(update={"route_paths": 6})})
    assert not run_kernel(few, "reduce", 1, 8, dtype="fp32", algorithm="star").feasible
    assert run_kernel(few, "reduce", 1, 8, dtype="fp32", algorithm="chain").feasible


def test_the_tree_allreduce_over_the_wafer_fits_and_the_skew_is_a_note() -> None:
    """Tree allreduce over 750 × 994: router (0, 0) ends the paths from columns 1, 2, 4, …, 512 and rows
    1, 2, …, 512 (10 each) and starts the multicast: 21. MeshGEMM on 720 × 720 fits by its shifts (6);
    its skew as direct paths would not, which a note says."""
    r = run_kernel(WSE2, "allreduce", 750, 994, dtype="fp32", algorithm="tree")
    assert (r.routes, r.feasible) == (21, True)
    g = run_kernel(WSE2, "gemm", 720, 720, algorithm="meshgemm", shape=(4096,) * 3)
    assert (g.routes, g.feasible) == (6, True) and any("the skew as direct paths" in n for n in g.notes)
    assert not any("skew as direct" in n for n in run_kernel(HW, "gemm", 4, 4, algorithm="cannon",
                                                               shape=(8, 8, 8)).notes)


@pytest.mark.parametrize("n", [2, 3, 8])
def test_alltoall_routes_are_n_plus_one(n: int) -> None:
    """Inside the line n + 1 (x + 1 eastward, n − x westward); a line of 2 only its ends: 2."""
    assert routes("alltoall", (1, n), "transpose") == (n + 1 if n > 2 else 2)
