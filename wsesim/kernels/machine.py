"""The PE and fabric as a kernel sees them: the one home of the per-step cycle formulas (docs/model.md §10).

A kernel's schedule is formed from four costs, each from the hardware YAML:

* **stream** — a PE puts B wavelets on its ramp one per cycle: the j-th (from 0) leaves at ``start + j + 1``.
* **hop** — a wavelet crosses the ramp down (``T_R``), ``d`` router hops (``t_h`` each) and the ramp up
  (``T_R``): ``2·T_R + d·t_h`` cycles after it left. Links carry one 32-bit wavelet per cycle per
  direction, so a stream over free links stays one wavelet per cycle end to end.
* **op** — a PE consumes one arriving wavelet per cycle (its ramp's rate), adding it to its own value
  (``T_OP`` = 1 cycle): the wavelet is done ``T_OP`` after it arrives, or after the one before it.
* **compute** — local arithmetic on the SIMD lanes: ``ceil(FMACs / lanes)`` cycles, at least the SRAM
  traffic of an FMAC stream (two operands read, one written per FMAC) over the read and write ports.

So one dependent step of a pipelined reduce costs ``2·T_R + d·t_h + T_OP`` = 6 cycles for a neighbour on
WSE-2: the (2·T_R + 1)·D + L of Luczynski et al.'s model. Nothing here is fitted; every value comes from
``HardwareSpec`` (``fabric.ramp_latency``, ``fabric.hop_latency``, ``pe.simd_width[_fp32]``,
``pe.sram_read``, ``pe.sram_write``, ``fabric.link_width``, ``pe.sram`` less ``pe.reserved_sram``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config.errors import ConfigError
from ..config.hardware import FabricSpec
from ..config.specs import DTYPE_BYTES, HardwareSpec
from ..model.energy import fmac_sram_bytes

T_OP = 1
"""Cycles a PE takes to consume one arriving wavelet (its ramp delivers one a cycle): the add of a reduce."""

KERNEL_DTYPES = ("fp16", "fp32")


@dataclass(frozen=True)
class Machine:
    """The figures of one hardware preset that a kernel's schedule uses, for one data type."""

    name: str
    dtype: str
    rows: int  # the preset's mesh
    cols: int
    clock_hz: float
    lanes: int  # FMACs per cycle in this dtype
    elem_bytes: int
    wavelet_bytes: int  # one wavelet per cycle per direction per link
    read_bytes: float  # SRAM bytes read per cycle
    write_bytes: float  # SRAM bytes written per cycle
    sram_bytes: float  # usable per PE (pe.sram less the runtime's reserve)
    colours: int
    fabric: FabricSpec  # the one physics of a hop (``FabricSpec.latency``)
    issue: float = 0.0  # cycles to start one vector instruction (``pe.instruction_issue``)
    io_bytes: float = 0.0  # system I/O bytes per cycle, each way (``io.bandwidth``): the wafer's edge
    partial_bytes: int = 4  # a partial sum on the fabric (``pe.partial_sum_width``)
    overlapped: bool = True  # a reduction beside the next FMACs (``pe.reduction``)
    mixed_lanes: int = 2  # 16-bit products into fp32, fp32 adds and moves, a cycle (``pe.simd_width_mixed``)
    microthreads: int = 8  # asynchronous DSD operations in flight at once (``pe.microthreads``)
    reroutes: int = 0  # colours an allreduce re-routes when it turns axis (``fabric.reroute_colours``)

    @classmethod
    def of(cls, hw: HardwareSpec, dtype: str) -> Machine:
        if dtype not in KERNEL_DTYPES:
            raise ConfigError(f"expected one of {', '.join(KERNEL_DTYPES)}, got \"{dtype}\"", path="dtype")
        pe, fab = hw.pe, hw.fabric
        return cls(name=hw.name, dtype=dtype, rows=hw.mesh.rows, cols=hw.mesh.cols, clock_hz=hw.clock_hz,
                   lanes=pe.simd_width if dtype == "fp16" else pe.simd_width_fp32,
                   elem_bytes=DTYPE_BYTES[dtype], wavelet_bytes=max(1, round(fab.link_bytes_per_cycle)),
                   read_bytes=pe.sram_read_bytes_per_cycle, write_bytes=pe.sram_write_bytes_per_cycle,
                   sram_bytes=hw.usable_sram_bytes_per_pe,
                   colours=fab.colours, fabric=fab,
                   issue=pe.instruction_issue_cycles, io_bytes=hw.io_bytes_per_cycle,
                   partial_bytes=max(1, round(pe.partial_sum_bytes)), overlapped=pe.reduction == "overlapped",
                   mixed_lanes=pe.simd_width_mixed, microthreads=pe.microthreads,
                   reroutes=fab.reroute_colours)

    # ------------------------------------------------------------------------------------ formulas
    @property
    def per_wavelet(self) -> int:
        """Elements per wavelet (2 fp16 or 1 fp32 in a 32-bit wavelet)."""
        return max(1, self.wavelet_bytes // self.elem_bytes)

    @property
    def peak_flops_per_cycle(self) -> int:
        """FLOP per cycle per PE in this dtype (an FMAC is 2)."""
        return 2 * self.lanes

    def wavelets(self, elements: int) -> int:
        """Wavelets that carry ``elements`` values."""
        return -(-int(elements) // self.per_wavelet)

    def latency(self, hops):  # noqa: ANN001, ANN201 (ints or arrays)
        """Ramp down, ``hops`` router hops, ramp up: 2·T_R + d·t_h (``FabricSpec.latency``, the one home)."""
        return self.fabric.latency(hops)

    def path(self, steps: int, hops: int) -> float:
        """The latency of ``steps`` dependent transfers over ``hops`` hops in all: both ramps of each
        step and every hop, steps·2·T_R + hops·t_h (a collective's communication along its slowest path)."""
        return steps * self.latency(0) + hops * self.fabric.hop_latency_cycles

    def step(self, hops: int) -> float:
        """One dependent step: the wavelet's latency over ``hops`` and the op: 2·T_R + d·t_h + T_OP."""
        return self.latency(hops) + T_OP

    def transfer(self, wavelets: int, hops: int) -> int:
        """A lone stream of ``wavelets`` over ``hops``, from the cycle it starts to the cycle its last
        wavelet is consumed: B + 2·T_R + d·t_h + T_OP − 1 + 1 = B + step(d) (the stream's j-th leaves at
        j + 1)."""
        return wavelets + self.step(hops) if wavelets > 0 else 0

    def compute(self, fmacs: float) -> int:
        """Cycles of ``fmacs`` FMACs on one PE: the lanes, or the SRAM ports if they are slower (each
        FMAC reads two operands and writes one)."""
        if fmacs <= 0:
            return 0
        lanes = math.ceil(fmacs / self.lanes)
        read, written = fmac_sram_bytes(fmacs, self.elem_bytes)
        ports = max(math.ceil(read / self.read_bytes), math.ceil(written / self.write_bytes))
        return max(lanes, ports)

    def instructions(self, count: float, length: float) -> tuple[float, float]:
        """(compute, issue) cycles of ``count`` vector instructions of ``length`` elements each, one
        after another on one PE: count · compute(length) on the lanes, count · issue to start them."""
        if count <= 0 or length <= 0:
            return 0.0, 0.0
        return float(count * self.compute(length)), float(count * self.issue)

    @property
    def turn(self) -> float:
        """Issue cycles of an allreduce turning from one axis to the other: each re-routed colour's
        config read, masked and written (WaferLLM's ``reconfig_allreduce_axis``), one issue each."""
        return self.reroutes * self.issue

    def seconds(self, cycles: float) -> float:
        return cycles / self.clock_hz

    def check_grid(self, rows: int, cols: int) -> None:
        if rows < 1 or cols < 1 or rows > self.rows or cols > self.cols:
            raise ConfigError(f"expected a grid of PEs within the {self.name} mesh "
                              f"({self.rows} x {self.cols}), got {rows} x {cols}", path="grid")
