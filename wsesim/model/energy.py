"""Energy from event counts: the one home of the arithmetic (docs/model.md §12).

A run's energy is what its events cost, each at the hardware's per-event value (``hardware.energy``),
plus the system's floor over the time it ran::

    E = Σ_dtype fmacs_dtype · e_fmac_dtype + sram_read_bytes · e_read + sram_write_bytes · e_write
        + wavelet_hops · e_hop + io_bytes · e_io + instruction_cycles · e_instruction
        + systems · P_static · seconds

The counts come from where the results are measured (``analysis``: a training step's FLOPs and I/O, a
serving run's kernels visit by visit); this module only prices them. An FMAC's SRAM traffic is its two
operands read and its result written (``fmac_sram_bytes``, the rule the kernel model's SRAM ports obey
too). ``instruction_cycles`` are cycles of a PE's instruction stream summed over PEs, one scalar
instruction issued in each (a DSD operation's issue, a task's activation, a kernel's launch: docs/model.md
§12.1). Energies in joules, powers in watts, times in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..config.specs import HardwareSpec

__all__ = ["PARTS", "Energy", "EventCounts", "energy_of", "fmac_sram_bytes", "full_load"]

FMAC_OPERANDS_READ = 2
FMAC_OPERANDS_WRITTEN = 1
"""An FMAC on a PE reads two operands from SRAM (a weight and an accumulator, or the two vectors) and
writes one (the accumulator): the traffic the SRAM ports carry at the lanes' rate (docs/model.md §10.1)."""

PARTS = ("fmac", "sram", "fabric", "io", "instruction", "static")
"""What a run's energy is split into, in this order."""


def fmac_sram_bytes(fmacs: float, elem_bytes: int) -> tuple[float, float]:
    """(bytes read, bytes written) of SRAM that ``fmacs`` FMACs on ``elem_bytes``-byte values move."""
    return fmacs * FMAC_OPERANDS_READ * elem_bytes, fmacs * FMAC_OPERANDS_WRITTEN * elem_bytes


@dataclass(frozen=True, slots=True)
class EventCounts:
    """What a piece of work did, event by event: FMACs on each lane type, SRAM bytes read and written,
    wavelets times router hops on the fabric, bytes through the system's I/O (in and out), and cycles of
    the PEs' instruction streams (summed over PEs)."""

    fmacs_fp16: float = 0.0
    fmacs_fp32: float = 0.0
    sram_read_bytes: float = 0.0
    sram_write_bytes: float = 0.0
    wavelet_hops: float = 0.0
    io_bytes: float = 0.0
    instruction_cycles: float = 0.0

    @classmethod
    def of_fmacs(cls, fmacs: float, dtype: str, **rest: float) -> EventCounts:
        """``fmacs`` FMACs on the ``dtype`` lanes ("fp16" or "fp32") with their SRAM traffic, and ``rest``."""
        read, write = fmac_sram_bytes(fmacs, 4 if dtype == "fp32" else 2)
        lanes = {"fmacs_fp32": fmacs} if dtype == "fp32" else {"fmacs_fp16": fmacs}
        return cls(**lanes, sram_read_bytes=read, sram_write_bytes=write, **rest)

    # written out, not over ``fields``: a serving run adds counts once per stage and decode token
    def __add__(self, other: EventCounts) -> EventCounts:
        return EventCounts(self.fmacs_fp16 + other.fmacs_fp16, self.fmacs_fp32 + other.fmacs_fp32,
                           self.sram_read_bytes + other.sram_read_bytes,
                           self.sram_write_bytes + other.sram_write_bytes,
                           self.wavelet_hops + other.wavelet_hops, self.io_bytes + other.io_bytes,
                           self.instruction_cycles + other.instruction_cycles)

    def scaled(self, k: float) -> EventCounts:
        return EventCounts(k * self.fmacs_fp16, k * self.fmacs_fp32, k * self.sram_read_bytes,
                           k * self.sram_write_bytes, k * self.wavelet_hops, k * self.io_bytes,
                           k * self.instruction_cycles)

    def to_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Energy:
    """A run's energy in joules, by part (``PARTS``), over ``seconds`` on ``systems`` systems."""

    fmac: float
    sram: float
    fabric: float
    io: float
    instruction: float
    static: float
    seconds: float
    systems: int

    @property
    def joules(self) -> float:
        return self.fmac + self.sram + self.fabric + self.io + self.instruction + self.static

    @property
    def dynamic(self) -> float:
        return self.joules - self.static

    @property
    def watts(self) -> float:
        """The mean power over the run, all systems together."""
        return self.joules / self.seconds if self.seconds > 0 else 0.0

    def parts(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in PARTS}


def energy_of(hw: HardwareSpec, counts: EventCounts, seconds: float, systems: int = 1) -> Energy | None:
    """What ``counts`` cost on ``hw``, with ``systems`` systems' floor over ``seconds``; None when the
    hardware has no ``energy`` section."""
    e = hw.energy
    if e is None:
        return None
    return Energy(fmac=counts.fmacs_fp16 * e.fmac_fp16.joules + counts.fmacs_fp32 * e.fmac_fp32.joules,
                  sram=(counts.sram_read_bytes * e.sram_read.joules
                        + counts.sram_write_bytes * e.sram_write.joules),
                  fabric=counts.wavelet_hops * e.wavelet_hop.joules, io=counts.io_bytes * e.io.joules,
                  instruction=counts.instruction_cycles * e.instruction.joules,
                  static=systems * e.static.watts * seconds, seconds=seconds, systems=systems)


def full_load(hw: HardwareSpec, dtype: str = "fp16") -> dict[str, Any]:
    """One second of one system with everything busy: every PE's lanes at the rate its SRAM ports allow
    (an FMAC's operands read and its result written), every PE's instruction stream issuing every cycle
    (beside the lanes, as microthreads let it), every directed mesh link carrying a wavelet each cycle,
    the I/O full both ways. The most the model lets a system draw (None when ``hw`` has no energy
    section): the check against the published system power (docs/validation.md)."""
    elem = 4 if dtype == "fp32" else 2
    read, write = fmac_sram_bytes(1.0, elem)
    lanes = hw.pe.simd_width_fp32 if dtype == "fp32" else hw.pe.simd_width
    per_pe = min(lanes, hw.pe.sram_read_bytes_per_cycle / read, hw.pe.sram_write_bytes_per_cycle / write)
    rows, cols = hw.mesh.rows, hw.mesh.cols
    links = 2 * (rows * (cols - 1) + cols * (rows - 1))  # directed links between mesh neighbours
    counts = EventCounts.of_fmacs(per_pe * hw.pes * hw.clock_hz, dtype,
                                  wavelet_hops=links * hw.clock_hz,
                                  io_bytes=2 * hw.io.bandwidth_bytes_per_s,
                                  instruction_cycles=hw.pes * hw.clock_hz)
    return {"counts": counts, "fmacs_per_cycle_per_pe": per_pe, "energy": energy_of(hw, counts, 1.0)}
