"""What the production stack's kernels cost (``inference.software: production``, docs/model.md §11.11, which
gives each rule with its source): a kernel composed by ``builders.software.fuse`` — a GEMV or GEMM with
element-wise kernels fused into its epilogue and allreduces run beside it — and a hand-off between wafers
whose bytes leave while the stage computes. Nothing here runs for the research stack.

* A GEMV's reduce beside its compute, its outputs in a chunk per microthread: max(stream, reduce) +
  stream / chunks (``reduce_beside_compute``).
* A composed kernel pays one launch (``runtime.fused_launch``); a collective beside it, on a microthread
  and a colour of its own, lengthened by the wavelets the two put on the row links they share:

      body = min(h + Σ b,  max(h + Σ w_b,  max_b (b + w_h + Σ_{other} w)))

* Asynchronous wafer I/O: t = latency + max(0, transfer − last kernel) (``asynchronous_io``).

Each is never more than the same work in turn.
"""

from __future__ import annotations

from math import ceil
from typing import Any

from ...kernels.cost import KernelCost
from ...model.vocabulary import StageOpKind
from ..programs.program import Kernel

__all__ = ["asynchronous_io", "production_cost", "reduce_beside_compute"]


def _wavelets(grid: Any, op: Kernel, cost: KernelCost, dims: tuple[int, ...], batch: int) -> float:
    """Wavelets a kernel puts on each row link it uses: an allreduce's values, a GEMV's reduced outputs
    per row (its N over the grid's rows, ``batch`` vectors); a GEMM's communication cycles (a bound)."""
    m = grid.machine
    if op.kind == StageOpKind.ALLREDUCE:
        return float(m.wavelets(max(dims[0] * batch, 1)))
    if op.kind == StageOpKind.GEMV:
        return float(m.wavelets(batch * ceil(dims[1] / grid.rows)))
    return cost.communication


def reduce_beside_compute(stream: float, fabric: float, chunks: int) -> float:
    """A GEMV's cycles when its row allreduce (``fabric`` cycles: wavelets and waits) starts on the first
    of ``chunks`` pieces of its outputs while the PE issues and computes the rest (``stream`` cycles), each
    piece's reduce on a microthread of its own: max(stream, fabric) + stream / chunks, never more than the
    two in turn."""
    if stream <= 0 or fabric <= 0:
        return stream + max(fabric, 0.0)
    return min(stream + fabric, max(stream, fabric) + stream / max(1, chunks))


def _gemv_body(grid: Any, op: Kernel, host: KernelCost, dims: tuple[int, ...],
               batch: int) -> tuple[float, float]:
    """(cycles, share of its own instructions and arithmetic left on the critical path) of ``op`` in the
    production stack: a GEMV's outputs cut into as many chunks as there are microthreads (or wavelets of
    outputs, if fewer), ``reduce_beside_compute``; any other kernel as it is."""
    stream = host.overhead + host.compute
    fabric = host.cycles - stream
    if op.kind != StageOpKind.GEMV or stream <= 0 or fabric <= 0:
        return host.cycles, 1.0
    chunks = min(grid.machine.microthreads, int(_wavelets(grid, op, host, dims, batch)))
    cycles = reduce_beside_compute(stream, fabric, chunks)
    return cycles, (cycles - fabric) / stream


def production_cost(grid: Any, op: Kernel, context: int, batch: int, launch: float) -> KernelCost:
    """``op`` as the production stack runs it on ``grid`` (``costing._Grid``: its ``_kernel`` the cost of
    one kernel without a launch), at decode ``context`` with ``batch`` vectors: a GEMV's reduce beside its
    compute, its collectives beside it, its fused kernels after it, and one ``launch`` (none for a move
    between grids, which launches no kernel)."""
    dims = op.at(context)
    host = grid._kernel(op, dims, batch)
    if op.kind == StageOpKind.GRID_TRIPS:
        return host
    parts = [host]
    body, share = _gemv_body(grid, op, host, dims, batch)
    own_body = body
    if op.beside:
        own = [grid._kernel(b, b.at(context), batch) for b in op.beside]
        parts += own
        w_h = _wavelets(grid, op, host, dims, batch)
        w = [_wavelets(grid, b, c, b.at(context), batch) for b, c in zip(op.beside, own, strict=True)]
        serial = body + sum(c.cycles for c in own)
        if grid.machine.microthreads >= 1 + len(own):
            longest = max(c.cycles + w_h + sum(w) - w_i for c, w_i in zip(own, w, strict=True))
            body = min(serial, max(body + sum(w), longest))
        else:
            body = serial
    fused = [grid._kernel(f, f.at(context), batch) for f in op.fused]
    parts += fused
    cycles = launch + body + sum(f.cycles for f in fused)
    overhead = launch + share * host.overhead + sum(f.overhead for f in fused)
    compute = share * host.compute + sum(f.compute for f in fused)
    communication = host.communication + body - own_body + sum(f.communication for f in fused)
    problems = [p.reason for p in parts if not p.feasible]
    return KernelCost(cycles, compute, communication, not problems, problems[0] if problems else "",
                      overhead, sum(p.fmacs for p in parts), sum(p.wavelet_hops for p in parts))


def asynchronous_io(cycles: float, latency: float, hidden: float) -> float:
    """A hand-off of ``cycles`` (``latency`` of them the interconnect's) whose transfer runs beside the
    last ``hidden`` cycles of the stage's compute: latency + max(0, transfer − hidden), at most ``cycles``."""
    return min(cycles, latency + max(0.0, cycles - latency - hidden))
