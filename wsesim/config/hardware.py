"""The hardware specs (``kind: hardware``): mesh, PE, fabric, off-wafer I/O, MemoryX and the runtime's
calibration parameters, each quantity with its physical bounds and their reasoning. Re-exported by
``wsesim.config.specs``, the home of every spec."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from .base import Spec
from .base import fail as _fail
from .fields import Description, Name, count, quantity

# ---------------------------------------------------------------------------------------------- hardware


# WSE-3 has 762 x 1,172 PEs on a 215 mm die; 16,384 a side is 14x that: PEs of 13 um, or a 4 x 4 array
# of such wafers behind one mesh.
MeshSide = count(16_384)
# 850 MHz-1.1 GHz on WSE-2/3, ~6 GHz the fastest CMOS logic; 100 GHz is past any digital clock, and
# 1 MHz admits FPGA or emulator prototypes (10-100 MHz).
Clock = quantity("frequency", "1 MHz", "100 GHz", "850 MHz")
# 48 KiB per PE on WSE-2/3, 624 KiB an IPU tile, 1.5 MiB a Tensix core; up to 1 TiB lets a "PE" stand
# for a whole package with its HBM (141 GB on an H200); below 1 KiB no PE holds its own code.
PESram = quantity("size", "1 KiB", "1 TiB", "48 KiB")
# fp16 FMACs per cycle: 4 on WSE-2, ~1,024 an H100 SM's tensor cores; 65,536 is 64x that.
SimdWidth = count(65_536)
# asynchronous DSD operations in flight at once on a PE: 8 on WSE-2/3 (the SDK); 1,024 is past any core
Microthreads = count(1_024)
# 24 B per cycle on WSE-2, 128 B an SM's shared memory; 1 MiB per cycle is 8,000x that.
SramPort = quantity("size", "1 B", "1 MiB", "24 B")
# the runtime's share of SRAM: at least nothing, always less than all of it
ReservedShare = quantity("fraction", "0 %", "100 %", "25 %", below=True)


class MeshSpec(Spec):
    """The usable rectangle of PEs (rows × cols)."""

    rows: MeshSide
    cols: MeshSide


# tens of cycles per instruction on WSE-2 (calibrated, hardware/wse2.yaml); 100,000 is past any loop.
IssueCost = quantity("cycles", "0 cycles", "100000 cycles", "0 cycles")
# a partial sum on the fabric: 16 bit (the compute dtype) to 32 bit (fp32 accumulation) in practice; 8 bit
# is the narrowest number format a datapath accumulates in, 64 bit fp64
PartialSumWidth = quantity("size", "8 bit", "64 bit", "32 bit")


class PESpec(Spec):
    """One processing element: SRAM, datapath, and the SRAM the runtime keeps for itself."""

    sram_bytes: PESram = Field(alias="sram")
    simd_width: SimdWidth  # fp16 FMACs per cycle: 2·simd_width FLOP per cycle
    sram_bytes_per_cycle: SramPort = Field(alias="sram_bandwidth")  # bytes read + written per cycle
    reserved_fraction: ReservedShare = Field(alias="reserved_sram")  # code, runtime buffers, routing tables
    # Read by the kernel model only (wsesim.kernels); the defaults are WSE-2's, so older files still load.
    simd_width_fp32: SimdWidth = 1  # fp32 FMACs per cycle: 2·simd_width_fp32 FLOP per cycle
    # 16-bit products accumulated in fp32 (@fmachs), and fp32 adds and moves, per cycle
    simd_width_mixed: SimdWidth = 2
    # asynchronous DSD operations a PE runs at once beside its instruction stream (docs/model.md §10.1)
    microthreads: Microthreads = 8
    # SRAM bytes read per cycle (both ports)
    sram_read_bytes_per_cycle: SramPort = Field(16.0, alias="sram_read")
    sram_write_bytes_per_cycle: SramPort = Field(8.0, alias="sram_write")  # SRAM bytes written per cycle
    # cycles a PE spends starting one vector (DSD) instruction before its first element: loading its
    # descriptors, the loop or callback that issues it (docs/model.md §10.1; 0: the lanes alone)
    instruction_issue_cycles: IssueCost = Field(0.0, alias="instruction_issue")
    # the weight-streaming GEMM (docs/model.md §10.7): the width of a partial sum reduced along a row of
    # PEs, and whether that reduction runs beside the next weight row's FMACs (microthreads) or after them
    partial_sum_bytes: PartialSumWidth = Field(4.0, alias="partial_sum_width")
    reduction: Literal["overlapped", "serialised"] = "overlapped"


# one 32-bit wavelet per cycle on WSE-2; a serial link carries 1 bit, the widest on-chip NoC links ~2 kbit;
# 64 KiB (512 kbit) per cycle is 256x that.
LinkWidth = quantity("size", "1 bit", "64 KiB", "32 bit")
# 1-2 cycles per hop on WSE-2, 7 to inject; a hop through SerDes between packages takes hundreds of
# cycles; 100,000 (100 us at 1 GHz) is far past any of them.
Latency = quantity("cycles", "0 cycles", "100000 cycles", "2 cycles")
# 24 routable colours on WSE-2; routers have tens of virtual channels; 65,536 is a 16-bit colour field.
Colours = count(65_536)
# colours a collective re-routes when it turns axis: 0 (WaferLLM's WSE-2 code) or 5 (its WSE-3 code); at most
# every colour a PE has
Reroutes = count(65_536, low=0)


class FabricSpec(Spec):
    """The on-wafer network: one link per direction between mesh neighbours, and the one physics of a
    hop that every model reads (``latency``: the training step's fabric and op costs, and the kernels)."""

    link_bytes_per_cycle: LinkWidth = Field(alias="link_width")  # one wavelet per cycle per direction
    ramp_latency_cycles: Latency = Field(alias="ramp_latency")  # PE <-> its own router, each way
    hop_latency_cycles: Latency = Field(alias="hop_latency")  # per router hop of a pipelined stream
    colours: Colours  # routable colours (virtual channels) per PE; the kernels' and the fabric's limit
    # colours whose routes WaferLLM's allreduce resets at run time when it turns from one axis to the other
    # (each a colour-config read-modify-write, charged one pe.instruction_issue; docs/model.md §10.2)
    reroute_colours: Reroutes = 0

    def latency(self, hops: Any) -> Any:
        """Cycles from a wavelet leaving a PE to its arrival at a PE ``hops`` router hops away: down the
        sender's ramp, the hops, up the receiver's ramp, 2·T_R + d·t_h (scalars or arrays)."""
        return 2 * self.ramp_latency_cycles + hops * self.hop_latency_cycles


# 1.2 Tbit/s (150 GB/s) per direction on WSE-2/3, ~1.2 TB/s an HBM3e stack; 1 PB/s is 800x WSE-3's I/O,
# and 1 MB/s is slower than any host link.
IOBandwidth = quantity("bandwidth", "1 MB/s", "1 PB/s", "1.2 Tbit/s")


class IOSpec(Spec):
    """The off-wafer link to MemoryX (weights in) and back (weight gradients out)."""

    bandwidth_bytes_per_s: IOBandwidth = Field(alias="bandwidth")  # per direction


# MemoryX's aggregate memory throughput in the optimizer step: ~3.6 TB/s assumed for the CS-2/CS-3
# clusters (12 DDR5 servers), 150 GB/s-15 TB/s plausible; 1 MB/s is slower than any host's memory, and
# 10 PB/s is ~700x the largest plausible MemoryX.
UpdateBandwidth = quantity("bandwidth", "1 MB/s", "10 PB/s", "3.6 TB/s")


class MemoryXSpec(Spec):
    """The off-wafer weight store (MemoryX): how fast it steps the optimizer (docs/model.md §2.5)."""

    update_bandwidth_bytes_per_s: UpdateBandwidth = Field(alias="update_bandwidth")  # bytes read + written


# 200-2,000 cycles to launch an op on WSE-2 (README, Calibration); 100 million (0.1 s at 1 GHz per op) is
# past any runtime.
TaskOverhead = quantity("cycles", "0 cycles", "100000000 cycles", "500 cycles")
# 40-75 % of peak inside a GEMM (WaferLLM); below 0.1 % nothing is a GEMM any more.
GemmEfficiency = quantity("fraction", "0.1 %", "100 %", "45 %")
# a few KiB on WSE-2; at least one byte, and below the unreserved SRAM (checked against pe.sram)
Staging = quantity("size", "1 B", "1 TiB", "6 KiB")


# hundreds of cycles per kernel call on WSE-2 (calibrated, hardware/wse2.yaml); 100 million is past any.
KernelLaunch = quantity("cycles", "0 cycles", "100000000 cycles", "0 cycles")


class RuntimeSpec(Spec):
    """Global calibration parameters of the execution model (see the README's Calibration table)."""

    # fixed cost of launching one op on a region
    task_overhead_cycles: TaskOverhead = Field(alias="task_overhead")
    gemm_efficiency: GemmEfficiency  # of peak FMAC rate, steady state
    staging_bytes: Staging = Field(alias="staging_buffer")  # per PE, SRAM set aside for streamed weights
    # fixed cost of each kernel of a served model's stage program: the call, its set-up, the checks
    kernel_launch_cycles: KernelLaunch = Field(0.0, alias="kernel_launch")
    # the same under ``inference.software: production``, for each fused kernel (None: kernel_launch)
    fused_launch_cycles: KernelLaunch | None = Field(None, alias="fused_launch")

    @field_validator("fused_launch_cycles")
    @classmethod
    def _fused_no_dearer(cls, fused: float | None, info: ValidationInfo) -> float | None:
        """A fused kernel starts as a research one does, with fewer checks: never dearer, so that the
        production stack is never slower than the research code on any kernel (docs/model.md §11.11)."""
        launch = info.data.get("kernel_launch_cycles")
        if fused is not None and launch is not None and fused > launch:
            raise _fail(f"expected at most runtime.kernel_launch ({launch:g} cycles: a fused kernel has "
                        f"fewer checks, not more), got {fused:g} cycles")
        return fused

    @property
    def production_launch_cycles(self) -> float:
        """What starting one fused kernel of the production stack costs (``kernel_launch`` when unset)."""
        return self.kernel_launch_cycles if self.fused_launch_cycles is None else self.fused_launch_cycles


# ------------------------------------------------------------------------------------------ energy

# An fp16 FMA is ~1.5 pJ at 45 nm, a 64-bit DRAM access 1.3-2.6 nJ (Horowitz, ISSCC 2014); 10 nJ per
# event is past anything on a chip or its I/O, and 0 says an event costs nothing beyond the floor.
EventJoules = quantity("energy", "0 J", "10 nJ", "0.3 pJ")
# a CS-3 draws ~23 kW; 10 MW is a data hall, and a floor of 0 W is a machine with no idle draw.
FloorWatts = quantity("power", "0 W", "10 MW", "10 kW")
EnergyLabel = Literal["measured", "published", "modelled"]
"""Where a value comes from: measured on the machine, published by its maker or others, or modelled
from published figures of its process (the reasoning beside the value)."""


class EventEnergy(Spec):
    """The energy of one event, with where the value comes from."""

    joules: EventJoules = Field(alias="value")
    label: EnergyLabel


class FloorPower(Spec):
    """A power the system draws whenever it is on, with where the value comes from."""

    watts: FloorWatts = Field(alias="value")
    label: EnergyLabel


class EnergySpec(Spec):
    """What each event the simulation counts costs in energy, and the system's floor (docs/model.md §12):
    read by ``wsesim.model.energy``, the one home of the arithmetic."""

    fmac_fp16: EventEnergy  # one FMAC on the fp16 lanes (bf16 runs on them too)
    fmac_fp32: EventEnergy  # one FMAC on the fp32 lanes
    sram_read: EventEnergy  # one byte read from a PE's SRAM
    sram_write: EventEnergy  # one byte written to a PE's SRAM
    wavelet_hop: EventEnergy  # one wavelet over one router hop: the router and the link to the next PE
    io: EventEnergy  # one byte through the system's I/O ports (in or out)
    # one cycle of a PE's instruction stream: the scalar instruction it issues in it (fetch, decode, register
    # file, control); a DSD operation's issue is pe.instruction_issue of them. Absent: 0 (files written
    # before it, whose instructions cost nothing)
    instruction: EventEnergy = Field(default_factory=lambda: EventEnergy.model_validate(
        {"value": "0 J", "label": "modelled"}))
    static: FloorPower  # drawn whenever the system is on: cooling, power conversion, leakage, clocks

    def events(self) -> dict[str, EventEnergy | FloorPower]:
        """Every value by its YAML key, in file order (for tables and docs)."""
        return {name: getattr(self, name) for name in type(self).model_fields}


class HardwareSpec(Spec):
    """A wafer-scale processor: mesh, PE, fabric, off-wafer I/O and runtime parameters, and (optionally)
    what its events cost in energy (``energy``; without it, energy results are n/a)."""

    kind: Literal["hardware"] = "hardware"
    name: Name
    description: Description = ""
    mesh: MeshSpec
    clock_hz: Clock = Field(alias="clock")
    pe: PESpec
    fabric: FabricSpec
    io: IOSpec
    memoryx: MemoryXSpec
    runtime: RuntimeSpec
    energy: EnergySpec | None = None

    @field_validator("energy")
    @classmethod
    def _spends_something(cls, energy: EnergySpec | None) -> EnergySpec | None:
        """A zero may be right for one event or the floor, not for all: a machine that spends nothing
        has no joules per token to divide by (leave the section out and energy is n/a)."""
        if energy is not None and not any(e.joules if isinstance(e, EventEnergy) else e.watts
                                          for e in energy.events().values()):
            raise _fail("expected at least one event or the static floor above 0, got every value 0 (a "
                        "machine that spends no energy; leave the section out for energy n/a)")
        return energy

    @field_validator("runtime")
    @classmethod
    def _staging_fits(cls, runtime: RuntimeSpec, info: ValidationInfo) -> RuntimeSpec:
        pe = info.data.get("pe")
        if pe is not None:
            usable = pe.sram_bytes * (1 - pe.reserved_fraction)
            if runtime.staging_bytes >= usable:
                raise _fail(f"staging_buffer ({runtime.staging_bytes:g} B) must be smaller than the "
                            f"unreserved SRAM per PE ({usable:g} B)")
        return runtime

    # derived totals ------------------------------------------------------------------------------
    @property
    def system(self) -> str:
        """What one system of this hardware is, in words a count goes before: a wafer."""
        return "wafer"

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The model dtypes a PE computes in: fp32 on its own lanes, bf16 and fp16 on the 16-bit lanes
        (``kernels.cost.lanes_dtype``); it has no 8-bit arithmetic."""
        return ("fp32", "bf16", "fp16")

    @property
    def pes(self) -> int:
        return self.mesh.rows * self.mesh.cols

    @property
    def flops_per_cycle_per_pe(self) -> int:
        return 2 * self.pe.simd_width

    @property
    def usable_sram_bytes_per_pe(self) -> float:
        return self.pe.sram_bytes * (1 - self.pe.reserved_fraction)

    @property
    def io_bytes_per_cycle(self) -> float:
        return self.io.bandwidth_bytes_per_s / self.clock_hz

    def totals(self) -> dict[str, float]:
        """Whole-wafer figures, for ``wsesim hardware show`` and the physics-bounds tests."""
        link_bits = self.fabric.link_bytes_per_cycle * 8
        return {
            "pes": self.pes,
            "sram_total_bytes": self.pes * self.pe.sram_bytes,
            "peak_flops_per_s": self.pes * self.flops_per_cycle_per_pe * self.clock_hz,
            "sram_bandwidth_bytes_per_s": self.pes * self.pe.sram_bytes_per_cycle * self.clock_hz,
            # counted as Cerebras counts it: 4 fabric ports per PE, each in and out
            "fabric_bandwidth_bits_per_s": self.pes * 8 * link_bits * self.clock_hz,
            # a cut across the longer side crosses min(rows, cols) links, each carrying both directions
            "bisection_bandwidth_bytes_per_s": min(self.mesh.rows, self.mesh.cols) * 2
            * self.fabric.link_bytes_per_cycle * self.clock_hz,
            "io_bandwidth_bytes_per_s": self.io.bandwidth_bytes_per_s,
            "memoryx_update_bandwidth_bytes_per_s": self.memoryx.update_bandwidth_bytes_per_s,
        }
