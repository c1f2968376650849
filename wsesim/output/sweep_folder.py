"""A sweep's folder from start to finish: ``run_into_folder(job)`` runs a loaded sweep into ``job.out``,
a training sweep or a serving one alike (``wsesim sweep``, and ``wsesim infer --vary --out``, which
builds its sweep in memory).

Holding the folder's lock (``files.folder_lock``) throughout, it refuses a folder that holds another
sweep's results (``sweep.json`` names its sweep), keeps the rows ``--resume`` may keep
(``experiments.resume``), writes ``results.csv`` as its header and those rows (whole, atomically),
writes ``manifest.json`` (so that an interrupted sweep has one too), appends each finished row as one
line, rewrites the finished file once, sorted by point, draws the figures when asked
(``plotting.plot_results``) and writes the manifest again with every file. It prints nothing: the caller
is told of the start and of each row (``on_start``, ``on_row``) and prints them as it sees fit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError
from ..config.yaml_strict import read_bounded
from .files import (
    LineAppender,
    atomic_write_text,
    check_names,
    check_output_files,
    command_folder,
    prepare_dir,
)
from .manifest import MANIFEST, write_manifest

RESULTS, OWNER, FIGURES = "results.csv", "sweep.json", "figures.json"


@dataclass(frozen=True)
class SweepJob:
    """What to run into which folder, and what its manifest records."""

    sweep: Any  # an ``experiments.sweep.Sweep``
    name: str  # the sweep's name: ``sweep.json`` holds it, and another sweep's is refused
    out: Path
    command: str  # who holds the folder, as a second writer's error names it
    argv: list[str] | None = None  # the command line as typed (the manifest's ``command``)
    sweep_file: str | None = None  # the sweep file, resolved (None: a sweep built in memory)
    resume: bool = False
    workers: int = 1
    scheduler: str | None = None  # a Dask scheduler's address (then ``workers`` is not recorded)
    plot: bool = False
    base_overrides: dict[str, Any] = field(default_factory=dict)  # ``--set`` on the base, as given
    command_line: str | None = None  # the manifest's command when it is not wsesim's own (a figure script)


@dataclass(frozen=True)
class SweepOutcome:
    rows: list[dict[str, Any]]  # every row, sorted by point
    keys: list[str]  # the swept keys, in order
    files: list[Path]  # results.csv, the figures and figures.json, manifest.json


def run_into_folder(job: SweepJob, *, client: Any = None,
                    on_start: Callable[[int, list[Any], Path], None] | None = None,
                    on_row: Callable[[dict[str, Any], int, int], None] | None = None) -> SweepOutcome:
    """Run ``job`` (see the module docstring). ``client``: a Dask client (``workers.connect_dask``) to run
    the points on; ``on_start(points, to_run, csv_path)`` once the kept rows are written;
    ``on_row(row, rows_so_far, points)`` after each row is appended. Raises ``ConfigError`` (nothing run)
    for a folder in use or of another sweep, or for a ``--resume`` that would drop finished rows."""
    # local: keeps the engine (SimPy, numpy) out of output.sweep_folder's import
    from ..experiments.resume import kept_rows, override_keys, resumable_rows, table_columns
    from ..experiments.sweep import run_sweep
    from ..experiments.table import csv_line, csv_text, read_results_table

    started = time.perf_counter()
    check_names(job.out)
    out = prepare_dir(job.out)
    csv_path = out / RESULTS
    sweep, keys = job.sweep, override_keys(job.sweep)
    with command_folder(out, "sweep", job.command):  # and not another command's folder
        check_output_files(out, [RESULTS, OWNER, MANIFEST, FIGURES])
        check_owner(out, job.name)
        done: dict[str, dict[str, Any]] = {}
        header: list[str] = []
        if job.resume and csv_path.exists():
            header, kept = read_results_table(csv_path)  # a row cut short by a crash is not done
            done = resumable_rows(sweep, kept, str(csv_path))
        columns = table_columns(sweep, header)
        atomic_write_text(out / OWNER, json.dumps({"kind": "sweep results", "name": job.name,
                                                   "sweep": job.sweep_file}) + "\n")
        atomic_write_text(csv_path, csv_text(kept_rows(sweep, done), keys, columns=columns))
        sweep_manifest(job, out, [csv_path])  # now: an interrupted sweep has one too
        total = len(sweep.points)
        if on_start is not None:
            on_start(total, [p for p in sweep.points if p.key not in done], csv_path)
        with LineAppender(csv_path) as results:
            def appended(row: dict[str, Any], rows: list[dict[str, Any]]) -> None:
                results.write(csv_line(row, columns))
                if on_row is not None:
                    on_row(row, len(rows), total)

            rows = run_sweep(sweep, done=done, workers=job.workers, scheduler=client, on_row=appended)
        atomic_write_text(csv_path, csv_text(rows, keys, columns=columns))
        plots: list[Path] = []
        if job.plot:
            # local: keeps matplotlib out of output.sweep_folder's import
            from .plotting import plot_results

            plots = plot_results(csv_path, out, job.base_overrides)
        wall = time.perf_counter() - started
        written = [csv_path, *plots, sweep_manifest(job, out, [csv_path, *plots], wall)]
    return SweepOutcome(rows, keys, written)


def sweep_manifest(job: SweepJob, out: Path, files: list[Path], wall_s: float | None = None) -> Path:
    """Write the sweep folder's (``out``) manifest.json: the base experiment resolved, each point's
    overrides as given, and ``wall_s``, the host's seconds from start to the last file (None while the
    sweep runs; a resumed sweep's are its own run's)."""
    sweep = job.sweep
    spec = sweep.spec
    return write_manifest(out, "sweep", job.argv, files, loaded=sweep.base, name=job.name,
                          sweep_file=job.sweep_file,
                          sweep={"base": spec.base, "grid": spec.grid, "points": spec.points},
                          overrides=[{"point": p.index, **p.overrides} for p in sweep.points],
                          base_overrides=job.base_overrides, resumed=job.resume,
                          workers=None if job.scheduler else job.workers, scheduler=job.scheduler,
                          wall_s=wall_s, **({"command": job.command_line} if job.command_line else {}))


def check_owner(out: Path, name: str) -> None:
    """Refuse a folder that holds another sweep's results (its ``sweep.json`` names another sweep)."""
    path = out / OWNER
    if not path.exists():
        return
    try:
        owner = json.loads(read_bounded(path, limit=2**20, what=f"a {OWNER}").decode("utf-8")).get("name")
    except (ConfigError, ValueError, AttributeError):
        owner = None
    if owner != name:
        held = f"the results of sweep {owner!r}" if isinstance(owner, str) else f"an unreadable {OWNER}"
        raise ConfigError(f"this folder holds {held}, not of sweep {name!r}: give another --out "
                          "(or delete the folder to reuse it)", source=str(out))
