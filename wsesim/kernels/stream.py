"""The weight-streaming GEMM (docs/model.md §10.7, which derives its terms): Cerebras' training matmul as
S. Lie describes it (IEEE Micro 43(3), 2023; Hot Chips 34). One operand stays resident in SRAM; the other
streams past it a row at a time, each arrival driving one FMAC operation on the resident values; partial
sums are reduced along a line of PEs to the PE that keeps the result.

``stream``: C = A · B with A resident (tokens over the rows, K over the columns), B's rows multicast down
the columns, partial sums around each row's folded ring; an input gradient is the same with K and N
exchanged. ``stream-dw``: dW = Xᵀ · dY asked as K × M × N, X and dY resident as the forward left them, dY's
columns multicast along the rows, partial sums down the columns and out at the south edge. Either way

    cycles = fill + N · pace + drain

with one output's pace on the critical PE (``stream_pace``). ``staged``: the operands the edge would bring
or take are already in the staging buffer, whose I/O the training step's links carry (one home for it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fabric.mesh import NORTH, SOUTH
from .gemm import check_gemm, multicast_loads
from .instructions import dsd_op, microthreaded, send_op
from .kinds import GemmAlgorithm, KernelKind
from .lines import ring_order
from .linkmap import LinkMap, Term, col_terms, line_loads, ones, row_terms
from .machine import Machine
from .result import KernelResult, sram_check

__all__ = ["STREAM_ALGORITHMS", "StreamPace", "stream_pace", "weight_grad_stream", "weight_stream"]


@dataclass(frozen=True)
class StreamPace:
    """One output's cycles on the critical PE of a streamed GEMM, by what bounds them: the task that the
    output's weight row triggers, its DSD operations (``instructions``) and the edge."""

    fmac_compute: float  # the FMAC operation's elements on the datapath
    add_compute: float  # the arriving partial sums added to the PE's own
    issue: float  # the task's activation and one issue per DSD operation
    ops: int  # DSD operations per output
    elements: int  # the elements they walk
    partial_wavelets: int  # wr
    inject: int  # wavelets of one output's streamed values into a line
    source: float  # cycles the edge takes to bring one output's streamed values in
    sink: float  # ... to take one output's results out
    overlapped: bool  # on microthreads (``pe.reduction: overlapped`` and enough of them)
    serial: float  # the same operations synchronous, one after another
    pe: float  # the task on the PE: max(issue, datapath, ramps) on microthreads, else ``serial``

    @property
    def compute(self) -> float:
        return self.fmac_compute + self.add_compute

    @property
    def saved(self) -> float:
        """Cycles per output that the microthreads hide (serial − overlapped)."""
        return self.serial - self.pe

    @property
    def exposed_issue(self) -> float:
        """The issue cycles per output that neither the datapath nor the wavelets hide."""
        if not self.overlapped:
            return self.issue
        return max(0.0, min(self.issue, self.pe) - self.compute)

    @property
    def cycles(self) -> float:
        return max(self.pe, float(self.inject), self.source, self.sink)

    @property
    def bound(self) -> str:
        """What sets the pace: ``"pe"`` (the datapath), ``"issue"`` (the task's instruction stream),
        ``"ramp"`` (the wavelets through the PE's ramp), ``"inject"``, ``"source"`` or ``"sink"``."""
        if self.cycles == self.pe:
            if not self.overlapped or self.pe == self.compute:
                return "pe"
            return "issue" if self.pe == self.issue else "ramp"
        return max((("inject", float(self.inject)), ("source", self.source), ("sink", self.sink)),
                   key=lambda t: t[1])[0]


def fmac_kind(m: Machine) -> str:
    """The FMAC a streamed GEMM issues: 16-bit products into fp32 accumulators (``@fmachs``) when its
    partial sums are wider than its values (``pe.partial_sum_width``: mixed-precision training), else an
    FMAC in the kernel's dtype."""
    return "fmac-mixed" if m.dtype == "fp16" and m.partial_bytes > m.elem_bytes else "fmac"


def stream_pace(m: Machine, vec: int, red: int, reduce_line: int, source_bytes: float = 0.0,
                sink_bytes: float = 0.0, dot_form: bool = False) -> StreamPace:
    """One output's pace (§10.7's table): ``red`` streamed values meet ``vec`` resident ones on
    each PE in ONE FMAC operation driven by the arriving values (a ``fabin_dsd``); the partial sums
    (``vec``) are sent on and the arriving ones added (two more operations) over ``reduce_line`` PEs."""
    kind = fmac_kind(m)
    inject = m.wavelets(red)
    fmac = dsd_op(m, red, vec, kind, wavelets_in=inject)
    if dot_form:
        fmac = min(fmac, dsd_op(m, vec, red, kind, wavelets_in=inject), key=lambda op: op.compute)
    ops = [fmac]
    if reduce_line > 1:  # the arriving partial sums added to the PE's own, and its own sent on
        add = dsd_op(m, 1, vec, "add-fp32" if m.partial_bytes >= 4 else "fmac",
                     wavelets_in=-(-vec * m.partial_bytes // m.wavelet_bytes))
        ops += [add, send_op(m, vec, m.partial_bytes)]
    task = microthreaded(m, ops, asynchronous=m.overlapped)
    wr = ops[-1].wavelets_out if reduce_line > 1 else 0
    io = m.io_bytes or float("inf")
    return StreamPace(fmac.compute, task.compute - fmac.compute, task.issue, task.ops, task.elements, wr,
                      inject, source_bytes / io, sink_bytes / io, task.asynchronous, task.serial, task.cycles)


def _ring_hop(n: int) -> int:
    return 0 if n < 2 else (1 if n == 2 else 2)


def _owned(outputs: int, n: int) -> np.ndarray:
    """Outputs kept by each of n positions of a line: output j at position j // ⌈N / n⌉."""
    return np.bincount(np.arange(outputs) // -(-outputs // n), minlength=n)[:n].astype(np.float64)


def _ring_loads(n: int, outputs: int, wr: int) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) loads of the reduction around the folded ring of n PEs: each output's chain
    starts after its keeper and ends at it, so the ring edge out of position x carries every output but
    those x keeps, ``wr`` wavelets each."""
    if n < 2:
        return np.zeros(n), np.zeros(n)
    order = ring_order(n)
    sends = wr * (outputs - _owned(outputs, n)[order])  # the edge out of ring position i
    return line_loads(n, order, np.roll(order, -1), sends)


def _schedule(m: Machine, pace: StreamPace, outputs: int, broadcast_line: int,
              reduce_line: int) -> tuple[float, float, float, float]:
    """(cycles, compute, issue, communication): fill + N · pace + drain, split."""
    fill = float(m.latency(broadcast_line - 1)) if broadcast_line > 1 else 0.0
    drain = ((reduce_line - 1) * m.step(_ring_hop(reduce_line)) + pace.partial_wavelets
             if reduce_line > 1 else 0.0)
    cycles = fill + outputs * pace.cycles + drain
    compute = outputs * pace.compute
    issue = outputs * pace.exposed_issue
    return cycles, compute, issue, cycles - compute - issue


def _result(algorithm: GemmAlgorithm, m: Machine, rows: int, cols: int, shape: tuple[int, int, int],
            timing: tuple[float, float, float, float], need: float, links: LinkMap, pace: StreamPace,
            what: str) -> KernelResult:
    cycles, compute, issue, comm = timing
    reason = sram_check(m, need, what)
    outputs = shape[2]
    note = (f"{outputs:,} outputs at {pace.cycles:,.0f} cycles each ({pace.bound}-bound; "
            f"reduction {'overlapped on microthreads' if pace.overlapped else 'serialised'}): a task per "
            f"output, {pace.ops} DSD operations ({fmac_kind(m)} of {pace.fmac_compute:,.0f} cycles driven by "
            f"the arriving values{', add, send' if pace.ops > 1 else ''}) and its activation, "
            f"{pace.issue:,.0f} cycles of issue; microthreads save {pace.saved:,.0f} of {pace.serial:,.0f} "
            "cycles an output")
    return KernelResult(KernelKind.GEMM, algorithm, rows, cols, shape, m.dtype, cycles, compute, comm,
                        2.0 * shape[0] * shape[1] * shape[2], need, links, m, not reason, reason, (note,),
                        overhead=issue, dsd_ops=float(outputs * pace.ops),
                        dsd_elements=float(outputs * pace.elements),
                        microthread_saved=outputs * pace.saved)


def weight_stream(m: Machine, rows: int, cols: int, shape: tuple[int, int, int],
                  staged: bool = False) -> KernelResult:
    """C = A · B with A resident (M over the rows, K over the columns) and B's rows streamed down the
    columns from the north edge, at the I/O rate unless ``staged`` (already on the wafer: the training
    step, whose weight stream is ``sim.executors.links``)."""
    check_gemm(m, rows, cols, shape)
    mm, kk, nn = shape
    vec, red = -(-mm // rows), -(-kk // cols)
    pace = stream_pace(m, vec, red, cols, source_bytes=0.0 if staged else kk * m.elem_bytes)
    timing = _schedule(m, pace, nn, rows, cols)
    need = m.elem_bytes * (vec * red + vec * -(-nn // cols) + 2 * red) + 2 * vec * m.partial_bytes

    def terms() -> list[Term]:
        south = nn * pace.inject * (np.arange(rows) < rows - 1)  # down every column from the edge
        return [*col_terms(south, np.zeros(rows), ones(cols)),
                *row_terms(ones(rows), *_ring_loads(cols, nn, pace.partial_wavelets))]

    return _result(GemmAlgorithm.STREAM, m, rows, cols, shape, timing, need, LinkMap(rows, cols, terms),
                   pace, "the resident activations, the outputs kept, the weight and partial-sum buffers")


def weight_grad_stream(m: Machine, rows: int, cols: int, shape: tuple[int, int, int],
                       staged: bool = False) -> KernelResult:
    """dW = Xᵀ · dY asked as M' × K' × N' (K × tokens × N): X and dY resident with the tokens over the
    rows; dY's columns multicast along the rows, dW's partial sums reduced down the columns and out at
    the south edge, at the I/O rate unless ``staged`` (the training step's gradient link)."""
    check_gemm(m, rows, cols, shape)
    mm, kk, nn = shape
    vec, red = -(-mm // cols), -(-kk // rows)
    pace = stream_pace(m, vec, red, rows, sink_bytes=0.0 if staged else mm * m.elem_bytes, dot_form=True)
    timing = _schedule(m, pace, nn, cols, rows)
    need = m.elem_bytes * (vec * red + red * -(-nn // cols) + 2 * red) + 2 * vec * m.partial_bytes

    def terms() -> list[Term]:
        fwd, bwd = _ring_loads(rows, nn, pace.partial_wavelets)
        src = np.arange(nn) // -(-nn // cols)  # the column holding dY's column n multicasts it both ways
        east, west = multicast_loads(cols, src, np.full(nn, float(pace.inject)))
        return [*row_terms(ones(rows), east, west), (SOUTH, fwd, ones(cols)), (NORTH, bwd, ones(cols))]

    return _result(GemmAlgorithm.STREAM_DW, m, rows, cols, shape, timing, need, LinkMap(rows, cols, terms),
                   pace, "the resident activations and output gradients, the streamed and partial-sum "
                   "buffers")


STREAM_ALGORITHMS = {GemmAlgorithm.STREAM: weight_stream, GemmAlgorithm.STREAM_DW: weight_grad_stream}
"""The streamed GEMMs: they take ``staged`` (the training step's weights already in SRAM)."""
