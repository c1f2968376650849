"""The weight-streaming GEMM (docs/model.md §10.7) on tiny8, each expected value derived by hand from the
formula in ``wsesim/kernels/stream.py`` and the instruction model of ``wsesim/kernels/instructions.py``:
fp16 values (2 a wavelet) with fp32 partial sums (one a wavelet), so the FMAC is ``@fmachs`` on
``pe.simd_width_mixed`` = 2 lanes (a row of L elements ⌈L/2⌉ cycles; its 6 B read and 4 B written per
element fit the 16 B / 8 B ports at 2 a cycle), the partial sums' add 2 lanes too; I/O 4 B a cycle,
latency(d) = 4 + d, step(d) = 5 + d; instruction_issue 0 unless a test overrides it; 8 microthreads.

    per output, one task: the FMAC (ONE operation over k arriving weights × m tokens, k wavelets(k) in),
    the add (m partial sums in), the send (m out); issue = (1 + 3) · instruction_issue
    pe = max(issue, fmac + add, wavelets in, wavelets out) on microthreads; pace = max(pe, source, sink)
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
    output. The FMAC: 2 rows of 8, 2 · ⌈8/2⌉ = 8 cycles, 1 wavelet in; the add of 8: 4 cycles, 8 wavelets
    in; the send: 8 out. pe = max(0, 12, 9, 8) = 12; the row's 16 weights at 2 B over the 4 B/cycle edge
    = 8; pace 12. One row: no fill; drain around the folded ring of 8: 7 · step(2) + 8 = 57.
    4 · 12 + 57 = 105; compute 4 · 12 = 48. Three DSD operations an output, whatever k: 12 in all; the
    microthreads save (8 + 8 + 8) − 12 = 12 cycles an output."""
    r = run("stream", (1, 8), (8, 16, 4))
    assert r.cycles == 105
    assert r.compute == 48 and r.overhead == 0
    assert r.dsd_ops == 12 and r.dsd_elements == 4 * (16 + 8 + 8) and r.microthread_saved == 4 * 12


def test_two_by_two_by_hand_issue_bound_and_serialised() -> None:
    """8 × 8 × 4 on 2 × 2, staged: m = 4, k = 4. The FMAC 4 · ⌈4/2⌉ = 8 (2 wavelets in), the add 2 (4
    in), the send (4 out): pe = max(0, 10, 6, 4) = 10. fill latency(1) = 5; drain 1 · step(1) + 4 = 10:
    5 + 4 · 10 + 10 = 55. With instruction_issue = 3 the task's activation and its 3 issues take 12 > 10:
    5 + 48 + 10 = 63, 2 exposed issue cycles an output (8). Serialised, each operation waits for the one
    before: max(8, 2) + max(2, 4) + 4 = 16: 5 + 64 + 10 = 79."""
    assert run("stream", (2, 2), (8, 8, 4), staged=True).cycles == 55
    r = run("stream", (2, 2), (8, 8, 4), hw=_pe(instruction_issue_cycles=3.0), staged=True)
    assert (r.cycles, r.overhead) == (63, 8) and "issue-bound" in r.notes[0]
    assert run("stream", (2, 2), (8, 8, 4), hw=_pe(reduction="serialised"), staged=True).cycles == 79


def test_too_few_microthreads_serialise() -> None:
    """With 2 microthreads the task's 3 asynchronous operations cannot all be in flight: they run as the
    serialised ones do (79 on 2 × 2, above)."""
    assert run("stream", (2, 2), (8, 8, 4), hw=_pe(microthreads=2), staged=True).cycles == 79


def test_four_by_four_source_bound() -> None:
    """4 × 64 × 2 on 4 × 4 from the edge: m = 1, k = 16: the FMAC 16 rows of ⌈1/2⌉ = 16 (8 wavelets in),
    the add 1 (1 in), the send 1: pe 17; the row's 64 weights are 128 B, 32 cycles at 4 B/cycle: pace 32
    (the edge). fill latency(3) = 7, drain 3 · step(2) + 1 = 22: 7 + 2 · 32 + 22 = 93. Staged, the pace
    is the PE's: 7 + 34 + 22 = 63."""
    r = run("stream", (4, 4), (4, 64, 2))
    assert r.cycles == 93 and "source-bound" in r.notes[0]
    assert run("stream", (4, 4), (4, 64, 2), staged=True).cycles == 63


def test_four_by_four_one_issue_per_weight_row() -> None:
    """The same 4 × 64 × 2 staged with instruction_issue = 7 (WSE-2's): 16 weights a PE per output are ONE
    FMAC operation, so an output issues 4 · 7 = 28 (the activation and 3 operations), not 16 AXPYs' 112:
    pe = max(28, 17, 9, 1) = 28; 7 + 56 + 22 = 85, of which 2 · (28 − 17) = 22 exposed issue."""
    r = run("stream", (4, 4), (4, 64, 2), hw=_pe(instruction_issue_cycles=7.0), staged=True)
    assert (r.cycles, r.overhead, r.dsd_ops) == (85, 22, 6)


def test_weight_gradient_on_four_by_four_by_hand() -> None:
    """dW = Xᵀ·dY as 16 × 32 × 8 (hidden × tokens × N) on 4 × 4, staged: m' = 16/4 = 4 hidden a PE, k' =
    32/4 = 8 tokens. The FMAC as 8 rows of 4 (8 · 2 = 16) ties 4 rows of 8 (4 · 4 = 16), 4 wavelets in;
    the add 2 (4 in), the send 4 out: pe = max(0, 18, 8, 4) = 18. fill along the row latency(3) = 7;
    drain down the columns 3 · step(2) + 4 = 25: 7 + 8 · 18 + 25 = 176. From the edge the gradient's 16
    values leave at 32 B / 4 = 8 cycles an output, under the pace: 176 again."""
    assert run("stream-dw", (4, 4), (16, 32, 8), staged=True).cycles == 176
    assert run("stream-dw", (4, 4), (16, 32, 8)).cycles == 176


def test_fp32_runs_on_the_fp32_fmac() -> None:
    """fp32 on 2 × 2, 8 × 8 × 4 staged: @fmacs at 1 a cycle (no SIMD mode), m = k = 4: 16 cycles, 4
    wavelets in; the fp32 add on 2 lanes: 2, 4 in; send 4 out: pe = max(0, 18, 8, 4) = 18:
    5 + 4 · 18 + 10 = 87."""
    r = run_kernel(HW, "gemm", 2, 2, dtype="fp32", algorithm="stream", shape=(8, 8, 4), staged=True)
    assert r.cycles == 87


def test_one_pe_is_its_fmacs() -> None:
    """1 × 1, 4 × 8 × 3 staged: one FMAC of 8 rows × ⌈4/2⌉ a output, no reduction, no fill: 3 · 16 = 48."""
    assert run("stream", (1, 1), (4, 8, 3), staged=True).cycles == 48


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
