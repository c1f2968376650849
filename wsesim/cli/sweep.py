"""``wsesim sweep``: a grid of runs — training or serving, as the sweep's base is — into a folder, each
row streamed to its results.csv (the folder's lifecycle is ``output.sweep_folder``'s; this module parses,
calls and prints). ``run_job`` is shared with ``wsesim infer --vary --out``."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError
from ..config.overrides import parse_grid_pairs
from ..output.sweep_folder import SweepJob, run_into_folder
from .common import (
    EXIT_FAIL,
    EXIT_OK,
    count_of,
    cwd_paths,
    defer,
    format_table,
    parse_overrides,
    print_json,
    print_written,
    say,
)
from .progress import time_left


def summary_rows(rows: list[dict[str, Any]], keys: list[str]) -> tuple[list[tuple[Any, ...]], list[str]]:
    """One line per configuration (overrides other than training.tiles): G=1 and tuned side by side."""
    varying = [k for k in keys if k != "training.tiles"]
    clusters = any(int(r.get("systems") or 1) > 1 for r in rows)  # then both, labelled
    groups: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    # grouped by text: a value may be a mapping (an inline interconnect)
    values: dict[tuple[str, ...], tuple[Any, ...]] = {}
    for row in rows:
        config = tuple(str(row.get(f"set:{k}", "")) for k in varying)
        values.setdefault(config, tuple(row.get(f"set:{k}", "") for k in varying))
        # a failed point has no result columns: its G is the one it asked for
        kind = ("tuned" if str(row.get("tuned")) == "True"
                else f"G={row.get('tiles') or row.get('set:training.tiles', '')}")
        groups.setdefault(config, {})[kind] = row
    out = []
    for config, by_kind in groups.items():
        for kind, row in by_kind.items():
            thr = float(row.get("throughput_tokens_per_s") or 0)
            base = by_kind.get("G=1")
            speedup = ""
            if kind == "tuned" and base and float(base.get("throughput_tokens_per_s") or 0) > 0 and thr > 0:
                speedup = f"{thr / float(base['throughput_tokens_per_s']):.2f}x"
            cluster = float(row.get("cluster_throughput_tokens_per_s") or 0)
            out.append((*values[config], kind, row.get("tiles", ""), row.get("batch_per_tile", ""),
                        *([f"{cluster:,.0f}" if cluster else "-"] if clusters else []),
                        f"{thr:,.0f}" if thr else "-", speedup, row.get("status", ""),
                        (row.get("reason") or "")[:60]))
    tokens = ["cluster tokens/s", "tokens/s per system"] if clusters else ["tokens/s"]
    return out, [*varying, "run", "G", "B", *tokens, "speedup", "status", "reason"]


def serving_summary_rows(rows: list[dict[str, Any]],
                         keys: list[str]) -> tuple[list[tuple[Any, ...]], list[str]]:
    """A serving sweep's table: one line per point, its settings, the mapping it was served on (grid of PEs
    per stage, stages, wafers) and its figures (the inter-token latency's p99 "-" in a row kept from an
    older CSV without it), or why it was not served."""
    out = []
    for row in rows:
        ok = row.get("status") == "ok"
        out.append((*(row.get(f"set:{k}", "") for k in keys), row.get("grid", ""), row.get("stages", ""),
                    row.get("systems", ""),
                    f"{float(row['tokens_per_s_per_request']):,.1f}"
                    if ok and float(row['tokens_per_s_per_request']) > 0 else "-",
                    f"{float(row['tokens_per_s']):,.1f}" if ok else "-",
                    f"{1e3 * float(row['ttft_s']):,.3f}" if ok else "-",
                    f"{1e3 * float(row['itl_p99_s']):,.3f}" if ok and row.get("itl_p99_s") not in (None, "")
                    else "-", row.get("status", ""), (row.get("reason") or "")[:60]))
    return out, [*keys, "grid", "stages", "systems", "tokens/s per request", "tokens/s", "TTFT ms",
                 "ITL p99 ms", "status", "reason"]


def row_text(row: dict[str, Any], keys: list[str]) -> str:
    """A finished point as its progress line says it: its settings, its status and its figure (or why not)."""
    settings = ", ".join(f"{k}={row.get(f'set:{k}')}" if row.get(f"set:{k}") not in (None, "")
                         else f"{k} not set" for k in keys)
    ok = row["status"] == "ok"
    if "tokens_per_s_per_request" in row:  # a served point
        system = row.get("system") or "wafer"  # on GPUs a stage's grid is 1 x its tensor-parallel GPUs
        per_stage = f"{row['grid']} PEs" if system == "wafer" else f"{row['grid'].rpartition('x')[2]} GPUs"
        figure = (f"{float(row['tokens_per_s_per_request']):,.1f} tokens/s per request, "
                  f"{float(row['tokens_per_s']):,.1f} in all, TTFT {1e3 * float(row['ttft_s']):,.3f} ms "
                  f"({count_of(row['stages'], 'stage')} of {per_stage} on {count_of(row['systems'], system)})"
                  if ok
                  else row["reason"][:80])
    else:
        figure = (f"{float(row['throughput_tokens_per_s']):,.0f} tokens/s (G={row.get('tiles')}, "
                  f"B={row.get('batch_per_tile')})" if ok else row["reason"][:80])
        if int(row.get("systems") or 1) > 1 and ok:  # a cluster's own figure first, each system's labelled
            figure = (f"cluster {float(row['cluster_throughput_tokens_per_s']):,.0f} tokens/s on "
                      f"{row['systems']} systems, per system " + figure)
    return f"{settings}: {row['status']} {figure}"


def died_exit(rows: list[dict[str, Any]], *, resumable: bool) -> int:
    """The exit code of a finished sweep: ``EXIT_FAIL``, said on stderr, when a worker process died under
    any of its points (those were not run: the out-of-memory killer, or a worker that could not start),
    else ``EXIT_OK``. A point's own error or infeasibility is a result, not a failure of the sweep."""
    # local: keeps the results table and the analysis modules it reads out of every command's start
    from ..experiments.table import WORKER_DIED

    died = sum(str(r.get("reason", "")).startswith(WORKER_DIED) for r in rows)
    if not died:
        return EXIT_OK
    again = "; --resume runs them again" if resumable else ""
    say(f"wsesim: {count_of(died, 'point')} of {len(rows)} not run: the worker process running each died "
        f"(see the reason in its row){again}\n")
    return EXIT_FAIL


EXIT_TERMINATED = 128 + 15  # as if killed by SIGTERM, after cleaning up


def _cmd_sweep(args: argparse.Namespace) -> int:
    # local: keeps the engine (SimPy) out of every command's start
    from ..experiments.estimate import check_sweep
    from ..experiments.sweep import load_sweep, sweep_name
    from ..experiments.workers import connect_dask

    if args.workers < 1:
        raise ConfigError(f"expected a positive number of worker processes, got {args.workers}",
                          source="--workers")
    grid = parse_grid_pairs(args.grid)
    sweep = load_sweep(args.sweep, overrides=parse_overrides(args.set), grid=grid, paths=cwd_paths(grid))
    defer(*sweep.warnings)
    name = sweep_name(sweep, args.sweep)
    if not args.scheduler:  # the whole sweep, its points over the workers (a Dask cluster's size is its own)
        check_sweep(len(sweep.points), sum(p.cost for p in sweep.points), max(p.nbytes for p in sweep.points),
                    args.workers)
    progress = Progress()
    cpus = os.cpu_count() or 1
    if args.workers > cpus and not args.scheduler:
        progress(f"wsesim: warning: --workers {args.workers} is more than the {cpus} CPUs here: the points "
                 "share them (no faster, more memory)\n")
    client = connect_dask(args.scheduler) if args.scheduler else None  # before writing anything
    job = SweepJob(sweep, name, Path(args.out or Path("out") / name), _command(args),
                   getattr(args, "argv", None), str(Path(args.sweep).resolve()), resume=bool(args.resume),
                   workers=args.workers,
                   scheduler=args.scheduler, plot=bool(args.plot), base_overrides=parse_overrides(args.set))
    return run_job(job, progress, client=client)


def run_job(job: Any, progress: Progress, *, client: Any = None, as_json: bool = False) -> int:
    """Run a ``SweepJob`` into its folder, its progress on stderr; print the summary table and the files
    written (``as_json``: the rows, as the CSV's columns, instead). SIGTERM stops it (the rows so far
    kept, the folder released): exit 143."""
    # local: keeps the results table and the analysis modules it reads out of every command's start
    from ..experiments.estimate import sweep_duration
    from ..experiments.resume import override_keys

    costs: dict[str, float] = {}  # the estimated seconds of each point still to run, by its index
    work = {"done": 0.0, "start": 0.0}

    def started(total: int, todo: list[Any], csv_path: Path) -> None:
        seconds = sum(p.cost for p in todo)
        costs.update({str(p.index): p.cost for p in todo})
        work["start"] = time.monotonic()
        workers = "" if job.scheduler else f" ({sweep_duration(seconds, len(todo), job.workers)})"
        progress(f"sweep {job.name}: {total} points, {len(todo)} to run{workers}, results in {csv_path}\n")

    def finished(row: dict[str, Any], done: int, total: int) -> None:
        # the time left: the estimate of the points not yet run, at the rate the finished ones ran; when
        # that rate is off the estimate the first line gave by more than a half, the line says by how much
        # (so that "about 10 s" then "~26 s left" reads as "the points take 2.6x the estimate")
        work["done"] += costs.get(str(row.get("point")), 0.0)
        elapsed = time.monotonic() - work["start"]
        left = time_left(elapsed, work["done"], sum(costs.values()))
        estimated = work["done"] / max(min(job.workers, len(costs)), 1)  # the first line's, for these points
        if left and not job.scheduler and estimated > 0 and not 2 / 3 <= elapsed / estimated <= 1.5:
            left += f": the points so far took {elapsed / estimated:.1f}x the estimate"
        progress(f"[{done:>{len(str(total))}}/{total}] {row_text(row, keys)}{f' ({left})' if left else ''}\n")

    keys = override_keys(job.sweep)
    try:
        with _sigterm_raises():
            outcome = run_into_folder(job, client=client, on_start=started, on_row=finished)
    except _Terminated:
        progress("wsesim: terminated\n")
        return EXIT_TERMINATED
    finally:
        if client is not None:
            client.close()
    if as_json:
        # local: keeps the results table and the analysis modules it reads out of every command's start
        from ..experiments.resume import table_columns

        columns = table_columns(job.sweep)
        print_json([{c: r.get(c, "") for c in columns} for r in outcome.rows])
        return died_exit(outcome.rows, resumable=True)
    summary = serving_summary_rows if job.sweep.serving else summary_rows
    print(format_table(*summary(outcome.rows, outcome.keys)))  # printed once every file is written
    print_written(outcome.files)
    return died_exit(outcome.rows, resumable=True)


def _command(args: argparse.Namespace) -> str:
    """The command holding a folder, as a second sweep's error names it."""
    parts = ["wsesim sweep", str(args.sweep)]
    if args.out:
        parts += ["--out", str(args.out)]
    if args.resume:
        parts.append("--resume")
    if args.scheduler:
        parts += ["--scheduler", str(args.scheduler)]
    return " ".join(parts)


class Progress:
    """Progress lines on stderr, best effort: if stderr is gone (a closed pipe, a closed file) progress
    stops and the sweep goes on: the results are what matters, and they are all written."""

    def __init__(self) -> None:
        self.on = True

    def __call__(self, text: str) -> None:
        if not self.on:
            return
        if not say(text):  # stderr gone: closed at start (None), a closed pipe, a full disk
            self.on = False
            if sys.stderr is None:
                return
            with suppress(OSError):  # nothing more to say there, and nothing left in a buffer to fail at exit
                sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that the sweep stops its workers and releases its folder."""


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise _Terminated

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals to whoever owns it
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def register(sub: Any, commands: dict[str, Any]) -> None:
    s = sub.add_parser("sweep", help="run a grid of experiments (training or serving), streaming results "
                                     "to a CSV")
    s.add_argument("sweep", metavar="SWEEP.yaml", help="a sweep file (kind: sweep)")
    s.add_argument("--workers", type=int, default=2, help="local worker processes (default 2)")
    s.add_argument("--scheduler", metavar="ADDRESS", help="run on a Dask distributed cluster instead")
    s.add_argument("--out", metavar="DIR", help="output folder (default out/<sweep name>)")
    s.add_argument("--resume", action="store_true", help="run only the points missing from DIR/results.csv")
    s.add_argument("--plot", action="store_true", help="write the plots when done")
    s.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a key of the base experiment, so of every point, e.g. --set "
                        "simulation.moe_mapping=in_place or --set hardware=wse3 (repeatable)")
    s.add_argument("--grid", action="append", metavar="KEY=v1,v2",
                   help="sweep a key over these values too (replaces the file's grid for that key), e.g. "
                        "--grid hardware=wse2,wse3 (repeatable)")
    commands["sweep"] = _cmd_sweep
