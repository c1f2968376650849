"""The only code that touches raw YAML: strict parsing, presets by name, dotted overrides, and
errors that name the file and the key path.

Rules: duplicate keys and YAML aliases/anchors are refused; an empty file is refused; the top level
must be a mapping with a ``kind:``; a ``hardware:`` or ``model:`` value in an experiment may be a
preset name, a path (relative to the experiment file), or an inline mapping. Overrides
(``model.experts=64``) are applied to the raw tree *before* validation, so every override is
validated exactly like a value written in the file. Strict YAML is ``yaml_strict``'s; turning
pydantic's errors into one-line ``ConfigError`` s is ``validation``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigError, shown_repr
from .overrides import apply_overrides
from .specs import HARDWARE_KINDS, SPEC_KINDS, ExperimentSpec, HardwareSpec, ModelSpec, Spec
from .validation import validate
from .yaml_strict import describe_value as _describe
from .yaml_strict import parse_yaml, read_yaml

if TYPE_CHECKING:
    from .gpu import GpuSpec

_REPO_ROOT = Path(__file__).resolve().parents[2]
_PRESET_PACKAGES = {"hardware": "wsesim.hardware_presets", "model": "wsesim.workload_presets",
                    "interconnect": "wsesim.hardware_presets"}
_PRESET_DIRS = {"hardware": _REPO_ROOT / "hardware", "model": _REPO_ROOT / "workloads",
                "interconnect": _REPO_ROOT / "hardware" / "interconnect"}
_PRESET_SUBDIRS = {"hardware": "", "model": "", "interconnect": "interconnect"}  # inside the package


# ------------------------------------------------------------------------------------------------ presets


def _preset_files(kind: str) -> dict[str, Any]:
    """name -> file (a Path or an importlib Traversable) of every shipped preset of ``kind``."""
    found: dict[str, Any] = {}
    try:
        root: Any = resources.files(_PRESET_PACKAGES[kind])
        if _PRESET_SUBDIRS[kind]:
            root = root.joinpath(_PRESET_SUBDIRS[kind])
    except ModuleNotFoundError:
        root = _PRESET_DIRS[kind]
    if not root.is_dir():
        return found
    for entry in root.iterdir():
        if entry.name.endswith(".yaml") and not entry.name.startswith("_"):
            found[entry.name[: -len(".yaml")]] = entry
    return found


def preset_names(kind: str) -> list[str]:
    """Sorted names of the shipped presets of ``kind`` ("hardware" or "model")."""
    return sorted(_preset_files(kind))


def shipped_file(relative: str) -> Path:
    """A file shipped in ``workloads/`` (an example experiment, a sweep), found after a normal install too."""
    try:
        entry = resources.files(_PRESET_PACKAGES["model"]).joinpath(relative)
        with resources.as_file(entry) as p:
            if Path(p).exists():
                return Path(p)
    except ModuleNotFoundError:
        pass
    return _PRESET_DIRS["model"] / relative


def input_file(path: str | Path) -> Path:
    """A file to read as given, or, when no such file is here and it is named as the README names the
    shipped workloads (``workloads/llama3-8b/serve.yaml``), the copy shipped with wsesim: the command line
    and the Python API find them from any working folder alike. A file of that name here is always the one
    read; any other missing path is returned as given, for the reader's "no such file"."""
    given = Path(path)
    parts = given.parts
    if given.exists() or given.is_absolute() or len(parts) < 2 or parts[0] != "workloads":
        return given
    found = shipped_file(str(Path(*parts[1:])))
    return found if found.is_file() else given


@dataclass(frozen=True)
class _Raw:
    """A raw mapping and where it came from, so that errors can name the right file."""

    data: dict[str, Any]
    source: str


def load_ref(kind: str, ref: Any, base_dir: Path | None, source: str, path: str | None) -> _Raw:
    """Resolve a ``hardware:``/``model:`` value: inline mapping, preset name or path."""
    if isinstance(ref, dict):
        return _Raw(ref, source)
    if not isinstance(ref, str) or not ref:
        names = ", ".join(preset_names(kind))
        raise ConfigError(f"expected a preset name ({names}), a path or a mapping, got {shown_repr(ref)}",
                          source=source, path=path)
    if _looks_like_path(ref):
        p = Path(ref)
        if not p.is_absolute() and base_dir is not None:
            p = base_dir / p
        try:
            found = p.exists()
        except (OSError, ValueError):  # a name too long, or with a NUL byte in it
            found = False
        if not found:
            raise ConfigError(f"no such file {shown_repr(str(p))}", source=source, path=path)
        if p.suffix == ".json":  # a Hugging Face config.json (config/hf.py): a model only
            if kind != "model":
                raise ConfigError(f"expected a {kind} YAML file (a .json file can only be a model's Hugging "
                                  f"Face config.json), got {shown_repr(str(p))}", source=source, path=path)
            # local: keeps wsesim.config's modules out of every command's start
            from .hf import model_from_hf

            return _Raw(model_from_hf(p), str(p))
        return _Raw(_strip_kind(read_yaml(p), kind, str(p)), str(p))
    presets = _preset_files(kind)
    if ref not in presets:
        raise ConfigError(f"expected {'an' if kind[0] in 'aeiou' else 'a'} {kind} preset "
                          f"({', '.join(sorted(presets))}) or a path, got {shown_repr(ref)}",
                          source=source, path=path)
    entry = presets[ref]
    name = f"{_PRESET_DIRS[kind].relative_to(_REPO_ROOT).as_posix()}/{ref}.yaml"
    data = parse_yaml(entry.read_text(encoding="utf-8"), name)
    if not isinstance(data, dict):
        raise ConfigError("expected a YAML mapping at the top level", source=name)
    return _Raw(_strip_kind(data, kind, name), name)


def _strip_kind(data: dict[str, Any], kind: str, source: str) -> dict[str, Any]:
    if data.get("kind", kind) not in (HARDWARE_KINDS if kind == "hardware" else (kind,)):
        raise ConfigError(f"expected kind: {kind}, got kind: {shown_repr(data.get('kind'))}", source=source,
                          path="kind")
    return data


# ----------------------------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class Loaded:
    """A validated spec, the raw tree it was validated from, and where each part came from."""

    spec: Any
    raw: dict[str, Any]
    source: str
    sources: dict[str, str] = field(default_factory=dict)


def resolve_experiment(data: dict[str, Any], *, source: str, base_dir: Path | None,
                       given: Mapping[str, str] | None = None) -> tuple[dict, dict]:
    """Inline the ``hardware:`` and ``model:`` references of a raw experiment mapping. ``given`` names the
    references the command line replaced (kind -> ``--model``): an error in one is blamed on the flag, and
    a relative path there is the working folder's. A GPU preset keeps its ``kind``."""
    data = dict(data)
    sources: dict[str, str] = {}
    for kind in ("hardware", "model"):
        if kind not in data:
            raise ConfigError("required key is missing", source=source, path=kind)
        if given and kind in given:  # a relative path there is the working folder's
            raw = load_ref(kind, data[kind], Path.cwd(), given[kind],
                            kind if given[kind] == "--set" else None)
        else:
            raw = load_ref(kind, data[kind], base_dir, source, kind)
        on_gpu = raw.data.get("kind") == "gpu"  # its spec is chosen by it (``spec_for``)
        data[kind] = {k: v for k, v in raw.data.items() if k != "kind" or on_gpu}
        sources[kind] = raw.source
    return data, sources


REFERENCE_KEYS = ("hardware", "model")
"""Override keys whose value may be a preset name or a file, as an experiment's own
``hardware:``/``model:``."""


_Inline = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def load_kind_data(data: dict[str, Any], kind: str, spec_type: type[Spec], section: str, *, source: str,
                   base_dir: Path | None, overrides: Mapping[str, Any] | None,
                   given: Mapping[str, str] | None, inline: _Inline | None = None,
                   spec_for: Callable[[dict[str, Any]], type[Spec]] | None = None) -> Loaded:
    """The one loader of an experiment-like mapping of ``kind`` (``experiment``, training's, the default
    when the file names none; ``inference``, serving's): its hardware and model references inlined
    (``given``: see ``resolve_experiment``), the overrides applied, ``<section>.interconnect`` inlined,
    ``inline(resolved, overrides)`` for what else the kind's references name, and ``spec_type`` (or the
    type ``spec_for`` gives for the resolved mapping: a serving run on a GPU's) validated. Raises
    ``ConfigError``."""
    if data.get("kind", "experiment") != kind:
        raise ConfigError(f"expected kind: {kind}, got kind: {shown_repr(data.get('kind'))}",
                          source=source, path="kind")
    overrides = dict(overrides or {})
    # a whole hardware or model named by an override (a sweep's ``hardware: [wse2, wse3]``, ``--set
    # model=gpt-j-6b``): it replaces the reference before anything is resolved, then the dotted keys apply
    named = {k: overrides.pop(k) for k in REFERENCE_KEYS
             if k in overrides and not isinstance(overrides[k], dict)}
    if named:
        data = {**data, **named}
    base, resolved, sources = resolve_with_overrides(data, section, source=source, base_dir=base_dir,
                                                     overrides=overrides, given=given)
    if inline is not None:
        resolved = inline(resolved, overrides)
    spec = validate(spec_for(resolved) if spec_for else spec_type, resolved, source=source, sources=sources,
                    overridden=overrides, baseline=base if overrides else None)
    return Loaded(spec, resolved, source, sources)


def load_experiment_data(data: dict[str, Any], *, source: str = "<inline>", base_dir: Path | None = None,
                         overrides: Mapping[str, Any] | None = None,
                         given: Mapping[str, str] | None = None) -> Loaded:
    """Validate a raw training experiment mapping (with preset references) plus overrides
    (``load_kind_data``)."""
    try:
        return load_kind_data(data, "experiment", ExperimentSpec, "cluster", source=source, base_dir=base_dir,
                              overrides=overrides, given=given, spec_for=_training_spec_for)
    except ConfigError as e:
        raise _granularity_for_given_hardware(e, source, given, overrides or {}) from None


def _training_spec_for(resolved: dict[str, Any]) -> type[Spec]:
    """A training step on a wafer, or on a GPU node for a ``kind: gpu`` preset (docs/model.md §13.8)."""
    hw = resolved.get("hardware")
    if isinstance(hw, dict) and hw.get("kind") == "gpu":
        # local: a GPU's specs load when an experiment names one, not at the start of a wafer's every run
        from .gpu_training import GpuExperimentSpec

        return GpuExperimentSpec
    return ExperimentSpec


def _granularity_for_given_hardware(e: ConfigError, source: str, given: Mapping[str, str] | None,
                                    overrides: Mapping[str, Any]) -> ConfigError:
    """A mesh block the experiment file chose for its own hardware that the hardware given on the command line
    cannot take is the flag's error, with the fix; any other error as it was. (Not silently shrunk: the
    granularity changes the fabric's timing, so a different one is the user's choice.)"""
    if not given or "hardware" not in given or "simulation.granularity" in overrides or e.source != source \
            or e.path != "simulation" or "block of at most" not in e.message:
        return e
    return ConfigError(f"{e.message}, which {source} sets for its own hardware: add --set "
                       "simulation.granularity=pe (or a smaller block:N)", source=given["hardware"],
                       path="simulation.granularity")


def resolve_with_overrides(data: dict[str, Any], section: str, *, source: str, base_dir: Path | None,
                           overrides: dict[str, Any], given: Mapping[str, str] | None = None
                           ) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(base, resolved, sources) of a raw experiment-like mapping: its hardware and model inlined, the
    overrides applied, and ``<section>.interconnect`` (``cluster`` for training, ``inference`` for
    serving) inlined after them, since it may be a reference and an override may set it."""
    resolved, sources = resolve_experiment(data, source=source, base_dir=base_dir, given=given)
    base, resolved = resolved, apply_overrides(resolved, overrides)
    key = f"{section}.interconnect"
    base = _resolve_interconnect(base, base_dir, source, section)
    resolved = _resolve_interconnect(resolved, base_dir, "--set" if key in overrides else source, section)
    return base, resolved, sources


def _resolve_interconnect(data: dict[str, Any], base_dir: Path | None, source: str,
                          section: str = "cluster") -> dict[str, Any]:
    """``data`` with a ``<section>.interconnect`` preset name or path inlined (a mapping stays as it is)."""
    part = data.get(section)
    if not isinstance(part, dict) or isinstance(part.get("interconnect", {}), dict):
        return data
    raw = load_ref("interconnect", part["interconnect"], base_dir, source, f"{section}.interconnect")
    inlined = {k: v for k, v in raw.data.items() if k != "kind"}
    return {**data, section: {**part, "interconnect": inlined}}


def read_experiment(path: str | Path | None, default: Path, kind: str, *, hardware: str | None = None,
                    model: str | None = None) -> tuple[Path, dict[str, Any], dict[str, str]]:
    """An experiment file's raw mapping of ``kind`` (``default`` when ``path`` is None), its ``hardware``
    and ``model`` replaced by those given (a preset name, or a path of the current directory, made
    absolute, not the file's folder's): (the file, the mapping, which references the command line gave)."""
    path = input_file(path) if path is not None else default
    data = read_yaml(path)
    if data.get("kind", "experiment") != kind:
        raise ConfigError(f"expected kind: {kind}, got kind: {shown_repr(data.get('kind'))}",
                          source=str(path), path="kind")
    given = {}
    for key, ref in (("hardware", hardware), ("model", model)):
        if ref is not None:  # a model may be a Hugging Face config.json; an error in it is the flag's
            data[key], given[key] = from_cwd(ref), f"--{key}"
    return path, data, given


def load_experiment(path: str | Path | None = None, *, hardware: str | None = None, model: str | None = None,
                    overrides: Mapping[str, Any] | None = None) -> Loaded:
    """Load an experiment file (or the shipped default example when ``path`` is None); ``hardware`` and
    ``model`` replace its references (``read_experiment``)."""
    path, data, given = read_experiment(path, default_experiment_path(), "experiment", hardware=hardware,
                                        model=model)
    return load_experiment_data(data, source=str(path), base_dir=path.parent, overrides=overrides,
                                given={**given, **named_by_set(overrides)})  # --set replaces --model


def named_by_set(overrides: Mapping[str, Any] | None) -> dict[str, str]:
    """The references (``hardware``, ``model``) that ``--set`` names by preset or file, as ``given`` to the
    loaders: an error in one is blamed on ``--set``, not on the experiment file it replaced, and a relative
    path there is the working folder's (as ``--set`` makes it)."""
    return {k: "--set" for k in (*REFERENCE_KEYS, *PATH_KEYS)
            if k in (overrides or {}) and not isinstance((overrides or {})[k], dict)}


PATH_KEYS = ("inference.load.file", "inference.speculative.draft")
"""Keys whose value may be a file: given on the command line (``--set``, in ``given``), a relative path
is the working folder's; in a file, or a sweep's grid, that file's folder's."""


def from_cwd(ref: str) -> str:
    """A relative path given as ``--hardware``/``--model``, made absolute against the current directory
    (a preset name stays as it is)."""
    if _looks_like_path(ref) and not Path(ref).is_absolute():
        return str(Path.cwd() / ref)
    return ref


def _looks_like_path(ref: str) -> bool:
    return ref.endswith((".yaml", ".yml", ".json")) or "/" in ref


def default_experiment_path() -> Path:
    """The shipped Qwen3-30B-A3B on WSE-2 example, the default of ``wsesim run`` and friends."""
    return shipped_file("qwen3-30b-a3b/experiment.yaml")


def load_hardware(ref: str | Path, overrides: Mapping[str, Any] | None = None) -> HardwareSpec | GpuSpec:
    """A hardware spec from a preset name or a file — a wafer's, or a GPU's for a ``kind: gpu`` file — with
    overrides keyed as in an experiment (``hardware.pe.sram``) or without the prefix (``pe.sram``)."""
    return _load_part(HardwareSpec, "hardware", ref, overrides)


def load_model(ref: str | Path, overrides: Mapping[str, Any] | None = None) -> ModelSpec:
    """A model spec from a preset name or a file; overrides as ``model.experts`` or ``experts``."""
    return _load_part(ModelSpec, "model", ref, overrides)


def load_part(kind: str, ref: str | Path) -> Any:
    """A hardware, model or interconnect spec (``kind``) from a preset name or a file, as it is."""
    return _load_part(SPEC_KINDS[kind], kind, ref, None)


def _load_part(spec: type[Spec], kind: str, ref: str | Path, overrides: Mapping[str, Any] | None) -> Any:
    """``load_hardware``/``load_model``: an error in an override names the key as the user wrote it."""
    raw = load_ref(kind, str(ref), Path.cwd(), "<command line>", kind)
    spec = spec_of(raw.data.get("kind", kind)) if kind == "hardware" else spec  # a wafer or a GPU
    base = {k: v for k, v in raw.data.items() if k != "kind"}
    prefix = f"{kind}."
    short = {key.removeprefix(prefix): value for key, value in (overrides or {}).items()}
    prefixed = {key.removeprefix(prefix) for key in overrides or {} if key.startswith(prefix)}
    try:
        data = apply_overrides(base, short)
        return validate(spec, data, source=raw.source, overridden=short, baseline=base if short else None)
    except ConfigError as e:
        if e.source != "--set" or not prefixed:
            raise
        named = [k for k in short
                 if e.path and (e.path == k or e.path.startswith(k + ".") or k.startswith(e.path + "."))]
        if (named and named[0] in prefixed) or (not named and len(prefixed) == len(short)):
            raise e.located(path_prefix=kind) if e.path else e from None
        raise


def detect_kind(data: dict[str, Any], source: str) -> str:
    kind = data.get("kind")
    valid = kinds()
    if kind is not None and not isinstance(kind, str):  # a list, a mapping, a number: never a kind
        raise ConfigError(f"expected one of {', '.join(valid)}, got {_describe(kind)}", source=source,
                          path="kind")
    if kind is None:
        raise ConfigError(f"required key is missing (expected one of {', '.join(valid)})", source=source,
                          path="kind")
    if kind not in valid:
        raise ConfigError(f"expected one of {', '.join(valid)}, got {shown_repr(kind)}", source=source,
                          path="kind")
    return str(kind)


# kinds validated by modules the loader does not import: kind -> validator(data, path). A serving experiment
# (``config.inference``, which imports the loader, and which a training run never loads) and a sweep (a
# later layer's: it needs the runner's vocabulary) register themselves when imported; whoever validates
# files of every kind (the CLI, ``wsesim.validate_file``) imports both first.
_EXTRA_KINDS: dict[str, Any] = {}


def kinds() -> list[str]:
    """Every kind ``validate_file`` knows now: the specs' and those registered by modules imported."""
    return sorted({*SPEC_KINDS, *HARDWARE_KINDS, *_EXTRA_KINDS})


def register_kind(kind: str, validator: Any) -> None:
    """Let a later layer (e.g. ``wsesim.experiments.sweep``) teach ``validate_file`` a new top-level kind."""
    _EXTRA_KINDS[kind] = validator


def validate_file(path: str | Path) -> tuple[str, Any]:
    """Validate any wsesim YAML file by its ``kind:``; returns (kind, spec)."""
    path = Path(path)
    data = read_yaml(path)
    kind = detect_kind(data, str(path))
    if kind == "experiment":
        return kind, load_experiment_data(data, source=str(path), base_dir=path.parent).spec
    if kind in _EXTRA_KINDS:
        return kind, _EXTRA_KINDS[kind](data, path)
    return kind, validate(spec_of(kind), data, source=str(path))


def spec_of(kind: str) -> type[Spec]:
    """The spec a file of ``kind`` validates as: ``specs.SPEC_KINDS``'s, or a GPU's (``kind: gpu``)."""
    if kind == "gpu":
        # local: a GPU's specs load when a file names one, not at the start of a wafer's every run
        from .gpu import GpuSpec

        return GpuSpec
    return SPEC_KINDS[kind]
