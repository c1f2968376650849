"""Frozen, strict models of wsesim's inputs: one model per YAML section.

Quantities are parsed once, at validation, into floats in base units; attribute names carry the
unit (``sram_bytes``, ``clock_hz``) while the YAML keys stay short (``sram``, ``clock``). Unknown keys,
bare numbers where a unit is needed, and strings where a number is needed are all refused.
Nothing here reads files: that is ``wsesim.config.loader``'s job.

Every number has physical bounds, each with its reasoning beside it: wide enough for every real chip
and model and any plausible successor (a margin of 10x to 1000x past today's largest), narrow enough to
refuse nonsense ("1e-300 B/s", "1e308 cycles") before it reaches the simulation as an overflow or a
division by zero. The field types (and their JSON Schemas) are in ``wsesim.config.fields``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator

from . import model_rules
from .base import Spec
from .base import fail as _fail
from .cluster import ClusterSpec, InterconnectSpec, split_problem
from .errors import ConfigError, shown
from .fields import Description, Name, count, quantity

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
DType = Literal["fp32", "bf16", "fp16"]


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
# 24 B per cycle on WSE-2, 128 B an SM's shared memory; 1 MiB per cycle is 8,000x that.
SramPort = quantity("size", "1 B", "1 MiB", "24 B")
# the runtime's share of SRAM: at least nothing, always less than all of it
ReservedShare = quantity("fraction", "0 %", "100 %", "25 %", below=True)


class MeshSpec(Spec):
    """The usable rectangle of PEs (rows × cols)."""

    rows: MeshSide
    cols: MeshSide


class PESpec(Spec):
    """One processing element: SRAM, datapath, and the SRAM the runtime keeps for itself."""

    sram_bytes: PESram = Field(alias="sram")
    simd_width: SimdWidth  # fp16 FMACs per cycle: 2·simd_width FLOP per cycle
    sram_bytes_per_cycle: SramPort = Field(alias="sram_bandwidth")  # bytes read + written per cycle
    reserved_fraction: ReservedShare = Field(alias="reserved_sram")  # code, runtime buffers, routing tables
    # Read by the kernel model only (wsesim.kernels); the defaults are WSE-2's, so older files still load.
    simd_width_fp32: SimdWidth = 1  # fp32 FMACs per cycle: 2·simd_width_fp32 FLOP per cycle
    sram_read_bytes_per_cycle: SramPort = Field(16.0, alias="sram_read")  # SRAM bytes read per cycle (both ports)
    sram_write_bytes_per_cycle: SramPort = Field(8.0, alias="sram_write")  # SRAM bytes written per cycle


# one 32-bit wavelet per cycle on WSE-2; a serial link carries 1 bit, the widest on-chip NoC links ~2 kbit;
# 64 KiB (512 kbit) per cycle is 256x that.
LinkWidth = quantity("size", "1 bit", "64 KiB", "32 bit")
# 1-2 cycles per hop on WSE-2, 7 to inject; a hop through SerDes between packages takes hundreds of
# cycles; 100,000 (100 us at 1 GHz) is far past any of them.
Latency = quantity("cycles", "0 cycles", "100000 cycles", "2 cycles")
# 24 routable colours on WSE-2; routers have tens of virtual channels; 65,536 is a 16-bit colour field.
Colours = count(65_536)
# 32 paths per PE router on WSE-2 (a 5-bit route code); 65,536 is a 16-bit code.
RoutePaths = count(65_536)


class FabricSpec(Spec):
    """The on-wafer network: one link per direction between mesh neighbours."""

    link_bytes_per_cycle: LinkWidth = Field(alias="link_width")  # one wavelet per cycle per direction
    hop_latency_cycles: Latency = Field(alias="hop_latency")
    injection_latency_cycles: Latency = Field(alias="injection_latency")  # dispatch to first wavelet on the wire
    colours: Colours  # routable colours (virtual channels) per PE
    # Read by the kernel model only (wsesim.kernels); the defaults are WSE-2's, so older files still load.
    ramp_latency_cycles: Latency = Field(2.0, alias="ramp_latency")  # PE <-> its own router, each way
    router_hop_latency_cycles: Latency = Field(1.0, alias="router_hop_latency")  # per hop of a pipelined stream
    route_paths: RoutePaths = 32  # routing paths one PE's router can hold (its route-code width)


# 1.2 Tbit/s (150 GB/s) per direction on WSE-2/3, ~1.2 TB/s an HBM3e stack; 1 PB/s is 800x WSE-3's I/O,
# and 1 MB/s is slower than any host link.
IOBandwidth = quantity("bandwidth", "1 MB/s", "1 PB/s", "1.2 Tbit/s")


class IOSpec(Spec):
    """The off-wafer link to MemoryX (weights in) and back (weight gradients out)."""

    bandwidth_bytes_per_s: IOBandwidth = Field(alias="bandwidth")  # per direction


# 200-2,000 cycles to launch an op on WSE-2 (README, Calibration); 100 million (0.1 s at 1 GHz per op) is
# past any runtime.
TaskOverhead = quantity("cycles", "0 cycles", "100000000 cycles", "500 cycles")
# 40-75 % of peak inside a GEMM (WaferLLM); below 0.1 % nothing is a GEMM any more.
GemmEfficiency = quantity("fraction", "0.1 %", "100 %", "45 %")
# a few KiB on WSE-2; at least one byte, and below the unreserved SRAM (checked against pe.sram)
Staging = quantity("size", "1 B", "1 TiB", "6 KiB")


class RuntimeSpec(Spec):
    """Global calibration parameters of the execution model (see the README's Calibration table)."""

    task_overhead_cycles: TaskOverhead = Field(alias="task_overhead")  # fixed cost of launching one op on a region
    gemm_efficiency: GemmEfficiency  # of peak FMAC rate, steady state
    staging_bytes: Staging = Field(alias="staging_buffer")  # per PE, SRAM set aside for streamed weights


class HardwareSpec(Spec):
    """A wafer-scale processor: mesh, PE, fabric, off-wafer I/O and runtime parameters."""

    kind: Literal["hardware"] = "hardware"
    name: Name
    description: Description = ""
    mesh: MeshSpec
    clock_hz: Clock = Field(alias="clock")
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


# Model sizes, against the largest published configs: hidden 16,384 (Llama 3.1 405B), 126 layers, 128
# heads of at most 256, 384 experts (Kimi K2), a 53,248 FFN, a 262,144 vocabulary (Gemma 3). Each bound
# is 64x-130x past that and a power of two. (Million-expert PEER layers are single-neuron experts, not
# what an expert region models.)
Width = count(1_048_576)  # hidden_size, expert_intermediate
WidthOrNone = count(1_048_576, low=0)  # shared_expert_intermediate (0: no shared expert)
Layers = count(16_384)
LayersOrNone = count(16_384, low=0)  # dense_layers
Heads = count(16_384)  # heads, kv_heads
HeadDim = count(65_536)
ExpertsOrNone = count(65_536, low=0)  # experts, top_k (0: a dense model)
Vocabulary = count(16_777_216)


class ModelSpec(Spec):
    """A decoder-only MoE transformer, named as in its Hugging Face config.json where possible."""

    kind: Literal["model"] = "model"
    name: Name
    description: Description = ""
    hidden_size: Width
    layers: Layers
    heads: Heads
    kv_heads: Heads
    head_dim: HeadDim  # per head; with MLA, the part of q and k without rotary embedding (qk_nope_head_dim)
    # Multi-head latent attention (DeepSeek-V2/V3), all 0 for standard (GQA) attention:
    kv_lora_rank: Annotated[int, Field(ge=0)] = 0  # k and v up-projected from a shared latent of this width
    q_lora_rank: Annotated[int, Field(ge=0)] = 0  # q through a down/up projection of this rank (0: one q_proj)
    qk_rope_head_dim: Annotated[int, Field(ge=0)] = 0  # rotary part of each head's q and k, beside head_dim
    v_head_dim: Annotated[int, Field(ge=0)] = 0  # each head's v width (0: head_dim)
    experts: ExpertsOrNone = Field(0, validate_default=True)  # 0: a dense model (every layer a dense FFN)
    top_k: ExpertsOrNone = Field(0, validate_default=True)  # 1 to experts (0 with no experts)
    expert_intermediate: WidthOrNone = Field(0, validate_default=True)
    shared_expert_intermediate: WidthOrNone = 0
    # dense FFN layers (docs/model.md §3.6): the first dense_layers (all with experts 0), of width
    # ffn_intermediate (config.json intermediate_size); parallel_block: attention and FFN share the input
    dense_layers: LayersOrNone = Field(0, validate_default=True)
    ffn_intermediate: WidthOrNone = Field(0, validate_default=True)
    ffn_activation: Literal["swiglu", "gelu"] = "swiglu"
    parallel_block: bool = False
    vocab_size: Vocabulary
    tie_word_embeddings: bool = False
    dtype: DType = "bf16"

    @field_validator("kv_heads")
    @classmethod
    def _heads_divisible(cls, kv_heads: int, info: ValidationInfo) -> int:
        heads = info.data.get("heads")
        if heads is not None and heads % kv_heads:
            raise _fail(f"expected a divisor of heads ({heads}), got {kv_heads}")
        return kv_heads

    @field_validator("top_k", "expert_intermediate", "shared_expert_intermediate", "dense_layers", "ffn_intermediate")
    @classmethod
    def _layer_kinds(cls, value: int, info: ValidationInfo) -> int:  # MoE and dense keys agree
        if problem := model_rules.problem(info.field_name or "", value, info.data):
            raise _fail(problem)
        return value

    @field_validator("kv_lora_rank")
    @classmethod
    def _latent_kv(cls, kv_lora_rank: int, info: ValidationInfo) -> int:
        heads, kv_heads = info.data.get("heads"), info.data.get("kv_heads")
        if kv_lora_rank and kv_heads is not None and kv_heads != heads:
            raise _fail(f"expected 0 unless kv_heads equals heads ({heads}, got {kv_heads}): multi-head latent "
                        f"attention gives every head its own k and v, got {kv_lora_rank}")
        return kv_lora_rank

    @field_validator("q_lora_rank", "qk_rope_head_dim")
    @classmethod
    def _needs_latent(cls, value: int, info: ValidationInfo) -> int:
        if value and not info.data.get("kv_lora_rank"):
            raise _fail(f"expected 0 without multi-head latent attention (kv_lora_rank 0), got {value}")
        return value

    @property
    def bytes_per_value(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def dense_layer_count(self) -> int:  # the first dense_layers; all of them without experts
        return self.layers if self.experts == 0 else self.dense_layers

    def is_dense(self, layer: int) -> bool:
        return layer < self.dense_layer_count


# ---------------------------------------------------------------------------------------------- training

_ZIPF = re.compile(r"^zipf:([0-9]*\.?[0-9]+)$")
# Measured router skew fits Zipf exponents of about 0.5-2. At 100 the second expert already gets 2^-100
# of the first's tokens (all traffic on top_k experts); past ~300 the weights underflow a double.
ZIPF_MAX = 100
# Training contexts reach 1M-10M tokens; 2^24 (16.8M) per sequence, and per batch or tile count, is past
# any run (a global batch of 2^24 sequences of one token is already 16.8M tokens).
Tokens = count(16_777_216)
Seed = count(2**64 - 1, low=0)  # numpy's seeds are unbounded; 64 bits are plenty


class TrainingSpec(Spec):
    """One training step: sequence length, the BTA tiling (B per tile, G tiles) and memory policies."""

    seq_len: Tokens = 4096
    batch_per_tile: Tokens | Literal["auto"] = "auto"
    tiles: Tokens = 1
    activations: Literal["store", "recompute"] = "recompute"
    attention_kernel: Literal["standard", "flash"] = "standard"
    attention_tile: Tokens = 128  # flash kernel's square tile, in tokens
    accumulate_dtype: DType = "fp32"  # precision of the backward pass's S×S matrices
    # with recompute: "twice" re-runs each layer's attention to rebuild the MoE block's input and again per
    # tile in backward for its S×S internals; "once" keeps the attention output (H values per token per
    # layer, stored) so that backward recomputes each tile's attention only once (docs/model.md §3, §5)
    attention_recompute: Literal["twice", "once"] = "twice"
    # what the weight gradients stream out in: mixed-precision training computes them in the 16-bit
    # compute dtype (fp32 accumulation inside the matmul) and keeps fp32 master weights with the optimizer,
    # which on the Cerebras stack runs in MemoryX, off the wafer; no published figure says otherwise
    weight_gradient_dtype: DType = "bf16"
    routing: str = "uniform"
    seed: Seed = 0
    # gradient accumulation (docs/model.md §2.4): micro_batches of G tiles of B, one after another;
    # global_batch (all systems) instead of B: "auto" picks the fewest micro-batches that fit
    micro_batches: Tokens | Literal["auto"] = "auto"
    global_batch: Tokens | None = Field(None, validate_default=True)

    @field_validator("routing")
    @classmethod
    def _routing_kind(cls, routing: str) -> str:
        m = _ZIPF.match(routing)
        if routing != "uniform" and not (m and float(m.group(1)) <= ZIPF_MAX):
            raise _fail(f'expected "uniform" or "zipf:<alpha>" with alpha from 0 to {ZIPF_MAX} (e.g. "zipf:1.2"), '
                        f'got "{shown(routing)}"')
        return routing

    @field_validator("global_batch")
    @classmethod
    def _global_batch_splits(cls, global_batch: int | None, info: ValidationInfo) -> int | None:
        G, B, N = info.data.get("tiles"), info.data.get("batch_per_tile"), info.data.get("micro_batches")
        if global_batch is not None and None not in (G, B, N) and (problem := split_problem(global_batch, G, B, N)):
            raise _fail(problem)
        return global_batch

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

    # The names of the plug-in tables (config/tables.py); a test checks each Literal equals its table's keys.
    fabric: Literal["flow", "packet", "packet-simpy"] = "flow"  # wsesim.fabric.fidelity.FABRICS
    granularity: str = "block:16"
    placement: Literal["grid", "snake", "random"] = "grid"
    engine: Literal["fast", "reference"] = "fast"  # wsesim.experiments.runner.ENGINES
    # how an MoE layer's experts run (docs/model.md §3): on expert regions that tokens reach over the
    # fabric, or on the whole wafer with each token's k copies kept in place (the Cerebras stack's way)
    moe_mapping: Literal["regions", "in_place"] = "regions"  # wsesim.experiments.mappings.MOE_MAPPINGS
    # what an op's arithmetic costs (docs/model.md §4, §10.5): its FLOPs over one global gemm_efficiency,
    # or the simulated cycles of its GEMMs on the PEs that run it (wsesim.kernels)
    compute: Literal["constant", "kernel"] = "constant"

    @field_validator("granularity")
    @classmethod
    def _granularity(cls, granularity: str) -> str:
        try:
            parse_granularity(granularity)
        except ConfigError:
            raise _fail(f'expected {_GRANULARITY_HELP}, got "{shown(granularity)}"') from None
        return granularity

    @property
    def block(self) -> int:
        """PEs per side of one mesh node (1 at ``pe`` granularity)."""
        return parse_granularity(self.granularity)


class ExperimentSpec(Spec):
    """A hardware, a model, a training setting and simulation settings: one simulated step."""

    kind: Literal["experiment"] = "experiment"
    name: Name = ""
    description: Description = ""
    hardware: HardwareSpec
    model: ModelSpec
    training: TrainingSpec = TrainingSpec()
    simulation: SimulationSpec = SimulationSpec()
    cluster: ClusterSpec = Field(ClusterSpec(), validate_default=True)

    @field_validator("cluster")
    @classmethod
    def _batch_per_system(cls, cluster: ClusterSpec, info: ValidationInfo) -> ClusterSpec:
        t = info.data.get("training")
        if t is not None and t.global_batch is not None and cluster.systems > 1 and (problem := split_problem(
                t.global_batch, t.tiles, t.batch_per_tile, t.micro_batches, cluster.systems)):
            raise _fail(f"training.global_batch: {problem}")
        return cluster

    @field_validator("simulation")
    @classmethod
    def _block_fits(cls, simulation: SimulationSpec, info: ValidationInfo) -> SimulationSpec:
        hw = info.data.get("hardware")
        if hw is not None and simulation.block > min(hw.mesh.rows, hw.mesh.cols) // 2:
            raise _fail(f"expected a block of at most half the mesh's shorter side "
                        f"({min(hw.mesh.rows, hw.mesh.cols) // 2} PEs, so that experts get regions of their own), "
                        f'got "{shown(simulation.granularity)}"')
        return simulation


SPEC_KINDS: dict[str, type[Spec]] = {
    "hardware": HardwareSpec,
    "model": ModelSpec,
    "experiment": ExperimentSpec,
    "interconnect": InterconnectSpec,
}
