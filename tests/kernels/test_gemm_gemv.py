"""GEMM and GEMV on tiny8 (fp16: 4 lanes, 2 values a wavelet, T_R = 2, hop 1), each expected value derived
by hand from docs/model.md §10: compute(F FMACs) = ⌈F / 4⌉ (the SRAM ports allow exactly 4 fp16 FMACs a
cycle), step(d) = 5 + d, double-buffered steps take max(compute, next communication)."""

from __future__ import annotations

import pytest

from wsesim.config.loader import load_hardware
from wsesim.kernels import kernel_cost, run_kernel

HW = load_hardware("tiny8")


def gemm(algorithm: str, grid: tuple[int, int], shape: tuple[int, int, int] = (8, 8, 8)) -> float:
    r = run_kernel(HW, "gemm", *grid, dtype="fp16", algorithm=algorithm, shape=shape)
    assert r.feasible, r.reason
    assert r.compute + r.communication + r.waiting == pytest.approx(r.cycles)
    return r.cycles


def test_summa_by_hand() -> None:
    """8×8×8. 4×4: blocks 2×2, panels of width ⌈8/4⌉ = 2, 4 steps; a step's panels are 2 + 2 wavelets
    and its farthest receiver max(o, 3 − o) = 3, 2, 2, 3 hops away: communication 4 + 5 + d = 12, 11,
    11, 12; compute ⌈8/4⌉ = 2 a step. 12 + (11 − 2) + (11 − 2) + (12 − 2) + 4 · 2 = 48.
    2×2: blocks 4×4, 2 steps of 8 + 8 wavelets over 1 hop (22) and 64 FMACs (16): 22 + 6 + 32 = 60.
    1×8: blocks 8×1, 8 steps of width 1; B's panel is local (one row), A's is 8 values = 4 wavelets
    from column s, farthest max(s, 7 − s): 9 + d = 16, 15, 14, 13, 13, 14, 15, 16; compute 2 a step:
    16 + (13 + 12 + 11 + 11 + 12 + 13 + 14) + 16 = 118."""
    assert gemm("summa", (4, 4)) == 48
    assert gemm("summa", (2, 2)) == 60
    assert gemm("summa", (1, 8)) == 118


def test_cannon_and_meshgemm_by_hand() -> None:
    """8×8×8 on 4×4: blocks of 2×2 = 2 wavelets. Cannon's skew: the busiest link carries 2 blocks (row
    2: links 1→2 east), 4 wavelets, as many as a ramp takes (2 + 2), longest path 3 hops: 4 + 8 = 12.
    Then 4 steps of compute 2; shifts of 2 + 2 wavelets whose wrap-around is 3 hops: 4 + 8 = 12 each,
    3 of them exposed by 10: 12 + 8 + 30 = 50. MeshGEMM on the folded ring 0, 2, 3, 1: its skew's
    busiest link also carries 2 blocks (12), its shifts at most 2 hops: 4 + 7 = 11: 12 + 8 + 27 = 47.
    2×2: blocks 4×4 = 8 wavelets; skew 16 (the ramp) + 6 = 22; 2 steps of 16, one shift of 16 + 6 = 22:
    22 + 32 + 6 = 60 for both (the folded ring of 2 is the ring)."""
    assert gemm("cannon", (4, 4)) == 50
    assert gemm("meshgemm", (4, 4)) == 47
    assert gemm("cannon", (2, 2)) == 60
    assert gemm("meshgemm", (2, 2)) == 60


@pytest.mark.parametrize("algorithm", ["cannon", "meshgemm"])
def test_cannon_family_on_a_line_is_infeasible_with_a_reason(algorithm: str) -> None:
    r = run_kernel(HW, "gemm", 1, 8, dtype="fp16", algorithm=algorithm, shape=(8, 8, 8))
    assert not r.feasible and "square grid" in r.reason


def test_gemv_by_hand() -> None:
    """1×16×16 on 4×4: a 4×4 block, 16 FMACs = 4 cycles; the row allreduces 4 values = 2 wavelets.
    pipeline: chain 2 + 6·3 = 20, multicast back + step(3) = 8: 4 + 28 = 32. meshgemv (groups of 2:
    1→0, 3→2→0): PE 2 done 7, 8; the root gets 1's at 6, 7 and 2's at 13, 14 → 15; + 8 + 4 = 27.
    2×2 (an 8×8 block: 64 FMACs = 16; 4 wavelets over one hop, 4 + 6, back 6): 32 for both.
    1×16×2 on 1×8 (2×2 blocks: 1 cycle; one wavelet): pipeline 1 + 42 + 12 + 1 = 56; meshgemv (the
    two-phase reduce of 1×8 above, 23) + 12 + 1 = 36."""
    def gemv(a: str, grid: tuple[int, int], shape: tuple[int, int, int]) -> float:
        return run_kernel(HW, "gemv", *grid, dtype="fp16", algorithm=a, shape=shape).cycles

    assert gemv("pipeline", (4, 4), (1, 16, 16)) == 32
    assert gemv("meshgemv", (4, 4), (1, 16, 16)) == 27
    assert gemv("pipeline", (2, 2), (1, 16, 16)) == gemv("meshgemv", (2, 2), (1, 16, 16)) == 32
    assert gemv("pipeline", (1, 8), (1, 16, 2)) == 56
    assert gemv("meshgemv", (1, 8), (1, 16, 2)) == 36


def test_the_cost_front_door_contract() -> None:
    """``kernel_cost``: cached per argument tuple (the shape rounded to whole blocks first); cycles and
    their split; infeasible says why; bad input is a ConfigError."""
    from wsesim.config.errors import ConfigError

    def gemm(m: int, k: int, n: int, rows: int, cols: int, dtype: str, algorithm: str = "summa"):
        return kernel_cost(HW, "gemm", rows, cols, dtype=dtype, algorithm=algorithm, shape=(m, k, n))

    first = gemm(8, 8, 8, 4, 4, "fp16")
    assert (first.cycles, first.bound) == (48.0, "communication") and first.feasible
    assert gemm(8, 8, 8, 4, 4, "bf16") == first  # bf16 runs on the fp16 lanes: the same entry
    hits = kernel_cost.cache_info().hits
    assert gemm(7, 8, 5, 4, 4, "fp16") == first  # 7 x 5 is 2 x 2 blocks per PE on 4 x 4, like 8 x 8
    assert kernel_cost.cache_info().hits == hits + 1
    square = gemm(8, 8, 8, 1, 8, "fp16", "meshgemm")
    assert not square.feasible and square.reason.startswith("meshgemm needs a square grid")
    big = gemm(256, 256, 256, 8, 8, "fp16")  # 32×32 blocks: 8 steps of 8,192 cycles
    assert big.bound == "compute" and big.cycles >= 256**3 / 64 / 4
    with pytest.raises(ConfigError, match="summa, cannon, meshgemm"):
        gemm(8, 8, 8, 4, 4, "fp16", "strassen")
    with pytest.raises(ConfigError, match="within the tiny8 mesh"):
        gemm(8, 8, 8, 9, 4, "fp16")


def test_waferllm_contrast_at_720() -> None:
    """4096³ fp16 on 720×720 WSE-2 PEs: MeshGEMM above 70 % of peak, SUMMA and Cannon below 50 %."""
    hw = load_hardware("wse2")
    eff = {a: run_kernel(hw, "gemm", 720, 720, algorithm=a, shape=(4096,) * 3).efficiency
           for a in ("summa", "cannon", "meshgemm")}
    assert eff["meshgemm"] > 0.7 > 0.5 > max(eff["summa"], eff["cannon"])
