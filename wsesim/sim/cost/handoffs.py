"""Hand-offs between a serving program's stages (docs/model.md §11.2): over the fabric on one wafer, over
the systems' I/O links and the interconnect between wafers; under the production stack the latter beside
the stage's compute (``software.asynchronous_io``). The cost pass (``costing``) and the layouts' costs
(``speculative``, ``split_prefill``) read these formulas and no others."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...model.energy import EventCounts
from ..programs.program import Handoff
from .software import asynchronous_io

if TYPE_CHECKING:
    from ...config.inference import InferenceExperimentSpec

__all__ = ["handoff", "move", "wafer_handoff"]


def wafer_handoff(spec: InferenceExperimentSpec, nbytes: float) -> float:
    """Cycles to move ``nbytes`` from one wafer to another: through the system's I/O link and a port of
    ``inference.interconnect``, at the slower of ``io.bandwidth`` and its ``link_bandwidth``, then one
    node of it (its latency): nbytes / min(io, link) + latency_s · clock (the I/O alone without one)."""
    hw, ic = spec.hardware, spec.inference.interconnect
    if ic is None:
        return nbytes / hw.io_bytes_per_cycle
    rate = min(hw.io_bytes_per_cycle, ic.link_bandwidth_bytes_per_s / hw.clock_hz)  # the slower of the two
    return nbytes / rate + _latency(spec)


def _latency(spec: InferenceExperimentSpec) -> float:
    ic = spec.inference.interconnect
    return 0.0 if ic is None else ic.latency_s * spec.hardware.clock_hz


def move(spec: InferenceExperimentSpec, grid: Any, source: tuple[int, tuple[int, int]],
         target: tuple[int, tuple[int, int]], values: int, hidden: float = 0.0) -> tuple[float, EventCounts]:
    """Cycles to move ``values`` from the grid at (wafer, origin) ``source`` to ``target``, and its
    events: over the fabric on one wafer (the grids' origins' hops apart; wavelet-hops), over the wafers'
    I/O links and one interconnect node between wafers (the bytes out of one system's I/O and into the
    other's). Under the production stack a move between wafers runs beside the last ``hidden`` cycles of
    the stage's compute (``asynchronous_io``)."""
    (a_wafer, a), (b_wafer, b) = source, target
    if a_wafer == b_wafer:
        moved = grid.transfer(values, abs(a[0] - b[0]) + abs(a[1] - b[1]))
        return moved.cycles, EventCounts(wavelet_hops=moved.wavelet_hops)
    nbytes = values * spec.model.bytes_per_value
    cycles = wafer_handoff(spec, nbytes)
    if spec.inference.software == "production":
        cycles = asynchronous_io(cycles, _latency(spec), hidden)
    return cycles, EventCounts(io_bytes=2.0 * nbytes)


def handoff(spec: InferenceExperimentSpec, grid: Any, h: Handoff,
            hidden: float = 0.0) -> tuple[float, EventCounts]:
    """Cycles to move a hand-off's values from its stage's grid to the next (``move``; none to itself, a
    one-stage pipeline's), and its events."""
    a, b = h.source, h.target
    if a.index == b.index:
        return 0.0, EventCounts()
    return move(spec, grid, (a.wafer, a.origin), (b.wafer, b.origin), h.values, hidden)
