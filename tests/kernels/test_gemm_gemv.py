"""GEMM and GEMV on tiny8 (fp16: 4 lanes, 2 values a wavelet, T_R = 2, hop 1), each expected value derived
by hand from docs/model.md §10: compute is counted per vector instruction, an instruction of L values
taking ⌈L / 4⌉ cycles (the SRAM ports allow exactly 4 fp16 FMACs a cycle), so short ones round up each;
a GEMV PE with a k×n block issues k instructions of n; a GEMM step C[bm×bn] += A[bm×k]·B[k×bn] is k·bn
instructions of bm (and one more issue for the step's task). step(d) = 5 + d, double-buffered steps take
max(compute, next communication), an allreduce is its reduce and then its multicast (+ B + step(d)).
tiny8's instruction_issue is 0 cycles: no overhead unless a test overrides it."""

from __future__ import annotations

import pytest

from wsesim.config.loader import load_hardware
from wsesim.kernels import kernel_cost, run_kernel

HW = load_hardware("tiny8")


def gemm(algorithm: str, grid: tuple[int, int], shape: tuple[int, int, int] = (8, 8, 8)) -> float:
    r = run_kernel(HW, "gemm", *grid, dtype="fp16", algorithm=algorithm, shape=shape)
    assert r.feasible, r.reason
    assert r.overhead == 0 and r.overhead + r.compute + r.communication + r.waiting == pytest.approx(r.cycles)
    return r.cycles


def test_summa_by_hand() -> None:
    """8×8×8. 4×4: blocks 2×2, panels of width ⌈8/4⌉ = 2, 4 steps; a step's panels are 2 + 2 wavelets
    and its farthest receiver max(o, 3 − o) = 3, 2, 2, 3 hops away: communication 4 + 5 + d = 12, 11,
    11, 12; compute k·bn = 2·2 = 4 instructions of bm = 2 values, ⌈2/4⌉ = 1 each: 4 a step (8 FMACs,
    not ⌈8/4⌉ = 2). 12 + (11 − 4) + (11 − 4) + (12 − 4) + 4 · 4 = 50.
    2×2: blocks 4×4, 2 steps of 8 + 8 wavelets over 1 hop (22) and 4·4 = 16 instructions of 4 values
    (16): 22 + 6 + 32 = 60.
    1×8: blocks 8×1, 8 steps of width 1; B's panel is local (one row), A's is 8 values = 4 wavelets
    from column s, farthest max(s, 7 − s): 9 + d = 16, 15, 14, 13, 13, 14, 15, 16; compute one
    instruction of 8 values, 2 a step: 16 + (13 + 12 + 11 + 11 + 12 + 13 + 14) + 16 = 118."""
    assert gemm("summa", (4, 4)) == 50
    assert gemm("summa", (2, 2)) == 60
    assert gemm("summa", (1, 8)) == 118


def test_cannon_and_meshgemm_by_hand() -> None:
    """8×8×8 on 4×4: blocks of 2×2 = 2 wavelets. Cannon's skew: the busiest link carries 2 blocks (row
    2: links 1→2 east), 4 wavelets, as many as a ramp takes (2 + 2), longest path 3 hops: 4 + 8 = 12.
    Then 4 steps of compute 4 (k·bn = 4 instructions of bm = 2 values, 1 cycle each); shifts of 2 + 2
    wavelets whose wrap-around is 3 hops: 4 + 8 = 12 each, 3 of them exposed by 12 − 4 = 8: 12 + 16 + 24
    = 52. MeshGEMM on the folded ring 0, 2, 3, 1: its skew's busiest link also carries 2 blocks (12),
    its shifts at most 2 hops: 4 + 7 = 11, exposed by 7: 12 + 16 + 21 = 49.
    2×2: blocks 4×4 = 8 wavelets; skew 16 (the ramp) + 6 = 22; 2 steps of 16 (16 instructions of 4),
    one shift of 16 + 6 = 22: 22 + 32 + 6 = 60 for both (the folded ring of 2 is the ring)."""
    assert gemm("cannon", (4, 4)) == 52
    assert gemm("meshgemm", (4, 4)) == 49
    assert gemm("cannon", (2, 2)) == 60
    assert gemm("meshgemm", (2, 2)) == 60


@pytest.mark.parametrize("algorithm", ["cannon", "meshgemm"])
def test_cannon_family_on_a_line_is_infeasible_with_a_reason(algorithm: str) -> None:
    r = run_kernel(HW, "gemm", 1, 8, dtype="fp16", algorithm=algorithm, shape=(8, 8, 8))
    assert not r.feasible and "square grid" in r.reason


def test_gemv_by_hand() -> None:
    """1×16×16 on 4×4: a 4×4 block, 4 instructions of 4 values = 4 cycles; the row allreduces 4 values
    = 2 wavelets. pipeline: chain 2 + 6·3 = 20, then the multicast back, B + step(3) = 2 + 8 = 10: 4 + 30
    = 34. meshgemv (K-tree, groups of 2, roots 1 and 3, line root 3): phase 1 PE 0's wavelets arrive at
    1 at 6, 7, done 7, 8 → T1 = 8; phase 2 root 1 streams from 8 (leaves 9, 10), 2 hops: arrives 15, 16,
    done 16, 17 → T2 = 17; scatter from 3 to 0: 2 + step(3) = 10 → 27; + 4 = 31.
    2×2 (an 8×8 block: 8 instructions of 8 values, 2 each = 16; 4 wavelets over one hop: reduce 4 + 6 =
    10, multicast back 4 + 6 = 10; the K-tree of 2 is one group rooted at 1, the same 10 + 10): 36 for
    both. 1×16×2 on 1×8 (2×2 blocks: 2 instructions of 2 values, ⌈2/4⌉ = 1 each: 2 cycles, not
    ⌈4/4⌉ = 1; one wavelet): pipeline 2 + 43 + (1 + 12) = 58; meshgemv (the K-tree of 8, groups of 4,
    tests/kernels/test_collectives.py: 35) + 2 = 37."""
    def gemv(a: str, grid: tuple[int, int], shape: tuple[int, int, int]) -> float:
        return run_kernel(HW, "gemv", *grid, dtype="fp16", algorithm=a, shape=shape).cycles

    assert gemv("pipeline", (4, 4), (1, 16, 16)) == 34
    assert gemv("meshgemv", (4, 4), (1, 16, 16)) == 31
    assert gemv("pipeline", (2, 2), (1, 16, 16)) == gemv("meshgemv", (2, 2), (1, 16, 16)) == 36
    assert gemv("pipeline", (1, 8), (1, 16, 2)) == 58
    assert gemv("meshgemv", (1, 8), (1, 16, 2)) == 37


def test_the_cost_front_door_contract() -> None:
    """``kernel_cost``: cached per argument tuple (the shape rounded to whole blocks first); cycles and
    their split; infeasible says why; bad input is a ConfigError."""
    from wsesim.config.errors import ConfigError

    def gemm(m: int, k: int, n: int, rows: int, cols: int, dtype: str, algorithm: str = "summa"):
        return kernel_cost(HW, "gemm", rows, cols, dtype=dtype, algorithm=algorithm, shape=(m, k, n))

    first = gemm(8, 8, 8, 4, 4, "fp16")  # test_summa_by_hand: 50, of which compute 16 < 25
    assert (first.cycles, first.compute, first.overhead, first.bound) == (50.0, 16.0, 0.0, "communication")
    assert first.feasible
    assert gemm(8, 8, 8, 4, 4, "bf16") == first  # bf16 runs on the fp16 lanes: the same entry
    hits = kernel_cost.cache_info().hits
    assert gemm(7, 8, 5, 4, 4, "fp16") == first  # 7 x 5 is 2 x 2 blocks per PE on 4 x 4, like 8 x 8
    assert kernel_cost.cache_info().hits == hits + 1
    square = gemm(8, 8, 8, 1, 8, "fp16", "meshgemm")
    assert not square.feasible and square.reason.startswith("meshgemm needs a square grid")
    big = gemm(256, 256, 256, 8, 8, "fp16")  # 32×32 blocks: 8 steps of 32·32 instructions of 32 (8 each)
    assert big.bound == "compute" and big.cycles >= 256**3 / 64 / 4
    with pytest.raises(ConfigError, match="summa, cannon, meshgemm"):
        gemm(8, 8, 8, 4, 4, "fp16", "strassen")
    with pytest.raises(ConfigError, match="within the tiny8 mesh"):
        gemm(8, 8, 8, 9, 4, "fp16")


def test_waferllm_contrast_at_720() -> None:
    """4096³ fp16 on 720×720 WSE-2 PEs: WaferLLM's "> 70 % computational efficiency" of MeshGEMM is the
    share of time its PEs compute (their instruction stream: issue and arithmetic), above SUMMA's and
    Cannon's, whose steps wait for paths across the grid (SUMMA's share, 58 %, is above WaferLLM's
    "below 50 %": docs/validation.md), and both far below 50 % of peak. As a share of peak MeshGEMM is far lower: a 6 × 6 block is 36 instructions of 6 values
    a step, 2 cycles on 4 lanes (75 % of them) and 7 to issue, so at most 6 · 2 / (4 · 9) = 33 % of peak
    while computing, and its communication leaves it below that."""
    hw = load_hardware("wse2")
    runs = {a: run_kernel(hw, "gemm", 720, 720, algorithm=a, shape=(4096,) * 3)
            for a in ("summa", "cannon", "meshgemm")}
    busy = {a: (r.compute + r.overhead) / r.cycles for a, r in runs.items()}
    assert busy["meshgemm"] > 0.7 and busy["meshgemm"] > busy["summa"] > busy["cannon"]
    assert max(runs["summa"].efficiency, runs["cannon"].efficiency) < 0.5  # of peak, as the table shows
    assert runs["meshgemm"].efficiency < 6 * 2 / (4 * 9)


def test_instruction_issue_adds_the_counted_issues() -> None:
    """``pe.instruction_issue_cycles`` = 10 on tiny8. GEMV 1×16×16 on 4×4: 4 FMAC instructions (one per
    x value) and the K-tree's 3 phases (pipeline: the reduce and the multicast, 2), issued one after
    another on the critical path: meshgemv 31 + 7·10 = 101, pipeline 34 + 6·10 = 94.
    SUMMA 8×8×8 on 4×4: 4 steps of k·bn + 1 = 2·2 + 1 = 5 issues: overhead 4·5·10 = 200. The issues are
    the PE's work, so a step now takes 4 + 50 = 54, which hides every next panel (11, 12 < 54): 12 + 4·54
    = 228 (50 + 200 less the 22 of panels the longer steps now hide). Cannon likewise: 4 steps of 5
    issues = 200; skew 12, steps 54 hide the shifts (12): 12 + 216 = 228."""
    hw = HW.model_copy(update={"pe": HW.pe.model_copy(update={"instruction_issue_cycles": 10.0})})

    def run(kind: str, algorithm: str, shape: tuple[int, int, int]):
        r = run_kernel(hw, kind, 4, 4, dtype="fp16", algorithm=algorithm, shape=shape)
        assert r.overhead + r.compute + r.communication + r.waiting == pytest.approx(r.cycles)
        return r.cycles, r.overhead

    assert run("gemv", "meshgemv", (1, 16, 16)) == (31 + 70, 70)
    assert run("gemv", "pipeline", (1, 16, 16)) == (34 + 60, 60)
    assert run("gemm", "summa", (8, 8, 8)) == (228, 4 * (2 * 2 + 1) * 10)
    assert run("gemm", "cannon", (8, 8, 8)) == (228, 200)


def test_meshgemv_turns_axis_once_a_gemv_where_the_code_re_routes() -> None:
    """WaferLLM's decode alternates its GEMVs' reduction axis (six turns a layer for six GEMVs), so each
    MeshGEMV pays one turn: with a 10-cycle issue and WSE-3's 5 re-routed colours, 1×16×16 on 4×4 takes
    101 (test_instruction_issue_adds_the_counted_issues) + 50 = 151; the vendor's pipelined GEMV, and a
    GEMV one PE wide (no allreduce), none."""
    hw = HW.model_copy(update={"pe": HW.pe.model_copy(update={"instruction_issue_cycles": 10.0}),
                               "fabric": HW.fabric.model_copy(update={"reroute_colours": 5})})

    def run(algorithm: str, grid: tuple[int, int]) -> tuple[float, float]:
        r = run_kernel(hw, "gemv", *grid, dtype="fp16", algorithm=algorithm, shape=(1, 16, 16))
        return r.cycles, r.overhead

    assert run("meshgemv", (4, 4)) == (151, 120)
    assert run("pipeline", (4, 4)) == (94, 60)
    assert run("meshgemv", (4, 1)) == run("pipeline", (4, 1))

