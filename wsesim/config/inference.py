"""Specs of serving a model on wafers (``kind: inference``; docs/model.md §11): the requests (prompt
length, output length, how many at once; how they arrive, how long they are, how a stage batches them,
the latency targets) and the mapping (the grid of PEs each pipeline stage runs on, how many layers it
holds, how many wafers), and the loader of such experiments."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, WithJsonSchema, field_validator

from .base import Spec, fail
from .cluster import _INTERCONNECT_REF, InterconnectSpec
from .errors import ConfigError, shown, shown_repr
from .fields import count, format_grid, parse_grid
from .inference_parts import (
    ExpertGrids,
    Rate,
    Requests,
    Sigma,
    SloSpec,
    SpeculativeSpec,
    StageLayers,
    Systems,
    Tokens,
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
from .specs import ExecutorSpec, RunSpec, Seed, routing_problem, window_problem, zipf_of

__all__ = ["InferenceExperimentSpec", "InferenceSpec", "SloSpec", "SpeculativeSpec", "load_inference",
           "load_inference_data", "read_inference"]

class InferenceSpec(Spec):
    """Requests and their mapping onto wafers. ``grid`` is each pipeline stage's rectangle of PEs
    ("auto": the best of the grids that tile the wafer, ``sim.programs.mapping.rank``); ``layers_per_stage``
    how many consecutive layers a stage holds ("auto": as many as its SRAM allows); ``systems`` how many
    wafers at most ("auto": as few as the mapping needs)."""

    prompt_len: Tokens = 4096
    output_len: Tokens = 128
    batch: Requests = 1  # concurrent requests, each flowing through the pipeline as a process
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
    # US dollars per system per hour (a cloud's rental, or a purchase written off over its hours), for
    # ``usd_per_million_tokens``; None: no price, that figure n/a. A CS-3 is not publicly priced by the
    # hour; $1,000,000 an hour is past any machine's.
    price_per_system_hour: Annotated[float, Field(ge=0, le=1_000_000)] | None = None
    # between the wafers of a pipeline (None: one wafer only): a preset name, a path or a mapping
    interconnect: Annotated[InterconnectSpec | None, WithJsonSchema(_INTERCONNECT_REF)] = None
    # the load (docs/model.md §11.7): ``batch`` requests at cycle 0 (together), ``requests`` of them at
    # ``rate`` per second (poisson), or the rows of a CSV file (trace)
    arrival: Literal["together", "poisson", "trace"] = "together"
    rate: Rate | None = Field(None, validate_default=True)  # requests per second, with poisson
    trace: str | None = Field(None, validate_default=True)  # the CSV file, with trace
    requests: Requests | None = Field(None, validate_default=True)  # in all (default: batch; a trace's rows)
    # synthetic requests' lengths: prompt_len and output_len each, or lognormal with those medians
    lengths: Literal["fixed", "lognormal"] = "fixed"
    length_sigma: Sigma | None = Field(None, validate_default=True)  # lognormal's σ of ln (default 1)
    # how the scheduler's iterations take work (docs/model.md §11.7): continuous (auto): every decode token
    # queued and prompts by ``prefill``; none: one decode token or one whole prompt at a time, first come
    # first served (the pipeline of §11.4 at any load)
    batching: Literal["auto", "none", "continuous"] = "auto"
    prefill: Literal["prefill_first", "chunked"] = "prefill_first"  # how a batch takes in prompts
    # tokens one iteration takes at most (prompt tokens, and decode tokens under chunked), its GEMMs'
    # rows shared by every prompt in it (docs/model.md §11.7); auto: enough to fill the grid's rows
    # (``builders.serving.default_token_budget``)
    token_budget: Tokens | Literal["auto"] = "auto"
    chunk: Any = Field(None, validate_default=True)  # renamed token_budget: refused in one line
    slo: SloSpec | None = None  # the targets goodput counts against
    seed: Seed = 0  # of the synthetic load (arrival times, lengths) and of sampled routing
    # speculative decoding with a draft model (docs/model.md §11.9); none: off
    speculative: SpeculativeSpec | None = Field(None, validate_default=True)
    # prefill on its own wafers, the KV cache handed to the decode wafers (§11.10); none: on the same
    prefill_systems: Systems | None = Field(None, validate_default=True)

    @field_validator("speculative", "prefill_systems")
    @classmethod
    def _layouts(cls, value: Any, info: ValidationInfo) -> Any:
        """Speculative decoding and split prefill run under the iteration-level scheduler at any load,
        one request alone included (their draft or prefill wafers are its stations, §11.9–11.10), so
        never with ``batching: none``; together, a request's first verify pass waits for both its drafts
        and its KV cache on the decode wafers."""
        d, what = info.data, info.field_name
        if value is None:
            return value
        if what == "speculative" and d.get("output_len") == 1:
            raise fail("expected output_len of at least 2 with speculative (the first output token is "
                       "the prefill's: a draft has nothing to propose), got output_len: 1")
        if d.get("batching") == "none":
            where = "draft's wafers are" if what == "speculative" else "prefill wafers are"
            raise fail(f"expected batching: auto or continuous with {what} (the {where} stations of the "
                       "iteration-level scheduler, docs/model.md §11.9–11.10), got batching: none")
        return value

    @field_validator("rate", "trace")
    @classmethod
    def _for_arrival(cls, value: Any, info: ValidationInfo) -> Any:
        """``rate`` belongs to poisson arrivals and ``trace`` to trace arrivals: each given exactly then."""
        arrival, key = info.data.get("arrival"), info.field_name
        mode, wanted = {"rate": ("poisson", "a rate (requests per second)"),
                        "trace": ("trace", "a trace file (CSV)")}[key]
        if (arrival == mode) != (value is not None):
            if value is None:
                raise fail(f"expected {wanted} with arrival: {mode}, got none")
            why, shown = ((" (only poisson arrivals have one)", f"{value:g}") if key == "rate"
                          else ("", shown_repr(value)))
            raise fail(f"expected no {key} with arrival: {arrival}{why}, got {shown}")
        return value

    @field_validator("requests")
    @classmethod
    def _requests(cls, requests: int | None, info: ValidationInfo) -> int | None:
        if requests is None and info.data.get("arrival") == "poisson":
            raise fail("expected a number of requests with arrival: poisson, got none")
        return requests

    @field_validator("length_sigma")
    @classmethod
    def _sigma(cls, sigma: float | None, info: ValidationInfo) -> float | None:
        if sigma is not None and info.data.get("lengths") != "lognormal":
            raise fail(f"expected no length_sigma with lengths: {info.data.get('lengths')} (only lognormal "
                       f"lengths have one), got {sigma:g}")
        if sigma is not None and info.data.get("arrival") == "trace":
            raise fail("expected no length_sigma with arrival: trace (the trace gives each length)")
        return sigma

    @field_validator("chunk")
    @classmethod
    def _chunk(cls, chunk: Any) -> None:
        if chunk is not None:
            raise fail(f"expected inference.token_budget (tokens per iteration, prompt pieces and, under "
                       f"chunked, decode tokens; the key chunk was renamed), got chunk: {shown_repr(chunk)}")
        return None

    @property
    def continuous(self) -> bool:
        """Whether the scheduler's iterations batch (``batching``: ``auto`` and ``continuous`` do; one
        request alone is a batch of one), or take one token or prompt at a time (``none``)."""
        return self.batching != "none"

    @property
    def alone(self) -> bool:
        """Whether the load is one request arriving alone (``together`` at batch 1)."""
        return self.arrival == "together" and self.batch == 1 and self.requests in (None, 1)

    @property
    def extra_wafers(self) -> bool:
        """Whether wafers of their own serve beside the target's: a speculative draft or split prefill."""
        return self.speculative is not None or self.prefill_systems is not None

    @property
    def sigma(self) -> float:
        """Lognormal lengths' σ of ln (1 unless ``length_sigma`` says)."""
        return self.length_sigma or 1.0

    # MoE serving (docs/model.md §11.8): "balanced" every token's top_k experts on k regions, one expert's
    # time (no sampling); "uniform" or "zipf:<alpha>" each token's experts drawn, as training.routing's
    routing: str = "balanced"
    # the grids one MoE layer's experts spread over (expert parallelism): 1, N, or auto (the mapping decides)
    expert_grids: ExpertGrids | Literal["auto"] = 1

    @field_validator("routing")
    @classmethod
    def _routing_kind(cls, routing: str, info: ValidationInfo) -> str:
        if problem := routing_problem(routing, ("balanced", "uniform")):
            raise fail(problem)
        return routing

    # the first requests (in arrival order) left out of every figure over requests, so that a run's
    # figures are its steady state's, not its start's (docs/model.md §11.7)
    warmup: count(65_535, 0) = Field(0, validate_default=True)

    @field_validator("warmup")
    @classmethod
    def _warmup(cls, warmup: int, info: ValidationInfo) -> int:
        d = info.data
        n = d.get("requests") or (d.get("batch") if d.get("arrival") != "trace" else None)
        if warmup and n is not None and warmup >= n:
            raise fail(f"expected a warmup below the run's {n:,} requests (the figures need some left), "
                       f"got {warmup:,}")
        return warmup

    # the KV cache in blocks of this many tokens (vLLM's PagedAttention; docs/model.md §11.7): admission by
    # the free blocks of the pool a stage's SRAM holds, a request's blocks growing as it decodes, and when
    # none is free the latest-arrived request preempted; none: each request's cache reserved whole
    kv_block: Tokens | None = Field(None, validate_default=True)
    # what a preempted request's cache becomes: recompute (dropped; its prompt and outputs prefilled again
    # when it is readmitted) or swap (out to MemoryX over the wafer's I/O and back); default recompute
    preemption: Literal["recompute", "swap"] | None = Field(None, validate_default=True)

    @field_validator("kv_block")
    @classmethod
    def _kv_block(cls, block: int | None, info: ValidationInfo) -> int | None:
        d = info.data
        if block is not None and (problem := kv_block_problem(block, d.get("batching") != "none", d)):
            raise fail(problem)
        return block

    @field_validator("preemption")
    @classmethod
    def _preemption(cls, preemption: str | None, info: ValidationInfo) -> str | None:
        if preemption is not None and info.data.get("kv_block") is None:
            raise fail(f"expected no preemption without kv_block (a cache reserved whole is never "
                       f"preempted), got {preemption}")
        return preemption

    @property
    def preempt_by(self) -> str:
        """What a preempted request's cache becomes (``preemption``; recompute unless it says swap)."""
        return self.preemption or "recompute"

    @property
    def sampled(self) -> bool:
        """Whether each decode token's experts are drawn (``routing`` other than balanced)."""
        return self.routing != "balanced"

    @property
    def zipf_alpha(self) -> float | None:
        return zipf_of(self.routing)

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
        # every token of a request attends over its prompt and the output before it
        if problem := window_problem(info.data.get("model"), inference.prompt_len + inference.output_len - 1,
                                     "inference.prompt_len + output_len - 1"):
            raise fail(problem)
        model, spec = info.data.get("model"), inference.speculative
        if model is not None:
            check_experts_fit(model, inference)
        if model is not None and spec is not None and spec.draft.vocab_size != model.vocab_size:
            raise fail(f"expected a speculative draft with the target's vocabulary ({model.vocab_size:,} "
                       f"tokens: it proposes the target's tokens), got {spec.draft.vocab_size:,}")
        return inference


SERVING_SPECS: dict[str, type[Spec]] = {}
"""The spec a serving experiment validates as, by its hardware's ``kind`` other than a wafer's: ``gpu``,
registered by ``config.gpu_inference`` (imported with the package)."""


def load_inference_data(data: dict[str, Any], *, source: str = "<inline>", base_dir: Path | None = None,
                        overrides: dict[str, Any] | None = None,
                        given: dict[str, str] | None = None) -> Loaded:
    """Validate a raw ``kind: inference`` mapping (hardware and model by preset name or path) plus
    ``--set`` overrides (``loader.load_kind_data``); ``inference.interconnect`` may name a preset too, and
    ``inference.trace`` and ``inference.speculative.draft`` a file."""
    def inline(resolved: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
        # a path --set gave is the working folder's; the file's own, or a sweep point's, the file's folder's
        _trace_path(resolved, "inference.trace" in (given or {}), base_dir)
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
    if spec.inference.trace is not None:  # a trace that does not read is refused before anything runs
        # local: keeps wsesim.config's modules out of every command's start
        from .request_trace import check_cycles, read_request_trace

        seconds = read_request_trace(spec.inference.trace)[0]
        check_cycles(seconds, spec.hardware.clock_hz, spec.inference.trace)
        rows = len(seconds)
        if spec.inference.requests is not None and spec.inference.requests > rows:
            raise ConfigError(f"expected at most the trace's {rows:,} requests, got "
                              f"{spec.inference.requests:,}", source=source, path="inference.requests")
    return loaded


def _trace_path(resolved: dict[str, Any], overridden: bool, base_dir: Path | None) -> None:
    """``inference.trace`` made absolute: a file's relative path (the experiment's, or a sweep grid's) is the
    file's folder's, ``--set``'s (``overridden``) the working folder's (as ``--set hardware=PATH``)."""
    inf = resolved.get("inference")
    trace = inf.get("trace") if isinstance(inf, dict) else None
    if isinstance(trace, str) and trace and not Path(trace).is_absolute():
        base = Path.cwd() if overridden or base_dir is None else base_dir
        resolved["inference"] = {**inf, "trace": str((base / trace).resolve())}


def _draft(resolved: dict[str, Any], base_dir: Path | None, source: str) -> dict[str, Any]:
    """``inference.speculative.draft`` (a model preset name or a path) inlined, as ``model:`` is."""
    inf = resolved.get("inference")
    spec = inf.get("speculative") if isinstance(inf, dict) else None
    if not isinstance(spec, dict) or "draft" not in spec or isinstance(spec["draft"], dict):
        return resolved
    raw = load_ref("model", spec["draft"], base_dir, source, "inference.speculative.draft")
    return {**resolved, "inference": {**inf, "speculative": {**spec, "draft": raw.data}}}


def default_inference_path() -> Path:
    """The shipped LLaMA3-8B on WSE-2 serving example, the default of ``wsesim infer``."""
    return shipped_file("llama3-8b/serve.yaml")


def read_inference(path: str | Path | None = None, *, hardware: str | None = None,
                   model: str | None = None) -> tuple[Path, dict[str, Any], dict[str, str]]:
    """An inference experiment file's raw mapping (``loader.read_experiment``; the shipped example when
    ``path`` is None)."""
    return read_experiment(path, default_inference_path(), "inference", hardware=hardware, model=model)


def load_inference(path: str | Path | None = None, *, hardware: str | None = None, model: str | None = None,
                   overrides: dict[str, Any] | None = None) -> Loaded:
    """Load an inference experiment file (the shipped example when ``path`` is None); ``hardware`` and
    ``model`` replace its references (a preset name, or a path relative to the current directory)."""
    path, data, given = read_inference(path, hardware=hardware, model=model)
    given = {**given, **named_by_set(overrides)}  # --set model=... replaces --model
    return load_inference_data(data, source=str(path), base_dir=path.parent, overrides=overrides, given=given)


register_kind("inference", lambda data, path: load_inference_data(data, source=str(path),
                                                                   base_dir=Path(path).parent).spec)
