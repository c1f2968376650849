"""The weight-streaming GEMM (docs/model.md §10.7) on tiny8, each expected value derived by hand from the
formula in ``wsesim/kernels/stream.py``: fp16 (2 values a wavelet, 4 lanes, an instruction of L values
⌈L/4⌉ cycles), partial sums 32 bit (one a wavelet), I/O 4 B a cycle, latency(d) = 4 + d, step(d) = 5 + d,
instruction_issue 0 unless a test overrides it.

    per output: pe = max(fmacs + add, wr) (overlapped), pace = max(pe, wavelets(red), source, sink)
    cycles = latency(L_b − 1) + N · pace + (L_r − 1) · step(h) + wr   (h = 2 on a ring of more than 2)
"""

from __future__ import annotations

import pytest

from wsesim.config.loader import load_hardware
from wsesim.kernels import kernel_cost, run_kernel
from wsesim.kernels.kinds import GemmAlgorithm, algorithms

HW = load_hardware("tiny8")


def _pe(**update: object):
    return HW.model_copy(update={"pe": HW.pe.model_copy(update=update)})


def run(algorithm: str, grid: tuple[int, int], shape: tuple[int, int, int], hw=HW, staged: bool = False):
    r = run_kernel(hw, "gemm", *grid, dtype="fp16", algorithm=algorithm, shape=shape, staged=staged)
    assert r.feasible, r.reason
    assert r.overhead + r.compute + r.communication + r.waiting == pytest.approx(r.cycles)
    assert r.flops == 2 * shape[0] * shape[1] * shape[2]
    return r


def test_listed_as_gemm_algorithms() -> None:
    assert {GemmAlgorithm.STREAM, GemmAlgorithm.STREAM_DW} <= set(algorithms("gemm"))


def test_one_row_of_eight_by_hand() -> None:
    """8 × 16 × 4 on 1 × 8, weights from the edge: m = 8 tokens a PE, k = 16/8 = 2 weights a column per
    output. fmacs: 2 AXPYs of 8, 2 cycles each = 4; add of 8 = 2; wr = 8 partial sums = 8 wavelets;
    pe = max(6, 8) = 8; the row's 16 weights at 2 B over the 4 B/cycle edge = 8; pace 8. One row: no
    fill; drain around the folded ring of 8: 7 · step(2) + 8 = 57. 4 · 8 + 57 = 89; compute 4 · 6."""
    r = run("stream", (1, 8), (8, 16, 4))
    assert r.cycles == 89
    assert r.compute == 24 and r.overhead == 0


def test_two_by_two_by_hand_and_serialised() -> None:
    """8 × 8 × 4 on 2 × 2, staged: m = 4, k = 4. fmacs 4 AXPYs of 4 = 4; add 1; wr = 4; pe = max(5, 4)
    = 5; 4 weights = 2 wavelets into a column; pace 5. fill latency(1) = 5; drain 1 · step(1) + 4 = 10:
    5 + 4 · 5 + 10 = 35. Serialised, the add waits for its 4 wavelets: 4 + max(1, 4) = 8: 5 + 32 + 10 = 47."""
    assert run("stream", (2, 2), (8, 8, 4), staged=True).cycles == 35
    assert run("stream", (2, 2), (8, 8, 4), hw=_pe(reduction="serialised"), staged=True).cycles == 47


def test_four_by_four_source_bound() -> None:
    """4 × 64 × 2 on 4 × 4 from the edge: m = 1, k = 16: fmacs 16 AXPYs of 1 = 16, add 1, wr 1: pe 17; the
    row's 64 weights are 128 B, 32 cycles at 4 B/cycle: pace 32 (the edge). fill latency(3) = 7, drain
    3 · step(2) + 1 = 22: 7 + 2 · 32 + 22 = 93. Staged, the pace is the PE's: 7 + 34 + 22 = 63."""
    r = run("stream", (4, 4), (4, 64, 2))
    assert r.cycles == 93 and "source-bound" in r.notes[0]
    assert run("stream", (4, 4), (4, 64, 2), staged=True).cycles == 63


def test_weight_gradient_on_four_by_four_by_hand() -> None:
    """dW = Xᵀ·dY as 16 × 32 × 8 (hidden × tokens × N) on 4 × 4, staged: m' = 16/4 = 4 hidden a PE, k' =
    32/4 = 8 tokens. 8 AXPYs of 4 (8) tie 4 dot products of 8 (8); add 1, wr 4: pe 9; dY's 8 values = 4
    wavelets along a row; pace 9. fill along the row latency(3) = 7; drain down the columns 3 · step(2) + 4
    = 25: 7 + 72 + 25 = 104. With instruction_issue = 3 the dot form wins: 4 · 2 + 4 · 3 = 20 against
    8 + 24 = 32; add 1 + 3; pe 24: 7 + 192 + 25 = 224, overhead 8 · (12 + 3) = 120. From the edge the
    gradient's 16 values leave at 32 B / 4 = 8 cycles an output, under the pace: 104 again."""
    assert run("stream-dw", (4, 4), (16, 32, 8), staged=True).cycles == 104
    r = run("stream-dw", (4, 4), (16, 32, 8), hw=_pe(instruction_issue_cycles=3.0), staged=True)
    assert (r.cycles, r.overhead) == (224, 120)
    assert run("stream-dw", (4, 4), (16, 32, 8)).cycles == 104


def test_one_pe_is_its_fmacs() -> None:
    """1 × 1, 4 × 8 × 3 staged: 8 AXPYs of 4 a output, no reduction, no fill: 3 · 8 = 24 cycles."""
    assert run("stream", (1, 1), (4, 8, 3), staged=True).cycles == 24


def test_sram_limit_is_a_reason() -> None:
    """A block of 8,192 × 8,192 fp16 values on one PE cannot fit 36 KiB: infeasible, with the reason."""
    r = run_kernel(HW, "gemm", 1, 1, dtype="fp16", algorithm="stream", shape=(8192, 8192, 2))
    assert not r.feasible and "B per PE" in r.reason


def test_kernel_cost_rounds_tokens_to_whole_blocks() -> None:
    """Cycles depend on the tokens only through ⌈M/R⌉ (and for the weight gradient ⌈K'/R⌉): 13 and 16
    tokens on 4 rows cost the same."""
    a = kernel_cost(HW, "gemm", 4, 4, dtype="fp16", algorithm="stream", shape=(13, 32, 8), staged=True)
    b = kernel_cost(HW, "gemm", 4, 4, dtype="fp16", algorithm="stream", shape=(16, 32, 8), staged=True)
    assert a.cycles == b.cycles
    c = kernel_cost(HW, "gemm", 4, 4, dtype="fp16", algorithm="stream-dw", shape=(16, 29, 8), staged=True)
    assert c.cycles == run("stream-dw", (4, 4), (16, 32, 8), staged=True).cycles


def test_links_carry_the_weights_and_the_partial_sums() -> None:
    """8 × 8 × 4 on 2 × 2: each column's south link carries 4 outputs × 2 wavelets = 8; the ring of two
    sends every output but the receiver's own (2 of 4 kept a column): 2 × 4 wavelets each way."""
    load = run("stream", (2, 2), (8, 8, 4), staged=True).link_map.load
    assert load[0, :, 2].tolist() == [8, 8] and load[1, :, 2].tolist() == [0, 0]  # south out of row 0
    assert load[:, 0, 0].tolist() == [8, 8] and load[:, 1, 1].tolist() == [8, 8]  # east out of col 0, west
