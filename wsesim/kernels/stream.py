"""The weight-streaming GEMM (docs/model.md §10.7): Cerebras' training matmul, as S. Lie describes it
("Cerebras Architecture Deep Dive", IEEE Micro 43(3), 2023; the Hot Chips 34 talk). One operand stays
where it is in SRAM; the other streams past it one row at a time; every arriving value triggers vector
work on the resident one; partial sums are reduced along a line of PEs to the PE that keeps the result.

**Forward and input gradient** (``stream``): C[M×N] = A[M×K] · B[K×N] on R × C PEs, A resident with M
(tokens) over the rows, m = ⌈M/R⌉ a PE, and K (hidden) over the columns, k = ⌈K/C⌉. B's row for output
n — the K weights of output n — enters at the wafer's north edge, each column's k multicast down the
column. A weight's arrival triggers one AXPY (one FMAC instruction of m elements). After its k weights
every PE holds m partial sums of output n, reduced around its row on the folded ring (every edge at most
2 hops) to the PE that keeps output n in the layout the next layer reads: N over the columns, as K was.
An input gradient dX = dY · Wᵀ is the same with K and N exchanged.

**Weight gradient** (``stream-dw``): dW[K×N] = Xᵀ · dY, asked as the GEMM M' × K' × N' = K × M × N, with
X and dY both resident as the forward left them (tokens over the rows, k' = ⌈M/R⌉ a PE; X's hidden over
the columns, m' = ⌈K/C⌉ a PE; dY's N over the columns). dY's column n is multicast along every row from
the column that holds it; each PE forms its m' partial sums of dW[:, n] from its k' tokens — as k' AXPYs
of m' or m' dot products of k', whichever is fewer cycles (the compiler's loop order: assumed); the
partials are reduced down the columns to the south edge and stream out.

Per output, on the critical PE (every PE does the same work; ``Machine.instructions`` for each)::

    fmacs = red instructions of vec   (AXPY; or the dot form, vec of red, for the weight gradient)
    add   = one instruction of vec    (adding the arriving partial sums to its own; none on a line of 1)
    wr    = ⌈vec · partial_sum_width / link_width⌉ wavelets of partial sums in, and as many out
    pe    = max(fmacs + add, wr)                 pe.reduction: overlapped (microthreads: the wavelets of
                                                 one row's reduction arrive while the next row's FMACs run)
          = fmacs + add.issue + max(add.compute, wr)  serialised (the add waits for its wavelets)
    pace  = max(pe, wavelets(red) into a line, source bytes / io, sink bytes / io)

``vec`` and ``red`` are (m, k) forward and (m', k') for the weight gradient. ``source`` is the streamed
row's bytes entering at the edge (forward: K values), ``sink`` the result's bytes leaving it (weight
gradient: K' values); both at the I/O rate. In the training step neither is charged here: the weight
stream and the gradient link (``sim.links``) carry them, and the step runs with the weights already in
the staging buffer (``staged``) — so the I/O has one home.

    cycles = fill + N · pace + drain
    fill   = 2·T_R + (L_b − 1)·t_h      the first values reach the farthest PE of a broadcast line of L_b
    drain  = (L_r − 1)·step(h) + wr     the last output's partial sums around a reduce line of L_r PEs,
                                        h = 2 on the folded ring (1 if L_r ≤ 2): the chain's skew, paid once

SRAM per PE: the resident blocks, this PE's share of the result (forward) or of dY (weight gradient),
and two buffers each of streamed values and of partial sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config.errors import ConfigError
from ..fabric.mesh import NORTH, SOUTH
from .gemm import multicast_loads
from .kinds import GemmAlgorithm, KernelKind
from .lines import ring_order
from .linkmap import LinkMap, Term, col_terms, line_loads, ones, row_terms
from .machine import Machine
from .result import KernelResult, sram_check

__all__ = ["STREAM_ALGORITHMS", "StreamPace", "stream_pace", "weight_grad_stream", "weight_stream"]


@dataclass(frozen=True)
class StreamPace:
    """One output's cycles on the critical PE of a streamed GEMM, by what bounds them."""

    fmac_compute: float
    fmac_issue: float
    add_compute: float
    add_issue: float
    partial_wavelets: int  # wr
    inject: int  # wavelets of one output's streamed values into a line
    source: float  # cycles the edge takes to bring one output's streamed values in
    sink: float  # ... to take one output's results out
    overlapped: bool

    @property
    def work(self) -> float:
        return self.fmac_compute + self.fmac_issue + self.add_compute + self.add_issue

    @property
    def pe(self) -> float:
        if self.overlapped:
            return max(self.work, float(self.partial_wavelets))
        return (self.fmac_compute + self.fmac_issue + self.add_issue
                + max(self.add_compute, float(self.partial_wavelets)))

    @property
    def cycles(self) -> float:
        return max(self.pe, float(self.inject), self.source, self.sink)

    @property
    def bound(self) -> str:
        """What sets the pace: ``"pe"`` (the FMACs and adds), ``"reduction"``, ``"inject"``, ``"source"``
        or ``"sink"``."""
        if self.cycles == self.pe:
            return "pe" if self.pe == self.work or not self.overlapped else "reduction"
        return max((("inject", float(self.inject)), ("source", self.source), ("sink", self.sink)),
                   key=lambda t: t[1])[0]


def stream_pace(m: Machine, vec: int, red: int, reduce_line: int, source_bytes: float = 0.0,
                sink_bytes: float = 0.0, dot_form: bool = False) -> StreamPace:
    """One output's pace (the module's formula): ``red`` streamed values meet ``vec`` resident ones on
    each PE; the partial sums (``vec``) are reduced over ``reduce_line`` PEs."""
    fmac = m.instructions(red, vec)
    if dot_form:
        fmac = min(fmac, m.instructions(vec, red), key=sum)
    add = m.instructions(1, vec) if reduce_line > 1 else (0.0, 0.0)
    wr = -(-vec * m.partial_bytes // m.wavelet_bytes) if reduce_line > 1 else 0
    io = m.io_bytes or float("inf")
    return StreamPace(fmac[0], fmac[1], add[0], add[1], wr, m.wavelets(red), source_bytes / io,
                      sink_bytes / io, m.overlapped)


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
    """(cycles, compute, issue, communication): the module's fill + N · pace + drain, split."""
    fill = float(m.latency(broadcast_line - 1)) if broadcast_line > 1 else 0.0
    drain = ((reduce_line - 1) * m.step(_ring_hop(reduce_line)) + pace.partial_wavelets
             if reduce_line > 1 else 0.0)
    cycles = fill + outputs * pace.cycles + drain
    compute = outputs * (pace.fmac_compute + pace.add_compute)
    issue = outputs * (pace.fmac_issue + pace.add_issue)
    return cycles, compute, issue, cycles - compute - issue


def _check(m: Machine, rows: int, cols: int, shape: tuple[int, int, int]) -> None:
    if min(shape) < 1:
        raise ConfigError(f"expected positive M, K and N, got {' x '.join(map(str, shape))}", path="shape")
    m.check_grid(rows, cols)


def _result(algorithm: GemmAlgorithm, m: Machine, rows: int, cols: int, shape: tuple[int, int, int],
            timing: tuple[float, float, float, float], need: float, links: LinkMap, pace: StreamPace,
            what: str) -> KernelResult:
    cycles, compute, issue, comm = timing
    reason = sram_check(m, need, what)
    note = (f"{shape[2]:,} outputs at {pace.cycles:,.0f} cycles each ({pace.bound}-bound; "
            f"reduction {'overlapped' if m.overlapped else 'serialised'})")
    return KernelResult(KernelKind.GEMM, algorithm, rows, cols, shape, m.dtype, cycles, compute, comm,
                        2.0 * shape[0] * shape[1] * shape[2], need, links, m, not reason, reason, (note,),
                        overhead=issue)


def weight_stream(m: Machine, rows: int, cols: int, shape: tuple[int, int, int],
                  staged: bool = False) -> KernelResult:
    """C = A · B with A resident (M over the rows, K over the columns) and B's rows streamed down the
    columns from the north edge, at the I/O rate unless ``staged`` (already on the wafer: the training
    step, whose weight stream is ``sim.links``)."""
    _check(m, rows, cols, shape)
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
    _check(m, rows, cols, shape)
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
