"""The PE's instruction model as the Cerebras SDK defines it (docs/model.md §10.1, with the SDK's SIMD
table and the calibration of the issue): a DSD operation is one instruction however many elements its
descriptor walks; asynchronous operations run on microthreads beside the instruction stream; a task's
activation is charged like an issue.

* **A DSD operation** (``dsd_op``): one issue (``pe.instruction_issue``) and ``rows`` · ⌈length / lanes⌉
  cycles at its kind's SIMD width (a SIMD group does not span two rows), or its operands' bytes over the
  SRAM ports if slower. The kinds: ``fmac`` in the kernel's dtype, ``fmac-mixed`` (16-bit products into
  fp32 accumulators) and ``add-fp32``.
* **Microthreads** (``microthreaded``): up to ``pe.microthreads`` operations at once beside the
  instruction stream; the datapath is one, so their elements still add up, but their issues and their
  wavelets hide behind one another.

The research kernels (WaferLLM's GEMV, GEMM and collectives) keep their per-vector loops
(``Machine.instructions``): each of their instructions is a loop's one vector.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .machine import Machine

__all__ = ["DsdOp", "Overlap", "dsd_op", "microthreaded", "send_op"]


@dataclass(frozen=True, slots=True)
class DsdOp:
    """One DSD operation: its elements' cycles on the datapath, its issue, how many elements it walks,
    and the wavelets its fabric operands take in through the PE's ramp and put out (one a cycle each way)."""

    compute: float
    issue: float
    elements: int
    wavelets_in: int = 0
    wavelets_out: int = 0

    @property
    def alone(self) -> float:
        """Its cycles run synchronously: its elements, or its wavelets if they come or go slower."""
        return max(self.compute, float(self.wavelets_in), float(self.wavelets_out))


NO_OP = DsdOp(0.0, 0.0, 0)


def _lanes_and_bytes(m: Machine, kind: str) -> tuple[int, float, float]:
    """(lanes, SRAM bytes read, SRAM bytes written) per element of an operation of ``kind``. An FMAC's
    multiplier is a scalar (an arriving value or a register): it reads the accumulator and one vector; an
    add's addend arrives from the fabric and reads no SRAM."""
    e, acc = m.elem_bytes, m.partial_bytes
    if kind == "fmac":  # @fmach / @fmacs: dest = dest + src · scalar, all in the kernel's dtype
        return m.lanes, 2 * e, e
    if kind == "fmac-mixed":  # @fmachs: a 16-bit vector times a scalar into 32-bit accumulators
        return m.mixed_lanes, acc + e, acc
    if kind == "add-fp32":  # @fadds: dest = dest + src, the addend arriving
        return m.mixed_lanes, acc, acc
    raise ValueError(f"unknown DSD operation kind {kind!r}")


def dsd_op(m: Machine, rows: int, length: int, kind: str = "fmac", wavelets_in: int = 0) -> DsdOp:
    """One DSD operation over ``rows`` × ``length`` elements of ``kind`` on ``m``'s PE: one issue, and
    rows · ⌈length / lanes⌉ cycles of datapath or its operands' bytes over the ports, whichever is longer.
    One source arrives from the fabric (a ``fabin_dsd``, ``wavelets_in`` wavelets) and reads no SRAM."""
    if rows <= 0 or length <= 0:
        return NO_OP
    lanes, read, written = _lanes_and_bytes(m, kind)
    elements = rows * length
    lane_cycles = rows * math.ceil(length / lanes)
    ports = max(math.ceil(elements * read / m.read_bytes), math.ceil(elements * written / m.write_bytes))
    return DsdOp(float(max(lane_cycles, ports)), float(m.issue), elements, wavelets_in)


def send_op(m: Machine, values: int, value_bytes: int) -> DsdOp:
    """A move of ``values`` to the fabric (``@fmovs`` into a ``fabout_dsd``): one issue; its elements
    leave one wavelet a cycle, which is its time."""
    return DsdOp(0.0, float(m.issue), values, 0, -(-values * value_bytes // m.wavelet_bytes))


@dataclass(frozen=True, slots=True)
class Overlap:
    """Operations issued one after another by a task, with or without microthreads: ``cycles`` the
    task's time (its activation and every issue on the instruction stream; the elements on the one
    datapath; the wavelets through the ramp), ``serial`` the same operations synchronous (each waits for
    the one before), ``saved`` = serial − cycles, what the microthreads buy."""

    cycles: float
    serial: float
    issue: float
    compute: float
    ops: int
    elements: int
    asynchronous: bool  # on microthreads (else each operation waited for the one before)

    @property
    def saved(self) -> float:
        return self.serial - self.cycles


def microthreaded(m: Machine, ops: list[DsdOp], asynchronous: bool = True) -> Overlap:
    """A task's time: its activation (one issue) and ``ops`` issued in turn. Asynchronous, with at least
    as many microthreads as operations, the instruction stream, the datapath and the ramp each way run
    side by side: max(issues, Σ elements' cycles, Σ wavelets in, Σ wavelets out). Otherwise each operation
    waits for the one before: issues + Σ each operation alone (its elements or its wavelets)."""
    live = [op for op in ops if op.elements]
    issue = m.issue * (1 + len(live)) if live else 0.0  # the task's activation, then one issue an op
    compute = sum(op.compute for op in live)
    serial = issue + sum(op.alone for op in live)
    elements = sum(op.elements for op in live)
    if asynchronous and len(live) <= m.microthreads:
        ramps = max(sum(op.wavelets_in for op in live), sum(op.wavelets_out for op in live))
        return Overlap(max(issue, compute, float(ramps)), serial, issue, compute, len(live), elements, True)
    return Overlap(serial, serial, issue, compute, len(live), elements, False)
