"""Sweeps: a base experiment and a list of override points, run in parallel, streamed to a CSV.

A sweep file (``kind: sweep``)::

    kind: sweep
    name: bta-paper
    base: experiment.yaml            # a path (relative to the sweep file) or an inline experiment mapping:
                                     # a training experiment, or a serving one (kind: inference)
    grid:                            # dotted key -> list of values; the cartesian product
      training.tiles: [1, tuned]     # "tuned" runs wsesim.tune on that point
    points:                          # a list of override mappings (each combined with every grid point)
      - {model.experts: 8}
      - {model.experts: 128, model.top_k: 1}

Points are data: every point is a base plus its overrides, re-validated before anything runs (a key
set both in ``grid`` and in a point is an error, not an override; a point whose work cannot finish on
this machine is refused: ``wsesim.experiments.estimate``). A point that is infeasible, or fails, is a
row with its status and reason; it never stops the sweep. A serving base (``kind: inference``) sweeps
``inference.*``, ``hardware`` and ``model`` keys the same way; its points are served
(``experiments.points``) and its CSV has the serving columns (``table.result_columns``).

The CSV's columns and text are ``experiments.table``'s, what ``--resume`` keeps of it
``experiments.resume``'s; the folder they are written to, with its lock, is ``output.sweep_folder``'s.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from ..config.errors import ConfigError, shown_repr
from ..config.loader import (
    Loaded,
    input_file,
    named_by_set,
    read_yaml,
    register_kind,
    validate,
)
from ..config.request_trace import trace_digest
from ..config.specs import Spec, context_warning
from .estimate import MAX_SWEEP_POINTS
from .points import INFERENCE, KINDS, died_row, run_point
from .resume import kept_rows, override_keys, pairs_g1_with_tuned
from .table import TUNED, add_speedups
from .workers import run_dask, run_local


class SweepSpec(Spec):
    """A sweep file. ``base`` is a path or an inline experiment; ``grid`` and ``points`` are overrides."""

    kind: Literal["sweep"] = "sweep"
    name: str = ""
    description: str = ""
    base: str | dict[str, Any]
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] = {}
    points: list[dict[str, Any]] = []

    @field_validator("name")
    @classmethod
    def _one_folder_name(cls, name: str) -> str:
        if name and (problem := name_problem(name)):
            raise PydanticCustomError("cross_field", "{msg}", {"msg": f"{problem}, got {name!r}"})
        return name


_UNSAFE_NAME = re.compile(r"[/\\:\x00-\x1f\x7f]")


def name_problem(name: str) -> str:
    """Why ``name`` cannot be the output folder's name (``out/<name>``), or "" if it can: one folder,
    never a path that leaves ``out/`` (``../..``, ``/abs``) or names it (``.``)."""
    if not name.strip() or name.strip() in (".", "..") or _UNSAFE_NAME.search(name):
        return ('expected a name that is one folder name (no "/", "\\", ":" or control characters; '
                'not "." or "..")')
    if len(name.encode("utf-8", "surrogateescape")) > 255:  # a file system's longest name (NAME_MAX)
        return ("expected a name of at most 255 bytes (it names the output folder; "
                f"this one has {len(name.encode('utf-8', 'surrogateescape')):,})")
    return ""


def sweep_name(sweep: Sweep, path: str | Path) -> str:
    """The sweep's name: its ``name:``, else its file's stem; ``ConfigError`` if that cannot be a folder."""
    name = sweep.spec.name or Path(path).stem
    if problem := name_problem(name):
        raise ConfigError(f"{problem}, got {name!r}", source=str(path), path="name")
    return name


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its index, its overrides (in file order) and whether G is tuned."""

    index: int
    overrides: dict[str, Any]
    base_key: str = ""  # a hash of the resolved base experiment
    swept: tuple[str, ...] = ()  # every key the sweep sets (its value columns hold this point's, set or not)
    cost: float = 0.0  # estimated seconds of work (experiments.estimate): the order points are handed out in
    # points with the same key share a plan (wafer, experts, placement): one worker takes them
    plan_key: str = ""
    base_dir: str | None = None  # the folder a path the point names is relative to (the base experiment's)
    nbytes: float = 0.0  # estimated peak memory of the process running it
    # a hash of what the point's references (a preset, a file) resolve to, if it names any
    resolved_key: str = ""
    paths: dict[str, Any] = field(default_factory=dict)  # a command line's path as written -> its file

    @property
    def tuned(self) -> bool:
        return self.overrides.get("training.tiles") == TUNED

    @property
    def key(self) -> str:
        """A stable identity of the point: what it resolves to, for --resume. The resolved base and the
        overrides; and where an override names a preset or a file (``cluster.interconnect: swarmx``), the
        contents it resolves to, so that editing that file changes exactly the points that name it (a point
        that names none keeps the key it always had)."""
        text = self.base_key + json.dumps(self.overrides, sort_keys=True, default=str) + self.resolved_key
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def base_dir_path(self) -> Path | None:
        return None if self.base_dir is None else Path(self.base_dir)

    def run_overrides(self) -> dict[str, Any]:
        """The overrides to validate and run with (``tuned`` stands for G=1 until the tuner sets G; a path
        as the user wrote it, the file it names)."""
        return {k: (1 if (k == "training.tiles" and v == TUNED) else self.paths.get(k, v))
                for k, v in self.overrides.items()}


@dataclass(frozen=True)
class Sweep:
    """A loaded sweep: its spec, the validated base, and every point, each already re-validated. ``kind``
    is its base's: ``experiment`` (training) or ``inference`` (serving)."""

    spec: SweepSpec
    source: str
    base: Loaded
    points: tuple[Point, ...]
    kind: str = "experiment"
    # what the points' experiments warn of (a sequence beyond the model's context), each with its points
    warnings: tuple[str, ...] = ()

    @property
    def serving(self) -> bool:
        return self.kind == INFERENCE

    def load_point(self, point: Point) -> Loaded:
        """A point's experiment, validated as its row is run (training's loader or serving's)."""
        return KINDS[self.kind].load(self.base.raw, source=self.base.source,
                                     overrides=point.run_overrides(), base_dir=point.base_dir_path)


def expand(grid: dict[str, list[Any]], points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each grid combination (cartesian product, keys in file order) combined with each point."""
    keys = list(grid)
    combos = [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]
    return [{**p, **g} for p in (points or [{}]) for g in (combos or [{}])]


def load_sweep(path: str | Path, *, overrides: dict[str, Any] | None = None,
               grid: dict[str, list[Any]] | None = None, paths: dict[str, dict[str, str]] | None = None,
               ) -> Sweep:
    """Read and validate a sweep file and every one of its points. Raises ``ConfigError`` (one line).
    ``overrides`` (``--set``) apply to the base experiment, so to every point; ``grid`` (``--grid``) keys
    are added to the file's grid, replacing a key it already sweeps. A ``workloads/...`` path not found
    here is the copy shipped with wsesim (``input_file``). ``paths``: see ``sweep_from_data``."""
    path = input_file(path)
    return sweep_from_data(read_yaml(path), source=str(path), base_dir=path.parent, overrides=overrides,
                           grid=grid, paths=paths)


def sweep_from_data(data: dict[str, Any], *, source: str, base_dir: Path | None, check_work: bool = True,
                    overrides: dict[str, Any] | None = None, grid: dict[str, list[Any]] | None = None,
                    grid_flag: str = "--grid", paths: dict[str, dict[str, str]] | None = None) -> Sweep:
    """``load_sweep`` of a mapping. ``check_work``: refuse a point whose work cannot finish on this machine
    (``wsesim validate`` checks the file alone and skips that). ``grid_flag``: the option an error in a
    ``grid`` value names (``wsesim infer`` gives its ``--vary``). ``paths``: ``grid`` values naming a file
    of the working folder -> the file (``cli.common.cwd_paths``), loaded from there, shown as written."""
    paths = paths or {}
    if grid:
        data = {**data, "grid": {**(data.get("grid") or {}), **grid}}
    spec = validate(SweepSpec, data, source=source)
    swept = [*spec.grid, *(k for p in spec.points for k in p)]
    # a key the points set (or a mapping holding it) would replace the --set value; one below them applies
    if both := [(k, s) for k in overrides or {} for s in swept if k == s or k.startswith(s + ".")]:
        raise ConfigError(f"{both[0][0]} is set here and swept by the sweep (as {both[0][1]}): "
                          "set it in one place", source="--set", path=both[0][0])
    base, kind, base_source, base_root = _load_base(spec, source, base_dir, overrides, paths)
    load = KINDS[kind].load
    base_key = hashlib.sha256(json.dumps(base.raw, sort_keys=True, default=str).encode()).hexdigest()[:16]
    _check_points(spec, source, grid, grid_flag)
    overrides = expand(spec.grid, spec.points)
    points = []
    warned: dict[str, list[dict[str, Any]]] = {}  # a warning's text -> the points it is about (values)
    swept = tuple(dict.fromkeys(k for ov in overrides for k in ov))
    for i, ov in enumerate(overrides):
        point = Point(i, ov, base_key, swept, base_dir=None if base_root is None else str(base_root),
                      paths={k: paths[k][v] for k, v in ov.items() if k in paths and v in paths[k]})
        where = "points" if spec.points else "grid"
        try:
            loaded = load(base.raw, source=base_source, overrides=point.run_overrides(), base_dir=base_root)
            cost, nbytes = KINDS[kind].work(loaded, point, check_work)
            plan_key = KINDS[kind].plan_key(loaded)
        except ConfigError as e:  # a value --grid gave is the flag's error
            flag = bool(grid) and bool(e.path) and any(_overlap(e.path, k) for k in grid or {})
            raise ConfigError(f"point {i} {_describe(ov)}: {e.path + ': ' if e.path else ''}{e.message}",
                              source=grid_flag if flag else source, path=None if flag else where) from None
        if text := context_warning(loaded.spec):
            warned.setdefault(text, []).append(ov)
        points.append(replace(point, cost=cost, plan_key=plan_key, resolved_key=_resolved_key(loaded, point),
                              nbytes=nbytes))
    return Sweep(spec, source, base, tuple(points), kind, tuple(_point_warning(named, text, len(points))
                                                                for text, named in warned.items()))


def _load_base(spec: SweepSpec, source: str, base_dir: Path | None, overrides: dict[str, Any] | None,
               paths: dict[str, dict[str, str]]) -> tuple[Loaded, str, str, Path | None]:
    """(the base loaded with ``overrides``, its kind, the source its errors name, the folder its paths are
    read from). A base valid only once a point sets its keys (a load's rate) is loaded with the first
    point's; a hardware or model ``--set`` names is the flag's, so its error is ``--set``'s."""
    if isinstance(spec.base, str):
        base_path = (Path(spec.base) if Path(spec.base).is_absolute() or base_dir is None
                     else base_dir / spec.base)
        base_data, base_source, base_root = read_yaml(base_path), str(base_path), base_path.parent
    else:
        base_data, base_source, base_root = dict(spec.base), source, base_dir
    kind = base_data.get("kind", "experiment")
    if kind not in KINDS:
        raise ConfigError("expected a base of kind: experiment or kind: inference, got kind: "
                          f"{shown_repr(kind)}", source=base_source, path="kind")
    load = KINDS[kind].load
    given = named_by_set(overrides)
    try:
        base = load(base_data, source=base_source, base_dir=base_root, overrides=overrides, given=given)
    except ConfigError as alone:
        first = expand(spec.grid, spec.points)[0] if spec.grid or spec.points else {}
        first = {k: paths[k].get(v, v) if k in paths else v for k, v in first.items()}
        try:
            base = load(base_data, source=base_source, base_dir=base_root,
                        overrides={**(overrides or {}), **first}, given=given)
        except ConfigError:
            raise alone from None
    return base, kind, base_source, base_root


def _check_points(spec: SweepSpec, source: str, grid: dict[str, list[Any]] | None, grid_flag: str) -> None:
    """At most ``MAX_SWEEP_POINTS`` points, at least one, and no key both a point's and the grid's (the
    command line's grid named as its flag)."""
    count = max(len(spec.points), 1) * math.prod(len(values) for values in spec.grid.values())
    if count > MAX_SWEEP_POINTS:
        shape = (" × ".join(f"{len(v):,}" for v in spec.grid.values())
                 + (f" × {len(spec.points):,} points" if spec.points else ""))
        raise ConfigError(f"expected at most {MAX_SWEEP_POINTS:,} points, got {count:,} ({shape}): "
                          "split the sweep into several files", source=source,
                          path="grid" if spec.grid else "points")
    if not spec.grid and not spec.points:  # expand() alone would give one point: the bare base
        raise ConfigError("expected a grid or points, got neither", source=source, path="grid")
    for i, point in enumerate(spec.points):
        if both := [(k, g) for k in point for g in spec.grid if _overlap(k, g)]:
            k, g = both[0]
            also = "" if k == g else f" (as {g})"
            if g in (grid or {}):  # the command line's grid: it is what conflicts with the file, say so
                raise ConfigError(f"{g} is swept by the file's points too ({source}: points[{i}] sets "
                                  f"{k}): sweep it in one place (the file's points, or a copy of the file "
                                  "without it)", source=grid_flag, path=g)
            raise ConfigError(f"{k} is set both here and in grid{also} "
                              "(the grid's value would replace this one): set it in one place",
                              source=source, path=f"points[{i}].{k}")


def _resolved_key(loaded: Loaded, point: Point) -> str:
    """What the point's values name, hashed: a preset or a file a reference key names, a request trace's
    contents, the files its paths name (a draft's, say)."""
    resolved_key = ""
    if any(k in _REFERENCES for k in point.overrides):  # it may name a preset or a file: hash what it names
        resolved_key = hashlib.sha256(json.dumps(loaded.raw, sort_keys=True,
                                                 default=str).encode()).hexdigest()[:16]
    if trace := getattr(getattr(loaded.spec, "inference", None), "trace_file", None):  # its contents too
        resolved_key += trace_digest(trace)[:16]
    for file in (Path(f) for k, f in point.paths.items() if k != "inference.load.file"):
        if file.is_file():  # (a model's or hardware's contents are in loaded.raw; a trace's digested)
            resolved_key += hashlib.sha256(file.read_bytes()).hexdigest()[:16]
    return resolved_key


def _point_warning(points: list[dict[str, Any]], text: str, count: int) -> str:
    """A warning of some of a sweep's ``count`` points, naming them by their values (the first five, then
    how many more)."""
    if len(points) == count > 1:
        return f"every point of the sweep: {text}"
    named = ", ".join(_describe(p) for p in points[:5]) + (f" and {len(points) - 5:,} more"
                                                           if len(points) > 5 else "")
    return f"sweep point{'s' if len(points) > 1 else ''} {named}: {text}"


_REFERENCES = ("hardware", "model", "cluster", "cluster.interconnect", INFERENCE,
               "inference.interconnect")  # keys whose values may name a preset or a file


def _overlap(a: str, b: str) -> bool:
    """Whether dotted keys ``a`` and ``b`` set the same value: equal, or one a mapping holding the other
    (``training`` and ``training.seed``)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _describe(overrides: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in overrides.items()) + "}"


def _validate_sweep_file(data: dict[str, Any], path: Path) -> SweepSpec:
    return sweep_from_data(data, source=str(path), base_dir=path.parent, check_work=False).spec


register_kind("sweep", _validate_sweep_file)


# ---------------------------------------------------------------------------------------------- running


def run_sweep(sweep: Sweep, *, done: dict[str, dict[str, Any]] | None = None, workers: int = 1,
              scheduler: Any = None,
              on_row: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None
              ) -> list[dict[str, Any]]:
    """Run the points not in ``done`` (rows by point key, from --resume); call ``on_row(row, all_rows)``
    as each finishes (the CLI appends the row to its CSV there). ``scheduler``: a Dask address or client (see
    ``workers.run_dask``); None runs locally. Returns all rows, sorted by point."""
    done = dict(done or {})
    rows = kept_rows(sweep, done)
    todo = [p for p in sweep.points if p.key not in done]  # (several local workers take them longest first)
    run = partial(run_point, sweep.base.raw, sweep.base.source)  # run_point as it is now (tests wrap it)
    stream = (run_dask(run, todo, scheduler) if scheduler is not None
              else run_local(run, todo, workers, group=lambda p: p.plan_key, cost=lambda p: p.cost,
                             died=died_row))
    for row in stream:
        rows.append(row)
        if on_row is not None:
            on_row(row, rows)
    if pairs_g1_with_tuned(sweep.points):
        add_speedups(rows, override_keys(sweep))
    return sorted(rows, key=lambda r: int(r["point"]))
