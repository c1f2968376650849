"""Frozen, strict models of wsesim's inputs: one model per YAML section.

Quantities are parsed once, at validation, into floats in base units; attribute names carry the
unit (``sram_bytes``, ``clock_hz``) while the YAML keys stay short (``sram``, ``clock``). Unknown keys,
bare numbers where a unit is needed, and strings where a number is needed are all refused.
Nothing here reads files: that is ``wsesim.config.loader``'s job.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from .errors import ConfigError, UnitError
from .units import parse_quantity


def _quantity(dimension: str) -> BeforeValidator:
    def parse(value: Any) -> float:
        try:
            return parse_quantity(value, dimension)  # type: ignore[arg-type]
        except UnitError as e:
            raise PydanticCustomError("quantity", "{msg}", {"msg": e.message}) from None

    return BeforeValidator(parse)


Size = Annotated[float, _quantity("size"), Field(gt=0)]
Frequency = Annotated[float, _quantity("frequency"), Field(gt=0)]
Bandwidth = Annotated[float, _quantity("bandwidth"), Field(gt=0)]
Cycles = Annotated[float, _quantity("cycles"), Field(ge=0)]
Fraction = Annotated[float, _quantity("fraction"), Field(ge=0, lt=1)]
PositiveInt = Annotated[int, Field(gt=0)]

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
DType = Literal["fp32", "bf16", "fp16"]


def _fail(message: str) -> PydanticCustomError:
    return PydanticCustomError("cross_field", "{msg}", {"msg": message})


class Spec(BaseModel):
    """Base of every spec: frozen, strict, unknown keys refused, YAML keys by alias."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=False)


# ---------------------------------------------------------------------------------------------- hardware


class MeshSpec(Spec):
    """The usable rectangle of PEs (rows × cols)."""

    rows: PositiveInt
    cols: PositiveInt


class PESpec(Spec):
    """One processing element: SRAM, datapath, and the SRAM the runtime keeps for itself."""

    sram_bytes: Size = Field(alias="sram")
    simd_width: PositiveInt  # fp16 FMACs per cycle: 2·simd_width FLOP per cycle
    sram_bytes_per_cycle: Size = Field(alias="sram_bandwidth")  # bytes read + written per cycle
    reserved_fraction: Fraction = Field(alias="reserved_sram")  # code, runtime buffers, routing tables


class FabricSpec(Spec):
    """The on-wafer network: one link per direction between mesh neighbours."""

    link_bytes_per_cycle: Size = Field(alias="link_width")  # one wavelet per cycle per direction
    hop_latency_cycles: Cycles = Field(alias="hop_latency")
    injection_latency_cycles: Cycles = Field(alias="injection_latency")  # dispatch to first wavelet on the wire
    colours: PositiveInt  # routable colours (virtual channels) per PE


class IOSpec(Spec):
    """The off-wafer link to MemoryX (weights in) and back (weight gradients out)."""

    bandwidth_bytes_per_s: Bandwidth = Field(alias="bandwidth")  # per direction


class RuntimeSpec(Spec):
    """Global calibration parameters of the execution model (see the README's Calibration table)."""

    task_overhead_cycles: Cycles = Field(alias="task_overhead")  # fixed cost of launching one op on a region
    gemm_efficiency: Annotated[float, _quantity("fraction"), Field(gt=0, le=1)]  # of peak FMAC rate, steady state
    staging_bytes: Size = Field(alias="staging_buffer")  # per PE, SRAM set aside for streamed weights


class HardwareSpec(Spec):
    """A wafer-scale processor: mesh, PE, fabric, off-wafer I/O and runtime parameters."""

    kind: Literal["hardware"] = "hardware"
    name: str
    description: str = ""
    mesh: MeshSpec
    clock_hz: Frequency = Field(alias="clock")
    pe: PESpec
    fabric: FabricSpec
    io: IOSpec
    runtime: RuntimeSpec

    @field_validator("runtime")
    @classmethod
    def _staging_fits(cls, runtime: RuntimeSpec, info: ValidationInfo) -> RuntimeSpec:
        pe = info.data.get("pe")
        if pe is not None:
            usable = pe.sram_bytes * (1 - pe.reserved_fraction)
            if runtime.staging_bytes >= usable:
                raise _fail(f"staging_buffer ({runtime.staging_bytes:g} B) must be smaller than the unreserved "
                            f"SRAM per PE ({usable:g} B)")
        return runtime

    # derived totals ------------------------------------------------------------------------------
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
        }


# ------------------------------------------------------------------------------------------------- model


class ModelSpec(Spec):
    """A decoder-only MoE transformer, named as in its Hugging Face config.json where possible."""

    kind: Literal["model"] = "model"
    name: str
    description: str = ""
    hidden_size: PositiveInt
    layers: PositiveInt
    heads: PositiveInt
    kv_heads: PositiveInt
    head_dim: PositiveInt
    experts: PositiveInt
    top_k: PositiveInt
    expert_intermediate: PositiveInt
    shared_expert_intermediate: Annotated[int, Field(ge=0)] = 0
    vocab_size: PositiveInt
    tie_word_embeddings: bool = False
    dtype: DType = "bf16"

    @field_validator("kv_heads")
    @classmethod
    def _heads_divisible(cls, kv_heads: int, info: ValidationInfo) -> int:
        heads = info.data.get("heads")
        if heads is not None and heads % kv_heads:
            raise _fail(f"expected a divisor of heads ({heads}), got {kv_heads}")
        return kv_heads

    @field_validator("top_k")
    @classmethod
    def _top_k_le_experts(cls, top_k: int, info: ValidationInfo) -> int:
        experts = info.data.get("experts")
        if experts is not None and top_k > experts:
            raise _fail(f"expected at most experts ({experts}), got {top_k}")
        return top_k

    @property
    def bytes_per_value(self) -> int:
        return DTYPE_BYTES[self.dtype]


# ---------------------------------------------------------------------------------------------- training

_ZIPF = re.compile(r"^zipf:([0-9]*\.?[0-9]+)$")


class TrainingSpec(Spec):
    """One training step: sequence length, the BTA tiling (B per tile, G tiles) and memory policies."""

    seq_len: PositiveInt = 4096
    batch_per_tile: PositiveInt | Literal["auto"] = "auto"
    tiles: PositiveInt = 1
    activations: Literal["store", "recompute"] = "recompute"
    attention_kernel: Literal["standard", "flash"] = "standard"
    attention_tile: PositiveInt = 128  # flash kernel's square tile, in tokens
    accumulate_dtype: DType = "fp32"  # precision of the backward pass's S×S matrices
    routing: str = "uniform"
    seed: Annotated[int, Field(ge=0)] = 0

    @field_validator("routing")
    @classmethod
    def _routing_kind(cls, routing: str) -> str:
        if routing != "uniform" and not _ZIPF.match(routing):
            raise _fail(f'expected "uniform" or "zipf:<alpha>" (e.g. "zipf:1.2"), got "{routing}"')
        return routing

    @property
    def zipf_alpha(self) -> float | None:
        m = _ZIPF.match(self.routing)
        return float(m.group(1)) if m else None


_BLOCK = re.compile(r"^block:([1-9][0-9]*)$")
_GRANULARITY_HELP = '"pe" or "block:<K>" (e.g. "block:16")'


def parse_granularity(granularity: str) -> int:
    """PEs per side of one mesh node: ``"pe"`` → 1, ``"block:K"`` → K (the one home of that grammar).
    Raises ``ConfigError`` (key ``granularity``) for anything else."""
    if granularity == "pe":
        return 1
    m = _BLOCK.match(granularity) if isinstance(granularity, str) else None
    if not m:
        raise ConfigError(f"expected {_GRANULARITY_HELP}, got {granularity!r}", path="granularity")
    return int(m.group(1))


class SimulationSpec(Spec):
    """How the simulation is run: fabric fidelity, mesh granularity, expert placement, and which event
    engine runs the step (``fast``, or the plain-SimPy ``reference`` that vouches for it)."""

    fabric: Literal["flow", "packet"] = "flow"
    granularity: str = "block:16"
    placement: Literal["grid", "snake", "random"] = "grid"
    engine: Literal["fast", "reference"] = "fast"

    @field_validator("granularity")
    @classmethod
    def _granularity(cls, granularity: str) -> str:
        try:
            parse_granularity(granularity)
        except ConfigError:
            raise _fail(f'expected {_GRANULARITY_HELP}, got "{granularity}"') from None
        return granularity

    @property
    def block(self) -> int:
        """PEs per side of one mesh node (1 at ``pe`` granularity)."""
        return parse_granularity(self.granularity)


class ExperimentSpec(Spec):
    """A hardware, a model, a training setting and simulation settings: one simulated step."""

    kind: Literal["experiment"] = "experiment"
    name: str = ""
    description: str = ""
    hardware: HardwareSpec
    model: ModelSpec
    training: TrainingSpec = TrainingSpec()
    simulation: SimulationSpec = SimulationSpec()

    @field_validator("simulation")
    @classmethod
    def _block_fits(cls, simulation: SimulationSpec, info: ValidationInfo) -> SimulationSpec:
        hw = info.data.get("hardware")
        if hw is not None and simulation.block > min(hw.mesh.rows, hw.mesh.cols) // 2:
            raise _fail(f"expected a block of at most half the mesh's shorter side "
                        f"({min(hw.mesh.rows, hw.mesh.cols) // 2} PEs, so that experts get regions of their own), "
                        f'got "{simulation.granularity}"')
        return simulation


SPEC_KINDS: dict[str, type[Spec]] = {
    "hardware": HardwareSpec,
    "model": ModelSpec,
    "experiment": ExperimentSpec,
}
