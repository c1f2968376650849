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
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from . import model_rules
from .base import Spec
from .base import fail as _fail
from .cluster import ClusterSpec, InterconnectSpec, split_problem
from .errors import ConfigError, shown
from .fields import Description, Name, count

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
DType = Literal["fp32", "bf16", "fp16"]
# a model's weights, activations and KV cache: fp8 too, on hardware that computes in it (``RunSpec``)
ModelDType = Literal["fp32", "bf16", "fp16", "fp8"]


from .hardware import (  # noqa: E402, F401 - the hardware specs, re-exported here with the others
    Clock,
    EnergySpec,
    FabricSpec,
    HardwareSpec,
    IOSpec,
    MemoryXSpec,
    MeshSpec,
    PESpec,
    RuntimeSpec,
)

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
    # q through a down/up projection of this rank (0: one q_proj)
    q_lora_rank: Annotated[int, Field(ge=0)] = 0
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
    dtype: ModelDType = "bf16"
    # the longest sequence the model was made for (config.json max_position_embeddings; 0: not stated): a
    # longer one is simulated as asked, with a warning (``beyond_context``)
    context_len: Annotated[int, Field(ge=0, le=16_777_216)] = 0
    # attention over the last sliding_window tokens only (Mistral; 0: the whole sequence, as wsesim models
    # it): a sequence longer than the window is refused, one within it is attention over the whole
    sliding_window: Annotated[int, Field(ge=0, le=16_777_216)] = 0

    @field_validator("kv_heads")
    @classmethod
    def _heads_divisible(cls, kv_heads: int, info: ValidationInfo) -> int:
        heads = info.data.get("heads")
        if heads is not None and heads % kv_heads:
            raise _fail(f"expected a divisor of heads ({heads}), got {kv_heads}")
        return kv_heads

    @field_validator("top_k", "expert_intermediate", "shared_expert_intermediate", "dense_layers",
                     "ffn_intermediate")
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
            raise _fail(f"expected 0 unless kv_heads equals heads ({heads}, got {kv_heads}): multi-head "
                        f"latent attention gives every head its own k and v, got {kv_lora_rank}")
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

# a decimal number as Python writes one, ASCII digits only: "1.2", ".5", "5.", "1e2" (issue 40: "1e2" and
# "5." were refused as out of range while ".5" was accepted)
_ZIPF = re.compile(r"zipf:((?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)", re.ASCII)
# Measured router skew fits Zipf exponents of about 0.5-2. At 100 the second expert already gets 2^-100
# of the first's tokens (all traffic on top_k experts); past ~300 the weights underflow a double.
ZIPF_MAX = 100
# Training contexts reach 1M-10M tokens; 2^24 (16.8M) per sequence, and per batch or tile count, is past
# any run (a global batch of 2^24 sequences of one token is already 16.8M tokens).
Tokens = count(16_777_216)
Seed = count(2**64 - 1, low=0)  # numpy's seeds are unbounded; 64 bits are plenty


def zipf_of(routing: str) -> float | None:
    """The exponent of a ``zipf:<alpha>`` routing, None for any other."""
    m = _ZIPF.fullmatch(routing)
    return float(m.group(1)) if m else None


def routing_problem(routing: str, plain: tuple[str, ...] = ("uniform",)) -> str:
    """Why ``routing`` is not one of the ``plain`` names or ``zipf:<alpha>`` with alpha from 0 to
    ``ZIPF_MAX`` ("" when it is): the one vocabulary of training's and serving's routing keys."""
    alpha = zipf_of(routing)
    if routing in plain or (alpha is not None and alpha <= ZIPF_MAX):
        return ""
    names = ", ".join(f'"{name}"' for name in plain)
    return (f'expected {names} or "zipf:<alpha>" with alpha from 0 to {ZIPF_MAX} (e.g. "zipf:1.2"), '
            f'got "{shown(routing)}"')


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
        if problem := routing_problem(routing):
            raise _fail(problem)
        return routing

    @field_validator("global_batch")
    @classmethod
    def _global_batch_splits(cls, global_batch: int | None, info: ValidationInfo) -> int | None:
        G, B, N = info.data.get("tiles"), info.data.get("batch_per_tile"), info.data.get("micro_batches")
        if global_batch is not None and None not in (G, B, N) and (
                problem := split_problem(global_batch, G, B, N)):
            raise _fail(problem)
        return global_batch

    @property
    def zipf_alpha(self) -> float | None:
        return zipf_of(self.routing)


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


Engine = Literal["fast", "reference"]
"""The executor a run names (``simulation.engine``, training's and serving's alike):
sim.executors.engines.ENGINES."""


class ExecutorSpec(Spec):
    """A serving run's ``simulation`` section: only which executor runs it (training's holds more)."""

    engine: Engine = "fast"


class SimulationSpec(Spec):
    """How the simulation is run: fabric fidelity, mesh granularity, expert placement, and which event
    engine runs the step (``fast``, or the plain-SimPy ``reference`` that vouches for it)."""

    # The names of the plug-in tables (config/tables.py); a test checks each Literal equals its table's keys.
    fabric: Literal["flow", "packet", "packet-simpy"] = "flow"  # wsesim.fabric.fidelity.FABRICS
    granularity: str = "block:16"
    placement: Literal["grid", "snake", "random"] = "grid"
    engine: Engine = "fast"
    # how an MoE layer's experts run (docs/model.md §3): on expert regions that tokens reach over the
    # fabric, or on the whole wafer with each token's k copies kept in place (the Cerebras stack's way)
    moe_mapping: Literal["regions", "in_place"] = "regions"  # wsesim.experiments.mappings.MOE_MAPPINGS
    # what an op's arithmetic costs (docs/model.md §4, §4.1): its FLOPs over one global gemm_efficiency,
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


class RunSpec(Spec):
    """What an experiment of either kind names first: a hardware and a model (its ``kind`` its own)."""

    kind: str
    name: Name = ""
    description: Description = ""
    hardware: HardwareSpec
    model: ModelSpec

    @field_validator("model")
    @classmethod
    def _computed_in(cls, model: ModelSpec, info: ValidationInfo) -> ModelSpec:
        """The model's dtype is one the hardware has arithmetic for (``dtypes`` of its spec)."""
        hw = info.data.get("hardware")
        if hw is not None and model.dtype not in hw.dtypes:
            raise _fail(f"expected a dtype {hw.name} computes in ({', '.join(hw.dtypes)}), got "
                        f'"{model.dtype}"', at="dtype")
        return model


class ExperimentSpec(RunSpec):
    """A hardware, a model, a training setting and simulation settings: one simulated step."""

    kind: Literal["experiment"] = "experiment"
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

    @field_validator("training")
    @classmethod
    def _within_window(cls, training: TrainingSpec, info: ValidationInfo) -> TrainingSpec:
        if problem := window_problem(info.data.get("model"), training.seq_len, "training.seq_len"):
            raise _fail(problem)
        return training

    @field_validator("simulation")
    @classmethod
    def _block_fits(cls, simulation: SimulationSpec, info: ValidationInfo) -> SimulationSpec:
        hw = info.data.get("hardware")
        if hw is not None and simulation.block > min(hw.mesh.rows, hw.mesh.cols) // 2:
            raise _fail(f"expected a block of at most half the mesh's shorter side "
                        f"({min(hw.mesh.rows, hw.mesh.cols) // 2} PEs, so that experts get regions of their "
                        f'own), got "{shown(simulation.granularity)}"')
        return simulation


def window_problem(model: ModelSpec | None, tokens: int, what: str) -> str:
    """Why a sequence of ``tokens`` cannot be simulated with ``model``'s sliding window ("" when it can):
    wsesim's attention is over the whole sequence, which is the window's own as long as the sequence fits
    in it."""
    if model is None or not model.sliding_window or tokens <= model.sliding_window:
        return ""
    return (f"{what}: expected at most model.sliding_window ({model.sliding_window:,} tokens), got "
            f"{tokens:,}: {model.name} attends over its last {model.sliding_window:,} tokens only, and "
            "wsesim models attention over the whole sequence (shorten the sequence)")


def beyond_context(model: ModelSpec, tokens: int, what: str) -> str:
    """A warning when ``tokens`` are more than ``model`` was made for (its ``context_len``), "" otherwise:
    the run is simulated as asked (the cost of a longer sequence is well defined), but the model would
    not serve or train at that length as published."""
    if not model.context_len or tokens <= model.context_len:
        return ""
    return (f"{what} of {tokens:,} tokens is beyond {model.name}'s context of {model.context_len:,} tokens "
            "(model.context_len): simulated as asked, but the model was not made for it")


def context_warning(spec: Any) -> str:
    """``beyond_context`` of an experiment: a training sequence (``training.seq_len``) or a request's
    prompt and output (a serving experiment's ``inference``) longer than its model's ``context_len``."""
    if hasattr(spec, "inference"):
        return beyond_context(spec.model, spec.inference.load.prompt_len + spec.inference.load.output_len - 1,
                              "a request's prompt and output (inference.load.prompt_len + output_len - 1)")
    return beyond_context(spec.model, spec.training.seq_len, "training.seq_len")


SPEC_KINDS: dict[str, type[Spec]] = {
    "hardware": HardwareSpec,
    "model": ModelSpec,
    "experiment": ExperimentSpec,
    "interconnect": InterconnectSpec,
}
"""The spec each kind of file validates as, a GPU's (``kind: gpu``, ``config.gpu``) aside: the loader
imports that one when a file names it, so that a run on a wafer never builds a GPU's specs."""

HARDWARE_KINDS = ("hardware", "gpu")
"""The kinds a ``hardware:`` reference may name: a wafer (``kind: hardware``) or a GPU in its node
(``kind: gpu``), presets of both in ``hardware/``; ``loader.load_hardware`` reads either by its spec."""
