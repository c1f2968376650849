"""The SDK's instruction model (``wsesim/kernels/instructions.py``, docs/model.md §10.1) and the issues of
every kernel whose count it changed, on tiny8 with ``pe.instruction_issue`` set to 10 cycles (a round
number; tiny8 ships 0) on 1 × 8, 2 × 2 and 4 × 4 grids. Each expected value is derived by hand below.

tiny8: fp16 on 4 lanes (``@fmach``), 16-bit products into fp32 and fp32 adds on 2 (``@fmachs``,
``@fadds``), fp32 FMACs on 1; SRAM ports 16 B read and 8 B written a cycle; a 32-bit wavelet a cycle per
link; T_R = 2, one cycle a hop, so latency(d) = 4 + d and step(d) = 5 + d; 8 microthreads.

A DSD operation over ``rows`` × ``length`` elements: ONE issue, and rows · ⌈length / lanes⌉ cycles or its
operands' bytes over the ports, whichever is longer. A task: its activation (one issue) and an issue per
operation; on microthreads the instruction stream, the datapath and the ramp each way run side by side.
"""

from __future__ import annotations

import pytest

from wsesim.config.loader import load_hardware
from wsesim.kernels import run_kernel
from wsesim.kernels.instructions import DsdOp, dsd_op, microthreaded, send_op
from wsesim.kernels.lines import rotating_reduces
from wsesim.kernels.machine import Machine

TINY = load_hardware("tiny8")
ISSUE = 10.0


def _hw(**pe: object):
    return TINY.model_copy(update={"pe": TINY.pe.model_copy(update={"instruction_issue_cycles": ISSUE, **pe})})


HW = _hw()
M = Machine.of(HW, "fp16")


def run(kind: str, algorithm: str, grid: tuple[int, int], shape: tuple[int, int, int], **kw: object):
    r = run_kernel(HW, kind, *grid, dtype="fp16", algorithm=algorithm, shape=shape, **kw)
    assert r.feasible, r.reason
    assert r.overhead + r.compute + r.communication + r.waiting == pytest.approx(r.cycles)
    return r


# ------------------------------------------------------------------------------- one DSD operation


def test_a_dsd_operation_is_one_issue_however_many_elements() -> None:
    """``@fmach`` over 3 rows of 10: ⌈10/4⌉ = 3 cycles a row, 9 in all; its 30 elements read 4 B and
    write 2 B each, 120 / 16 = 7.5 → 8 and 60 / 8 = 7.5 → 8 cycles of the ports, under 9. One issue."""
    op = dsd_op(M, 3, 10)
    assert (op.compute, op.issue, op.elements) == (9.0, ISSUE, 30)
    assert dsd_op(M, 1, 1000).issue == ISSUE  # 1,000 elements: still one issue
    assert dsd_op(M, 0, 10) == dsd_op(M, 3, 0) == DsdOp(0.0, 0.0, 0)  # nothing to walk: no operation


def test_each_kind_at_its_sdk_rate_or_its_ports() -> None:
    """``@fmachs`` (fmac-mixed) over 1 × 8: 2 lanes, 4 cycles; it reads 4 + 2 = 6 B and writes 4 B an
    element, 48 / 16 = 3 and 32 / 8 = 4: 4. ``@fadds`` over 8 with the addend arriving: 2 lanes, 4; it
    reads 4 B and writes 4 B, 32 / 16 = 2, 32 / 8 = 4: 4. With the read port narrowed to 8 B, ``@fmach`` over 8 (2 lane cycles) reads 32 B: 4 cycles, the
    ports' bound."""
    assert dsd_op(M, 1, 8, "fmac-mixed").compute == 4
    assert dsd_op(M, 1, 8, "add-fp32").compute == 4
    narrow = Machine.of(_hw(sram_read_bytes_per_cycle=8.0), "fp16")
    assert dsd_op(M, 1, 8).compute == 2 and dsd_op(narrow, 1, 8).compute == 4
    assert Machine.of(HW, "fp32").lanes == 1 and dsd_op(Machine.of(HW, "fp32"), 1, 8).compute == 8
    with pytest.raises(ValueError, match="unknown DSD operation kind"):
        dsd_op(M, 1, 8, "fdiv")


def test_a_fabric_operation_is_timed_by_its_wavelets_when_they_are_slower() -> None:
    """An FMAC of 2 cycles driven by 5 arriving wavelets takes 5 alone; a send of 6 fp16 values is one
    issue and 12 B = 3 wavelets out: 3 alone."""
    assert dsd_op(M, 1, 8, wavelets_in=5).alone == 5
    send = send_op(M, 6, 2)
    assert (send.issue, send.elements, send.wavelets_out, send.alone) == (ISSUE, 6, 3, 3)


# ------------------------------------------------------------------------------- microthreads


def test_microthreads_overlap_the_issues_the_datapath_and_the_ramps() -> None:
    """A task of three operations — an FMAC of 8 cycles taking 2 wavelets in, an add of 2 taking 4 in, a
    send of 4 out — issues 10 · (1 + 3) = 40. Synchronous, each waits for the one before: 40 + 8 + 4 +
    4 = 56. On microthreads: max(40 issue, 8 + 2 datapath, 2 + 4 in, 4 out) = 40; they buy 16. With no
    issue cost (tiny8 as shipped) the datapath sets it: max(0, 10, 6, 4) = 10 of 16."""
    ops = [DsdOp(8.0, ISSUE, 32, wavelets_in=2), DsdOp(2.0, ISSUE, 8, wavelets_in=4),
           DsdOp(0.0, ISSUE, 8, wavelets_out=4)]
    t = microthreaded(M, ops)
    assert (t.cycles, t.serial, t.saved, t.issue, t.compute, t.ops, t.elements) == (40, 56, 16, 40, 10, 3, 48)
    assert t.asynchronous
    free = microthreaded(Machine.of(TINY, "fp16"), ops)
    assert (free.cycles, free.serial, free.saved) == (10, 16, 6)
    sync = microthreaded(M, ops, asynchronous=False)
    assert (sync.cycles, sync.saved, sync.asynchronous) == (56, 0, False)


def test_more_operations_than_microthreads_run_synchronously() -> None:
    """Two microthreads cannot hold three asynchronous operations: the task runs as the synchronous one
    (56); an operation with no elements is not issued."""
    two = Machine.of(_hw(microthreads=2), "fp16")
    ops = [DsdOp(8.0, ISSUE, 32, 2), DsdOp(2.0, ISSUE, 8, 4), DsdOp(0.0, ISSUE, 8, 0, 4)]
    assert microthreaded(two, ops).cycles == 56
    assert microthreaded(M, [*ops, DsdOp(0.0, 0.0, 0)]).cycles == 40
    assert microthreaded(M, []).cycles == 0


# ------------------------------------------------------------ the weight-streaming GEMM, a task per row


def test_stream_gemm_issues_one_task_per_weight_row() -> None:
    """Per output one task: the FMAC over the arriving weights × the PE's tokens (ONE operation), the add
    of the arriving partial sums and the send of its own (tests/kernels/test_stream.py derives the
    datapath), each issue 10: the activation and 3 operations, 40 cycles of instruction stream.
    1 × 8, 8 × 16 × 4 from the edge: pe = max(40, 8 + 4, 1 + 8 in, 8 out) = 40 (issue-bound; the edge's
    8 under it); no fill, drain 7 · step(2) + 8 = 57: 4 · 40 + 57 = 217, of which 4 · (40 − 12) = 112
    exposed issue; 3 operations an output, 12; synchronous 40 + 8 + 8 + 8 = 64, so 24 saved an output.
    2 × 2, 8 × 8 × 4 staged: pe = max(40, 8 + 2, 2 + 4, 4) = 40; fill latency(1) = 5, drain step(1) + 4
    = 10: 5 + 160 + 10 = 175, 4 · 30 = 120 exposed; synchronous 40 + 8 + 4 + 4 = 56, 16 saved.
    4 × 4, 4 × 64 × 2 staged: pe = max(40, 16 + 1, 8 + 1, 1) = 40; fill latency(3) = 7, drain 3 ·
    step(2) + 1 = 22: 7 + 80 + 22 = 109, 2 · 23 = 46 exposed; synchronous 40 + 16 + 1 + 1 = 58, 18 saved."""
    cases = [((1, 8), (8, 16, 4), False, 217, 112, 12, 96),
             ((2, 2), (8, 8, 4), True, 175, 120, 12, 64),
             ((4, 4), (4, 64, 2), True, 109, 46, 6, 36)]
    for grid, shape, staged, cycles, overhead, ops, saved in cases:
        r = run("gemm", "stream", grid, shape, staged=staged)
        assert (r.cycles, r.overhead, r.dsd_ops, r.microthread_saved) == (cycles, overhead, ops, saved), grid
        assert "issue-bound" in r.notes[0]


# ------------------------------------------------------------------- WaferLLM's GEMV, its per-vector loop


def test_meshgemv_issues_one_fmac_per_x_value_and_three_allreduce_phases() -> None:
    """A PE with a k × n block issues k FMACs of n (WaferLLM's ``@map`` over x), then the K-tree's three
    phases, each one operation: issue 10 · (k + 3), on the critical path after the datapath
    (tests/kernels/test_gemm_gemv.py derives the datapath and the allreduce: 37, 36, 31 cycles).
    1 × 8, 1 × 16 × 2: k = 2, n = 2: 5 operations, 50: 37 + 50 = 87.
    2 × 2, 1 × 16 × 16: k = n = 8: 11 operations, 110: 36 + 110 = 146.
    4 × 4, 1 × 16 × 16: k = n = 4: 7 operations, 70: 31 + 70 = 101."""
    for grid, shape, ops, cycles in [((1, 8), (1, 16, 2), 5, 87), ((2, 2), (1, 16, 16), 11, 146),
                                     ((4, 4), (1, 16, 16), 7, 101)]:
        r = run("gemv", "meshgemv", grid, shape)
        assert (r.cycles, r.overhead, r.dsd_ops) == (cycles, ops * ISSUE, ops), grid


def test_a_column_of_one_pe_issues_no_allreduce() -> None:
    """8 × 1, 1 × 4 × 16: one PE a row, k = 4, n = 2: 4 FMACs of 2 (1 cycle each), no allreduce: 4 + 40."""
    r = run("gemv", "meshgemv", (8, 1), (1, 4, 16))
    assert (r.cycles, r.overhead, r.dsd_ops) == (44, 40, 4)


# ------------------------------------------------------------------------ GEMMs: k·bn FMACs of bm a step


def test_meshgemm_and_cannon_issue_k_times_bn_fmacs_and_a_task_a_step() -> None:
    """A step's block product is k·bn FMACs of bm (WaferLLM's loop) and the step's task: 10 · (k·bn + 1)
    issue, the PE's work beside the datapath, so the double-buffered shifts hide behind it.
    4 × 4, 8 × 8 × 8: bm = bn = k = 2: a step 4 cycles of datapath + 50 of issue = 54 over the shifts'
    11 (MeshGEMM) or 12 (Cannon); skew 12 (test_gemm_gemv): 12 + 4 · 54 = 228, 200 issue, 4 · 5 = 20
    operations. 2 × 2: bm = bn = k = 4: 16 + 170 = 186 a step; skew 22 (8 wavelets through a ramp and
    step(1)), the one shift (22) hidden: 22 + 2 · 186 = 394, 340 issue, 2 · 17 = 34 operations."""
    for algorithm in ("meshgemm", "cannon"):
        for grid, cycles, overhead, ops in [((4, 4), 228, 200, 20), ((2, 2), 394, 340, 34)]:
            r = run("gemm", algorithm, grid, (8, 8, 8))
            assert (r.cycles, r.overhead, r.dsd_ops) == (cycles, overhead, ops), (algorithm, grid)


def test_summa_issues_likewise_on_every_grid() -> None:
    """SUMMA's steps issue as above. 1 × 8, 8 × 8 × 8: blocks 8 × 1, 8 panels of width 1: a step is one
    FMAC of 8 (2 cycles) and its task, 2 + 20 = 22, over panels of 9 + d ≤ 16 after the first: 16 + 8 ·
    22 = 192, 160 issue, 8 + 8 = 16 operations. 2 × 2: 2 panels of width 4, a step 16 + 170 = 186: 22 +
    2 · 186 = 394, 34 operations. 4 × 4: 4 steps of 4 + 50: 12 + 4 · 54 = 228, 20 operations."""
    for grid, cycles, overhead, ops in [((1, 8), 192, 160, 16), ((2, 2), 394, 340, 34), ((4, 4), 228, 200, 20)]:
        r = run("gemm", "summa", grid, (8, 8, 8))
        assert (r.cycles, r.overhead, r.dsd_ops) == (cycles, overhead, ops), grid


# ----------------------------------------------------------------- collectives and prefill's attention


def test_a_2d_ktree_allreduce_issues_three_phases_a_line() -> None:
    """Every row's K-tree, then every column's: 3 operations each, one after another at a PE: 4 × 4 and
    2 × 2 issue 6 (60 cycles); 1 × 8 one line, 3 (30). The network's cycles are the lines' (a K-tree of
    4 PEs 24, of 2 14, of 8 35: test_collectives)."""
    for grid, network, issues in [((4, 4), 48, 6), ((2, 2), 28, 6), ((1, 8), 35, 3)]:
        r = run_kernel(HW, "allreduce", *grid, algorithm="ktree", wavelets=1)
        assert (r.cycles, r.overhead) == (network + issues * ISSUE, issues * ISSUE), grid


def test_prefill_attention_reduces_are_one_issue_each() -> None:
    """WaferLLM's prefill Q·Kᵀ ends each of the P steps with a row reduce rooted in turn at every PE, one
    operation each: P issues (rows of 2 and 4: tests/kernels/test_collectives.py). One wavelet on a row of
    8: the root r takes the chains of r and 7 − r PEs; a chain's PE n hops out has its wavelet at 1 +
    step(1) · (n − 1) + latency(1) = 6n, and the root adds the two streams one a cycle: r = 0 (n = 7) 42,
    done 43; r = 1 (n = 1, 6) 6 and 36, done 37; r = 2 (2, 5) 31; r = 3 (3, 4) 25; r = 4 … 7 the mirror:
    2 · (43 + 37 + 31 + 25) = 272 cycles of network and 8 · 10 of issue."""
    assert rotating_reduces(M, 8, 1) == (272, 80)
