"""Specs of serving a model on wafers (``kind: inference``; docs/model.md §11): the requests (prompt
length, output length, how many at once) and the mapping (the grid of PEs each pipeline stage runs on,
how many layers it holds, how many wafers), and the loader of such experiments."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator

from .base import Spec, fail
from .cluster import _INTERCONNECT_REF, InterconnectSpec
from .errors import ConfigError, shown, shown_repr
from .fields import Description, Name, count, format_grid, parse_grid
from .loader import REFERENCE_KEYS, Loaded, read_yaml, register_kind, resolve_with_overrides, shipped_file
from .specs import HardwareSpec, ModelSpec, Seed, routing_problem, zipf_of
from .validation import validate

__all__ = ["InferenceExperimentSpec", "InferenceSpec", "load_inference", "load_inference_data",
           "read_inference"]

# Serving contexts reach 128K-1M tokens; 2^24 is past any of them. Batches of thousands of requests.
Tokens = count(16_777_216)
Requests = count(65_536)
Systems = count(65_536)
StageLayers = count(16_384)
ExpertGrids = count(4_096)  # grids one MoE layer's experts spread over


class InferenceSpec(Spec):
    """Requests and their mapping onto wafers. ``grid`` is each pipeline stage's rectangle of PEs
    ("auto": the best of the grids that tile the wafer, ``sim.mapping.rank``); ``layers_per_stage`` how
    many consecutive layers a stage holds ("auto": as many as its SRAM allows); ``systems`` how many
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
    # between the wafers of a pipeline (None: one wafer only): a preset name, a path or a mapping
    interconnect: Annotated[InterconnectSpec | None, WithJsonSchema(_INTERCONNECT_REF)] = None
    # MoE serving (docs/model.md §11.8): "balanced" every token's top_k experts on k regions, one expert's
    # time (no sampling); "uniform" or "zipf:<alpha>" each token's experts drawn, as training.routing's
    routing: str = "balanced"
    # the grids one MoE layer's experts spread over (expert parallelism): 1, N, or auto (the mapping decides)
    expert_grids: ExpertGrids | Literal["auto"] = 1
    seed: Seed = 0  # of the sampled routing

    @field_validator("routing")
    @classmethod
    def _routing_kind(cls, routing: str) -> str:
        if problem := routing_problem(routing, ("balanced", "uniform")):
            raise fail(problem)
        return routing

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


class InferenceExperimentSpec(Spec):
    """A hardware, a model and requests to serve: one simulated serving run."""

    kind: Literal["inference"] = "inference"
    name: Name = ""
    description: Description = ""
    hardware: HardwareSpec
    model: ModelSpec
    inference: InferenceSpec = Field(InferenceSpec(), validate_default=True)

    @field_validator("inference")
    @classmethod
    def _grid_fits(cls, inference: InferenceSpec, info: Any) -> InferenceSpec:
        hw = info.data.get("hardware")
        shape = inference.grid_shape
        if hw is not None and shape is not None and (shape[0] > hw.mesh.rows or shape[1] > hw.mesh.cols):
            raise fail(f"expected a grid within the {hw.mesh.rows}x{hw.mesh.cols} mesh, "
                       f'got "{shown(inference.grid)}"')
        return inference


def load_inference_data(data: dict[str, Any], *, source: str = "<inline>", base_dir: Path | None = None,
                        overrides: dict[str, Any] | None = None,
                        given: dict[str, str] | None = None) -> Loaded:
    """Validate a raw ``kind: inference`` mapping (hardware and model by preset name or path) plus
    ``--set`` overrides; ``inference.interconnect`` may name a preset too."""
    if data.get("kind") != "inference":
        raise ConfigError(f"expected kind: inference, got kind: {shown_repr(data.get('kind'))}",
                          source=source, path="kind")
    overrides = dict(overrides or {})
    # a whole hardware or model named by an override (a sweep's ``model: [llama3-8b, llama2-7b]``, ``--set
    # hardware=wse3``) replaces the reference before anything is resolved, as in a training experiment
    named = {k: overrides.pop(k) for k in REFERENCE_KEYS
             if k in overrides and not isinstance(overrides[k], dict)}
    if named:
        data = {**data, **named}
    base, resolved, sources = resolve_with_overrides(data, "inference", source=source, base_dir=base_dir,
                                                     overrides=overrides, given=given)
    spec = validate(InferenceExperimentSpec, resolved, source=source, sources=sources, overridden=overrides,
                    baseline=base if overrides else None)
    return Loaded(spec, resolved, source, sources)


def default_inference_path() -> Path:
    """The shipped LLaMA3-8B on WSE-2 serving example, the default of ``wsesim infer``."""
    return shipped_file("llama3-8b/serve.yaml")


def read_inference(path: str | Path | None = None, *, hardware: str | None = None,
                   model: str | None = None) -> tuple[Path, dict[str, Any], dict[str, str]]:
    """An inference experiment file's raw mapping (the shipped example when ``path`` is None), its
    ``hardware`` and ``model`` replaced by those given (a preset name, or a path relative to the current
    directory, made absolute): (the file, the mapping, which references the command line gave)."""
    path = Path(path) if path is not None else default_inference_path()
    data = read_yaml(path)
    if data.get("kind") != "inference":
        raise ConfigError(f"expected kind: inference, got kind: {shown_repr(data.get('kind'))}",
                          source=str(path), path="kind")
    given = {}
    for key, ref in (("hardware", hardware), ("model", model)):
        if ref is not None:  # a model may be a Hugging Face config.json; an error in it is the flag's
            data[key] = str(Path(ref).resolve()) if Path(ref).suffix in (".yaml", ".yml", ".json") else ref
            given[key] = f"--{key}"
    return path, data, given


def load_inference(path: str | Path | None = None, *, hardware: str | None = None, model: str | None = None,
                   overrides: dict[str, Any] | None = None) -> Loaded:
    """Load an inference experiment file (the shipped example when ``path`` is None); ``hardware`` and
    ``model`` replace its references (a preset name, or a path relative to the current directory)."""
    path, data, given = read_inference(path, hardware=hardware, model=model)
    return load_inference_data(data, source=str(path), base_dir=path.parent, overrides=overrides, given=given)


register_kind("inference", lambda data, path: load_inference_data(data, source=str(path),
                                                                   base_dir=Path(path).parent).spec)
