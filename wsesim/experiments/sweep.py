"""Sweeps: a base experiment and a list of override points, run in parallel, streamed to a CSV.

A sweep file (``kind: sweep``)::

    kind: sweep
    name: bta-paper
    base: experiment.yaml            # a path (relative to the sweep file) or an inline experiment mapping
    grid:                            # dotted key -> list of values; the cartesian product
      training.tiles: [1, tuned]     # "tuned" runs wsesim.tune on that point
    points:                          # a list of override mappings (each combined with every grid point)
      - {model.experts: 8}
      - {model.experts: 128, model.top_k: 1}

Points are data: every point is a base plus its overrides, re-validated before anything runs. A point
that is infeasible, or fails, is a row with its status and reason; it never stops the sweep.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from ..analysis.results import STEP_PHASES, RunResult
from ..config.errors import ConfigError
from ..config.loader import Loaded, load_experiment_data, read_yaml, register_kind, validate
from ..config.specs import Spec

TUNED = "tuned"
STATUS_OK, STATUS_INFEASIBLE, STATUS_ERROR = "ok", "infeasible", "error"


class SweepSpec(Spec):
    """A sweep file. ``base`` is a path or an inline experiment; ``grid`` and ``points`` are overrides."""

    kind: Literal["sweep"] = "sweep"
    name: str = ""
    description: str = ""
    base: str | dict[str, Any]
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] = {}
    points: list[dict[str, Any]] = []


@dataclass(frozen=True)
class Point:
    """One point of a sweep: its index, its overrides (in file order) and whether G is tuned."""

    index: int
    overrides: dict[str, Any]
    base_key: str = ""  # a hash of the resolved base experiment

    @property
    def tuned(self) -> bool:
        return self.overrides.get("training.tiles") == TUNED

    @property
    def key(self) -> str:
        """A stable identity of the point (the resolved base and its overrides), for --resume: editing the
        base experiment or a preset it uses makes every point new."""
        text = self.base_key + json.dumps(self.overrides, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def run_overrides(self) -> dict[str, Any]:
        """The overrides to validate and run with (``tuned`` stands for G=1 until the tuner sets G)."""
        return {k: (1 if (k == "training.tiles" and v == TUNED) else v) for k, v in self.overrides.items()}


@dataclass(frozen=True)
class Sweep:
    """A loaded sweep: its spec, the validated base, and every point, each already re-validated."""

    spec: SweepSpec
    source: str
    base: Loaded
    points: tuple[Point, ...]


def expand(grid: dict[str, list[Any]], points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each grid combination (cartesian product, keys in file order) combined with each point."""
    keys = list(grid)
    combos = [dict(zip(keys, values, strict=True)) for values in itertools.product(*(grid[k] for k in keys))]
    return [{**p, **g} for p in (points or [{}]) for g in (combos or [{}])]


def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file and every one of its points. Raises ``ConfigError`` (one line)."""
    path = Path(path)
    data = read_yaml(path)
    return sweep_from_data(data, source=str(path), base_dir=path.parent)


def sweep_from_data(data: dict[str, Any], *, source: str, base_dir: Path | None) -> Sweep:
    spec = validate(SweepSpec, data, source=source)
    if isinstance(spec.base, str):
        base_path = Path(spec.base) if Path(spec.base).is_absolute() or base_dir is None else base_dir / spec.base
        base_data, base_source, base_root = read_yaml(base_path), str(base_path), base_path.parent
    else:
        base_data, base_source, base_root = dict(spec.base), source, base_dir
    base = load_experiment_data(base_data, source=base_source, base_dir=base_root)
    base_key = hashlib.sha256(json.dumps(base.raw, sort_keys=True, default=str).encode()).hexdigest()[:16]
    overrides = expand(spec.grid, spec.points)
    if not spec.grid and not spec.points:  # expand() alone would give one point: the bare base
        raise ConfigError("expected a grid or points, got neither", source=source, path="grid")
    points = []
    for i, ov in enumerate(overrides):
        point = Point(i, ov, base_key)
        where = "points" if spec.points else "grid"
        try:
            load_experiment_data(base.raw, source=base_source, overrides=point.run_overrides())
        except ConfigError as e:
            raise ConfigError(f"point {i} {_describe(ov)}: {e.path + ': ' if e.path else ''}{e.message}",
                              source=source, path=where) from None
        points.append(point)
    return Sweep(spec, source, base, tuple(points))


def _describe(overrides: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in overrides.items()) + "}"


def _validate_sweep_file(data: dict[str, Any], path: Path) -> SweepSpec:
    return sweep_from_data(data, source=str(path), base_dir=path.parent).spec


register_kind("sweep", _validate_sweep_file)


# ------------------------------------------------------------------------------------------- one point


def run_point(raw: dict[str, Any], source: str, point: Point) -> dict[str, Any]:
    """Run one point (in a worker process); returns its CSV row. Never raises."""
    from .runner import run_experiment
    from .tune import tune, tuned_row

    row: dict[str, Any] = {"point": point.index, "point_key": point.key}
    row.update({f"set:{k}": v for k, v in point.overrides.items()})
    try:
        loaded = load_experiment_data(raw, source=source, overrides=point.run_overrides())
        result: RunResult = tuned_row(tune(loaded)) if point.tuned else run_experiment(loaded.spec)
        row.update(result.scalars())
        row["tuned"] = point.tuned
        row["status"] = STATUS_OK if result.feasible else STATUS_INFEASIBLE
        row["reason"] = result.infeasible_reason
    except Exception as e:  # a failing point is a row, never the end of the sweep
        row["tuned"] = point.tuned
        row["status"] = STATUS_ERROR
        last = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        where = f" ({Path(last.filename).name}:{last.lineno})" if last else ""
        row["reason"] = f"{type(e).__name__}: {e}{where}".replace("\n", " ")
    return row


# -------------------------------------------------------------------------------------------- results


RESULT_COLUMNS = ["point", "point_key", "status", "reason", "tuned"] + [
    f for f in RunResult.__dataclass_fields__ if f != "phases"] + [f"phase_{p}_cycles" for p in STEP_PHASES]


def csv_text(rows: Iterable[dict[str, Any]], override_keys: list[str]) -> str:
    """The CSV of ``rows`` sorted by point: fixed columns, then one ``set:KEY`` column per override."""
    columns = RESULT_COLUMNS[:4] + [f"set:{k}" for k in override_keys] + RESULT_COLUMNS[4:]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in sorted(rows, key=lambda r: int(r["point"])):
        writer.writerow({c: _cell(row.get(c, "")) for c in columns})
    return buf.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return repr(float(value))  # a numpy float's repr is "np.float64(…)" since NumPy 2
    return value


def read_results(path: str | Path) -> list[dict[str, str]]:
    """The rows of a results CSV (strings, as written)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def override_keys(sweep: Sweep) -> list[str]:
    return list(dict.fromkeys(k for p in sweep.points for k in p.overrides))


# ---------------------------------------------------------------------------------------------- running


def run_local(sweep: Sweep, points: list[Point], workers: int) -> Iterator[dict[str, Any]]:
    """Rows as points finish, from ``workers`` local processes (1: in this process)."""
    if workers <= 1 or len(points) <= 1:
        for p in points:
            yield run_point(sweep.base.raw, sweep.base.source, p)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")  # no fork: a clean interpreter per worker
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(run_point, sweep.base.raw, sweep.base.source, p) for p in points]
        for f in as_completed(futures):
            yield f.result()


def connect_dask(address: str) -> Any:
    """A Dask client for the scheduler at ``address``, connected now, so that a bad address fails before
    anything is written. The wait is Dask's ``distributed.comm.timeouts.connect`` (30 s by default; e.g.
    ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=2s``). Raises ``ConfigError`` (one line) if dask is missing
    or the scheduler cannot be reached."""
    try:
        import dask
        from dask.distributed import Client
    except ImportError:
        raise ConfigError("expected dask to be installed for --scheduler (pip install 'wsesim[dask]')",
                          source="--scheduler") from None
    try:
        return Client(address, timeout=dask.config.get("distributed.comm.timeouts.connect"))
    except (OSError, TimeoutError, ValueError) as e:
        raise ConfigError(f"cannot reach the Dask scheduler at {address!r} ({type(e).__name__})",
                          source="--scheduler") from None


def run_dask(sweep: Sweep, points: list[Point], scheduler: Any) -> Iterator[dict[str, Any]]:
    """Rows as points finish, from a Dask distributed cluster: ``scheduler`` is an address (connected and
    closed here) or a client from ``connect_dask`` (left open for its owner to close)."""
    from dask.distributed import as_completed

    client = connect_dask(scheduler) if isinstance(scheduler, str) else scheduler
    try:
        futures = [client.submit(run_point, sweep.base.raw, sweep.base.source, p, pure=False) for p in points]
        for f in as_completed(futures):
            yield f.result()
    finally:
        if isinstance(scheduler, str):
            client.close()


def run_sweep(sweep: Sweep, *, done: dict[str, dict[str, Any]] | None = None, workers: int = 1,
              scheduler: Any = None,
              on_row: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
    """Run the points not in ``done`` (rows by point key, from --resume); call ``on_row(row, all_rows)``
    as each finishes (the CLI rewrites the CSV there). ``scheduler``: a Dask address or client (see
    ``run_dask``); None runs locally. Returns all rows, sorted by point."""
    done = dict(done or {})
    rows = [{**r, "point": p.index} for p in sweep.points if (r := done.get(p.key)) is not None]  # the file may have moved it
    todo = [p for p in sweep.points if p.key not in done]
    stream = run_dask(sweep, todo, scheduler) if scheduler is not None else run_local(sweep, todo, workers)
    for row in stream:
        rows.append(row)
        if on_row is not None:
            on_row(row, rows)
    return sorted(rows, key=lambda r: int(r["point"]))
