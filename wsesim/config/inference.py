"""Specs of serving a model on wafers (``kind: inference``; docs/model.md §11): the requests (prompt
length, output length, how many at once; how they arrive, how long they are, how a stage batches them,
the latency targets) and the mapping (the grid of PEs each pipeline stage runs on, how many layers it
holds, how many wafers), and the loader of such experiments.

The same experiment on a ``kind: gpu`` preset (``wsesim infer --hardware h100``; docs/model.md §13.7) is
``GpuInferenceExperimentSpec``: the hardware a ``GpuSpec`` and one key more, ``inference.tensor_parallel``
(the GPUs of a node one pipeline stage spans; ``auto``: all of them). What a GPU run cannot do yet is
refused in one line with its reason (``gpu_refusal``), before anything is built."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator, model_validator

from .base import Spec, fail
from .cluster import _INTERCONNECT_REF, InterconnectSpec
from .errors import ConfigError, shown, shown_repr
from .fields import count, format_grid, parse_grid
from .gpu import GpuSpec, OnAGpu
from .inference_load import MOVED, Load, SchedulerSpec, TogetherLoad, moved_key
from .inference_parts import (
    DisaggregationSpec,
    EconomicsSpec,
    MoeSpec,
    SloSpec,
    SpeculativeSpec,
    StageLayers,
    Systems,
    check_experts_fit,
    kv_block_problem,
)
from .loader import (
    Loaded,
    load_kind_data,
    load_ref,
    named_by_set,
    read_experiment,
    register_kind,
    shipped_file,
)
from .specs import ExecutorSpec, RunSpec, window_problem

__all__ = ["GpuInferenceExperimentSpec", "GpuInferenceSpec", "InferenceExperimentSpec", "InferenceSpec",
           "SloSpec", "SpeculativeSpec", "gpu_refusal", "load_inference", "load_inference_data",
           "read_inference"]

class InferenceSpec(Spec):
    """Requests and their mapping onto wafers, in groups (docs/model.md §11.7): ``load`` (how requests
    arrive and how long they are), ``scheduler`` (how a stage batches them), ``speculative``,
    ``disaggregation``, ``moe``, ``slo`` and ``economics``. The mapping's keys stay at the top: ``grid`` is
    each pipeline stage's rectangle of PEs ("auto": the best of the grids that tile the wafer,
    ``sim.programs.mapping.rank``); ``layers_per_stage`` how many consecutive layers a stage holds ("auto":
    as many as its SRAM allows); ``systems`` how many wafers at most ("auto": as few as the mapping needs).
    A key of the old flat section is refused in one line naming its new home (``inference_load.MOVED``)."""

    grid: str = "auto"
    layers_per_stage: StageLayers | Literal["auto"] = "auto"
    systems: Systems | Literal["auto"] = "auto"
    kv_layout: Literal["shift", "concat"] = "shift"  # balanced over the grid, or appended to its last row
    gemv: Literal["meshgemv", "pipeline"] = "meshgemv"  # the decode GEMVs' algorithm (wsesim kernel gemv)
    gemm: Literal["summa", "cannon", "meshgemm"] = "summa"  # the prefill GEMMs' (wsesim kernel gemm)
    allreduce: Literal["chain", "star", "tree", "two-phase", "ring", "ktree"] = "ktree"  # norms and softmax
    # which code runs the kernels (docs/model.md §11.11): research (WaferLLM's, one launch a kernel, each
    # collective and hand-off in turn) or production (a layer's kernels fused, collectives beside them)
    software: Literal["research", "production"] = "research"
    # between the wafers of a pipeline (None: one wafer only): a preset name, a path or a mapping
    interconnect: Annotated[InterconnectSpec | None, WithJsonSchema(_INTERCONNECT_REF)] = None
    load: Load = TogetherLoad()
    scheduler: SchedulerSpec = SchedulerSpec()
    # speculative decoding with a draft model (docs/model.md §11.9); none: off
    speculative: SpeculativeSpec | None = None
    # prefill on its own wafers, the KV cache handed to the decode wafers (§11.10); none: on the same
    disaggregation: DisaggregationSpec | None = None
    moe: MoeSpec = MoeSpec()
    slo: SloSpec | None = None  # the targets goodput counts against
    economics: EconomicsSpec | None = None  # no price: usd_per_million_tokens n/a

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        """An old flat key refused, naming its new home; a load without ``arrival`` arrives together."""
        if not isinstance(data, dict):
            return data
        if old := next((k for k in data if k in MOVED), None):
            raise fail(moved_key(old), at=old)
        load = data.get("load")
        if isinstance(load, dict) and "arrival" not in load:
            return {**data, "load": {"arrival": "together", **load}}
        return data

    @model_validator(mode="after")
    def _across_groups(self) -> InferenceSpec:
        """The rules that span groups, each refused in one line at the key it is about."""
        load, sched = self.load, self.scheduler
        for what, at, spec in (("speculative", "speculative", self.speculative),
                               ("prefill_systems", "disaggregation.prefill_systems", self.disaggregation)):
            # Speculative decoding and split prefill run under the iteration-level scheduler at any load,
            # one request alone included (their draft or prefill wafers are its stations, §11.9–11.10)
            if spec is None:
                continue
            if what == "speculative" and load.output_len == 1:
                raise fail("expected output_len of at least 2 with speculative (the first output token is "
                           "the prefill's: a draft has nothing to propose), got output_len: 1", at=at)
            if not sched.continuous:
                where = "draft's wafers are" if what == "speculative" else "prefill wafers are"
                raise fail(f"expected batching: auto or continuous with {what} (the {where} "
                           "stations of the iteration-level scheduler, docs/model.md §11.9–11.10), got "
                           "batching: none", at=at)
        if sched.kv_block is not None and (problem := kv_block_problem(sched.kv_block, sched.continuous,
                                                                      self.kv_layout)):
            raise fail(problem, at="scheduler.kv_block")
        n = self.request_count
        if load.warmup and n is not None and load.warmup >= n:
            raise fail(f"expected a warmup below the run's {n:,} requests (the figures need some left), "
                       f"got {load.warmup:,}", at="load.warmup")
        return self

    @property
    def request_count(self) -> int | None:
        """How many requests the run serves: the load's ``requests``, a together load's default the
        scheduler's ``batch``; None for a whole trace (its rows, known once it is read)."""
        if self.load.requests is not None or self.load.arrival == "trace":
            return self.load.requests
        return self.scheduler.batch

    @property
    def price(self) -> float | None:
        """US dollars per system-hour (``economics.price_per_system_hour``; None: no price given)."""
        return self.economics.price_per_system_hour if self.economics else None

    @property
    def trace_file(self) -> str | None:
        """The CSV a trace load reads (None for a synthetic load)."""
        return self.load.file if self.load.arrival == "trace" else None

    @property
    def alone(self) -> bool:
        """Whether the load is one request arriving alone (``together`` at batch 1)."""
        load = self.load
        return load.arrival == "together" and self.scheduler.batch == 1 and load.requests in (None, 1)

    @property
    def extra_wafers(self) -> bool:
        """Whether wafers of their own serve beside the target's: a speculative draft or split prefill."""
        return self.speculative is not None or self.disaggregation is not None

    @field_validator("grid")
    @classmethod
    def _grid(cls, grid: str) -> str:
        """A grid ``parse_grid`` reads, in the one spelling ``format_grid`` writes ("420x420", not "420X420"
        or " 420x420"): results, CSV columns and figures read the string as it is stored."""
        if grid != "auto":
            try:
                canonical = format_grid(*parse_grid(grid)) == grid
            except ConfigError:
                canonical = False
            if not canonical:
                raise fail(f'expected a grid like "420x420" (rows x cols of PEs) or "auto", '
                           f'got {shown_repr(grid)}')
        return grid

    @property
    def grid_shape(self) -> tuple[int, int] | None:
        return None if self.grid == "auto" else parse_grid(self.grid)


class InferenceExperimentSpec(RunSpec):
    """A hardware, a model and requests to serve: one simulated serving run."""

    kind: Literal["inference"] = "inference"
    inference: InferenceSpec = Field(InferenceSpec(), validate_default=True)
    simulation: ExecutorSpec = ExecutorSpec()  # the executor, as a training run names it

    def on(self, engine: str) -> InferenceExperimentSpec:
        """This experiment run by another executor (its ``simulation.engine``; the name is checked when it
        runs, against ``sim.executors.engines.ENGINES``)."""
        return self.model_copy(update={"simulation": self.simulation.model_copy(update={"engine": engine})})

    @field_validator("inference")
    @classmethod
    def _grid_fits(cls, inference: InferenceSpec, info: Any) -> InferenceSpec:
        hw = info.data.get("hardware")
        shape = inference.grid_shape
        if hw is not None and shape is not None and (shape[0] > hw.mesh.rows or shape[1] > hw.mesh.cols):
            raise fail(f"expected a grid within the {hw.mesh.rows}x{hw.mesh.cols} mesh, "
                       f'got "{shown(inference.grid)}"', at="grid")
        model, spec = info.data.get("model"), inference.speculative
        requests_fit_model(inference, model)
        if model is not None and spec is not None and spec.draft.vocab_size != model.vocab_size:
            raise fail(f"expected a speculative draft with the target's vocabulary ({model.vocab_size:,} "
                       f"tokens: it proposes the target's tokens), got {spec.draft.vocab_size:,}")
        return inference


def requests_fit_model(inference: InferenceSpec, model: Any) -> None:
    """What a serving spec on any hardware checks of its requests against its model (``fail`` if not):
    every token of a request attends over its prompt and the output before it, within the model's
    sliding window; and MoE serving's keys agree with its experts (``check_experts_fit``)."""
    load = inference.load
    if problem := window_problem(model, load.prompt_len + load.output_len - 1,
                                 "inference.load.prompt_len + output_len - 1"):
        raise fail(problem)
    if model is not None:
        check_experts_fit(model, inference)


# GPUs a tensor-parallel group spans: at most a node's (checked against the preset's node.gpus)
TensorParallel = count(1_024)


class GpuInferenceSpec(InferenceSpec):
    """``InferenceSpec`` on a GPU: ``tensor_parallel`` GPUs of one node per pipeline stage."""

    tensor_parallel: TensorParallel | Literal["auto"] = "auto"


def gpu_refusal(inference: Any, model: Any, gpus: int) -> tuple[str, str]:
    """(the key, why) of the first thing a GPU run cannot do with ``inference`` and ``model`` on a node of
    ``gpus`` GPUs, or ("", "") when it can run."""
    tp = gpus if inference.tensor_parallel == "auto" else inference.tensor_parallel
    rules = [
        ("grid", inference.grid != "auto", f'expected grid: auto on a GPU (a stage is {tp} GPUs of a node, '
                                            f'not a grid of PEs), got "{inference.grid}"'),
        ("layers_per_stage", inference.layers_per_stage != "auto",
         "expected layers_per_stage: auto on a GPU (the layers are dealt evenly over the fewest nodes whose "
         f"HBM holds them), got {inference.layers_per_stage}"),
        ("tensor_parallel", tp > gpus, f"expected at most the node's {gpus} GPUs, got {tp}"),
        ("tensor_parallel", model.heads % tp != 0,
         f"expected a tensor-parallel size dividing the model's {model.heads} attention heads, got {tp}"),
        ("kv_layout", inference.kv_layout != "shift",
         "expected kv_layout: shift on a GPU (concat is a wafer's placement of decoded tokens on a row of "
         "PEs; a GPU's cache is its HBM)"),
        ("speculative", inference.speculative is not None,
         "speculative decoding is not modelled on GPUs yet: its draft is a station of wafers of its own "
         "(speculative.DraftCosts); a draft on a GPU's own SMs beside the target is not costed"),
        ("disaggregation.prefill_systems", inference.disaggregation is not None,
         "split prefill is not modelled on GPUs yet: the KV cache's hand-off between nodes is costed over "
         "wafers' I/O links only"),
        ("moe.routing", model.experts and inference.moe.routing != "balanced",
         "expected routing: balanced on a GPU (sampled routing's draws are priced on a wafer's expert "
         "regions; the GPU's grouped GEMM is costed at the balanced load)"),
        ("moe.expert_grids", model.experts and inference.moe.expert_grids != 1,
         "expected expert_grids: 1 on a GPU (its experts are split over the tensor-parallel group's GPUs)"),
        ("scheduler.preemption", inference.scheduler.preemption == "swap",
         "expected preemption: recompute on a GPU (the preset has no host link to swap a cache over)"),
    ]
    for key, bad, why in rules:
        if bad:
            return key, why
    return "", ""


class GpuInferenceExperimentSpec(OnAGpu, InferenceExperimentSpec):
    """A ``kind: gpu`` preset, a model and requests to serve (docs/model.md §13.7)."""

    hardware: GpuSpec  # type: ignore[assignment]
    inference: GpuInferenceSpec = GpuInferenceSpec()  # type: ignore[assignment]

    @field_validator("inference")
    @classmethod
    def _grid_fits(cls, inference: GpuInferenceSpec, info: Any) -> GpuInferenceSpec:  # the wafer's, for a GPU
        hw, model = info.data.get("hardware"), info.data.get("model")
        requests_fit_model(inference, model)
        if model is not None and hw is not None:
            key, why = gpu_refusal(inference, model, hw.node.gpus)
            if key:
                raise fail(why, at=key)
        return inference


SERVING_SPECS: dict[str, type[Spec]] = {"gpu": GpuInferenceExperimentSpec}
"""The spec a serving experiment validates as, by its hardware's ``kind`` other than a wafer's."""


def load_inference_data(data: dict[str, Any], *, source: str = "<inline>", base_dir: Path | None = None,
                        overrides: dict[str, Any] | None = None,
                        given: dict[str, str] | None = None) -> Loaded:
    """Validate a raw ``kind: inference`` mapping (hardware and model by preset name or path) plus
    ``--set`` overrides (``loader.load_kind_data``); ``inference.interconnect`` may name a preset too, and
    ``inference.load.file`` and ``inference.speculative.draft`` a file."""
    def inline(resolved: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
        # a path --set gave is the working folder's; the file's own, or a sweep point's, the file's folder's
        _trace_path(resolved, "inference.load.file" in (given or {}), base_dir)
        by_set = "inference.speculative.draft" in (given or {})
        return _draft(resolved, Path.cwd() if by_set else base_dir,
                      "--set" if "inference.speculative.draft" in overrides else source)

    def spec_for(resolved: dict[str, Any]) -> type[Spec]:  # a GPU preset keeps its kind (resolve_experiment)
        hw = resolved.get("hardware")
        return SERVING_SPECS.get(hw.get("kind", "") if isinstance(hw, dict) else "", InferenceExperimentSpec)

    loaded = load_kind_data(data, "inference", InferenceExperimentSpec, "inference", source=source,
                            base_dir=base_dir, overrides=overrides, given=given, inline=inline,
                            spec_for=spec_for)
    spec = loaded.spec
    load = spec.inference.load
    if load.arrival == "trace":  # a trace that does not read is refused before anything runs
        # local: keeps wsesim.config's modules out of every command's start
        from .request_trace import check_cycles, read_request_trace

        seconds = read_request_trace(load.file)[0]
        check_cycles(seconds, spec.hardware.clock_hz, load.file)
        rows = len(seconds)
        if load.requests is not None and load.requests > rows:
            raise ConfigError(f"expected at most the trace's {rows:,} requests, got "
                              f"{load.requests:,}", source=source, path="inference.load.requests")
    return loaded


def _trace_path(resolved: dict[str, Any], overridden: bool, base_dir: Path | None) -> None:
    """``inference.load.file`` made absolute: a file's relative path (the experiment's, or a sweep grid's) is
    the file's folder's, ``--set``'s (``overridden``) the working folder's (as ``--set hardware=PATH``)."""
    inf = resolved.get("inference")
    load = inf.get("load") if isinstance(inf, dict) else None
    trace = load.get("file") if isinstance(load, dict) else None
    if isinstance(trace, str) and trace and not Path(trace).is_absolute():
        base = Path.cwd() if overridden or base_dir is None else base_dir
        resolved["inference"] = {**inf, "load": {**load, "file": str((base / trace).resolve())}}


def _draft(resolved: dict[str, Any], base_dir: Path | None, source: str) -> dict[str, Any]:
    """``inference.speculative.draft`` (a model preset name or a path) inlined, as ``model:`` is."""
    inf = resolved.get("inference")
    spec = inf.get("speculative") if isinstance(inf, dict) else None
    if not isinstance(spec, dict) or "draft" not in spec or isinstance(spec["draft"], dict):
        return resolved
    raw = load_ref("model", spec["draft"], base_dir, source, "inference.speculative.draft")
    return {**resolved, "inference": {**inf, "speculative": {**spec, "draft": raw.data}}}


def read_inference(path: str | Path | None = None, *, hardware: str | None = None,
                   model: str | None = None) -> tuple[Path, dict[str, Any], dict[str, str]]:
    """An inference experiment file's raw mapping (``loader.read_experiment``; when ``path`` is None, the
    shipped LLaMA3-8B on WSE-2 serving example, the default of ``wsesim infer``)."""
    return read_experiment(path, shipped_file("llama3-8b/serve.yaml"), "inference", hardware=hardware,
                           model=model)


def load_inference(path: str | Path | None = None, *, hardware: str | None = None, model: str | None = None,
                   overrides: dict[str, Any] | None = None) -> Loaded:
    """Load an inference experiment file (the shipped example when ``path`` is None); ``hardware`` and
    ``model`` replace its references (a preset name, or a path relative to the current directory)."""
    path, data, given = read_inference(path, hardware=hardware, model=model)
    given = {**given, **named_by_set(overrides)}  # --set model=... replaces --model
    return load_inference_data(data, source=str(path), base_dir=path.parent, overrides=overrides, given=given)


register_kind("inference", lambda data, path: load_inference_data(data, source=str(path),
                                                                   base_dir=Path(path).parent).spec)
