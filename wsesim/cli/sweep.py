"""``wsesim sweep``, ``wsesim tune`` and ``wsesim plot``: grids of runs, tuned G, pictures."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any

from .common import (
    EXIT_OK,
    add_experiment_arguments,
    check_names,
    check_output_files,
    check_output_folder,
    format_table,
    load_from_args,
    parse_grid_pairs,
    parse_overrides,
    print_json,
    say,
)
from .run import format_result
from .tune_out import add_tune_arguments

# ------------------------------------------------------------------------------------------------- tune


def _cmd_tune(args: argparse.Namespace) -> int:
    from ..experiments.advice import no_fit_advice
    from ..experiments.estimate import check_work
    from ..experiments.tune import candidates, tune
    from .progress import Progress
    from .tune_out import tune_systems, write_candidates

    if args.search_systems:  # a global batch over clusters of systems (cli/tune_out.py)
        return tune_systems(args)
    loaded = load_from_args(args)
    if args.out:
        check_output_folder(args.out)
    planned = candidates(loaded.spec)
    check_work(loaded.spec, candidates=planned)  # every candidate is a run, at its own tiles and batch
    with Progress(len(planned), "tune") as bar:
        result = tune(loaded, progress=lambda r, planned: bar.advance(
            f"G={r.tiles} B={r.batch_per_tile}: " + (f"{r.throughput_tokens_per_s:,.0f} tokens/s" if r.feasible
                                                     else "does not fit")))
    found = result.best.feasible  # an infeasible candidate is never the best
    advice = None if found else no_fit_advice(loaded.spec)
    written = write_candidates(args, loaded, [(c, {"best": found and c is result.best}) for c in result.candidates],
                               {"best": {"tiles": result.best.tiles, "batch_per_tile": result.best.batch_per_tile}
                                         if found else None})
    if args.json:
        print_json({"best": result.best.to_dict() if found else None,
                    "candidates": [c.to_dict() for c in result.candidates],
                    **({} if found else {"no_fit": {"why": advice[0], "try": [k for k, _ in advice[1]]}})})
        return EXIT_OK
    rows = []
    for r in result.candidates:
        mark = "*" if found and r is result.best else ""
        rows.append((f"{r.tiles}{mark}", r.batch_per_tile, r.batch_per_tile * r.tiles,
                     f"{r.throughput_tokens_per_s:,.0f}" if r.feasible else "-", f"{100 * r.mfu:.1f}" if r.feasible else "-",
                     r.binding_memory_phase, "" if r.feasible else r.infeasible_reason[:90]))
    print(format_table(rows, ("G", "B", "G·B", "tokens/s", "MFU %", "binding SRAM phase", "note")))
    print()
    if advice is not None:
        print(f"nothing fits: {advice[0]}. To make it fit, try:")
        for override, why in advice[1]:
            print(f"  --set {shell_word(override)}   ({why})" if "=" in override else f"  {override}   ({why})")
        print("\n".join(f"wrote {path}" for path in written))
        return EXIT_OK
    print(format_result(result.best))
    base = next(r for r in result.candidates if r.tiles == 1)
    if base.feasible and result.best.feasible:
        print(f"tuned G={result.best.tiles} is {result.best.throughput_tokens_per_s / base.throughput_tokens_per_s:.2f}x G=1")
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK


def shell_word(override: str) -> str:
    """``KEY=VALUE`` as it pastes into a shell: the value quoted when it needs it (``hardware.pe.sram='64 KiB'``)."""
    import shlex

    key, _, value = override.partition("=")
    return f"{key}={shlex.quote(value)}"


# ------------------------------------------------------------------------------------------------ sweep


def summary_rows(rows: list[dict[str, Any]], keys: list[str]) -> tuple[list[tuple[Any, ...]], list[str]]:
    """One line per configuration (overrides other than training.tiles): G=1 and tuned side by side."""
    varying = [k for k in keys if k != "training.tiles"]
    clusters = any(int(r.get("systems") or 1) > 1 for r in rows)  # then both, labelled
    groups: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    values: dict[tuple[str, ...], tuple[Any, ...]] = {}  # grouped by text: a value may be a mapping (an inline interconnect)
    for row in rows:
        config = tuple(str(row.get(f"set:{k}", "")) for k in varying)
        values.setdefault(config, tuple(row.get(f"set:{k}", "") for k in varying))
        # a failed point has no result columns: its G is the one it asked for
        kind = "tuned" if str(row.get("tuned")) == "True" else f"G={row.get('tiles') or row.get('set:training.tiles', '')}"
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


RESULTS, OWNER = "results.csv", "sweep.json"
EXIT_TERMINATED = 128 + 15  # as if killed by SIGTERM, after cleaning up


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ..config.errors import ConfigError
    from ..experiments.estimate import check_sweep
    from ..experiments.sweep import load_sweep, sweep_name
    from ..experiments.workers import connect_dask

    if args.workers < 1:
        raise ConfigError(f"expected a positive number of worker processes, got {args.workers}", source="--workers")
    sweep = load_sweep(args.sweep, overrides=parse_overrides(args.set), grid=parse_grid_pairs(args.grid))
    name = sweep_name(sweep, args.sweep)
    if not args.scheduler:  # the whole sweep, its points over the workers (a Dask cluster's size is its own)
        check_sweep(len(sweep.points), sum(p.cost for p in sweep.points), max(p.nbytes for p in sweep.points),
                    args.workers)
    progress = _Progress()
    cpus = os.cpu_count() or 1
    if args.workers > cpus and not args.scheduler:
        progress(f"wsesim: warning: --workers {args.workers} is more than the {cpus} CPUs here: the points share "
                 "them (no faster, more memory)\n")
    client = connect_dask(args.scheduler) if args.scheduler else None  # before writing anything
    try:
        with _sigterm_raises():
            return _sweep(args, sweep, name, client, progress)
    except _Terminated:
        progress("wsesim: terminated\n")
        return EXIT_TERMINATED
    finally:
        if client is not None:
            client.close()


def _sweep(args: argparse.Namespace, sweep: Any, name: str, client: Any, progress: _Progress) -> int:
    """Run the sweep into DIR, holding DIR's lock throughout: the CSV starts as its header and the rows
    --resume keeps (written whole, atomically), each finished row is appended as one line, and the
    finished file is rewritten once, sorted by point."""
    from ..experiments.estimate import sweep_duration
    from ..experiments.sweep import (
        csv_line,
        csv_text,
        kept_rows,
        override_keys,
        pairs_g1_with_tuned,
        read_results_table,
        result_columns,
        resumable_rows,
        run_sweep,
    )
    from ..output.files import LineAppender, atomic_write_text, folder_lock, prepare_dir
    from ..output.manifest import write_manifest

    check_names(args.out or Path("out") / name)
    out = prepare_dir(args.out or Path("out") / name)
    csv_path = out / RESULTS
    keys = override_keys(sweep)
    with folder_lock(out, _command(args)):
        check_output_files(out, [RESULTS, OWNER, "manifest.json", "figures.json"])
        _check_owner(out, name)
        done: dict[str, dict[str, Any]] = {}
        header: list[str] = []
        if args.resume and csv_path.exists():
            header, kept = read_results_table(csv_path)  # a row cut short by a crash is not done
            done = resumable_rows(sweep, kept, str(csv_path))
        columns = result_columns(keys, header, speedup=pairs_g1_with_tuned(sweep.points))
        atomic_write_text(out / OWNER, json.dumps({"kind": "sweep results", "name": name,
                                                   "sweep": str(Path(args.sweep).resolve())}) + "\n")
        moved = kept_rows(sweep, done)
        atomic_write_text(csv_path, csv_text(moved, keys, columns=columns))
        write_manifest(out, _manifest(args, sweep, name, [csv_path]))  # now: an interrupted sweep has one too
        total = len(sweep.points)
        todo = [p for p in sweep.points if p.key not in done]
        workers = "" if args.scheduler else f" ({sweep_duration(sum(p.cost for p in todo), len(todo), args.workers)})"
        progress(f"sweep {name}: {total} points, {total - len(moved)} to run{workers}, results in {csv_path}\n")
        with LineAppender(csv_path) as results:
            def on_row(row: dict[str, Any], rows: list[dict[str, Any]]) -> None:
                results.write(csv_line(row, columns))
                settings = ", ".join(f"{k}={row.get(f'set:{k}')}" if row.get(f"set:{k}") not in (None, "")
                                     else f"{k} not set" for k in keys)
                cluster = int(row.get("systems") or 1) > 1
                figure = (f"{float(row['throughput_tokens_per_s']):,.0f} tokens/s (G={row.get('tiles')}, "
                          f"B={row.get('batch_per_tile')})" if row["status"] == "ok" else row["reason"][:80])
                if cluster and row["status"] == "ok":  # a cluster's own figure first, each system's labelled
                    figure = (f"cluster {float(row['cluster_throughput_tokens_per_s']):,.0f} tokens/s on "
                              f"{row['systems']} systems, per system " + figure)
                progress(f"[{len(rows):>{len(str(total))}}/{total}] {settings}: {row['status']} {figure}\n")

            rows = run_sweep(sweep, done=done, workers=args.workers, scheduler=client, on_row=on_row)
        atomic_write_text(csv_path, csv_text(rows, keys, columns=columns))
        plots = []
        if args.plot:
            from ..output.plotting import plot_results

            plots = plot_results(csv_path, out)
        plots.append(write_manifest(out, _manifest(args, sweep, name, [csv_path, *plots])))
    table, summary_header = summary_rows(rows, keys)  # printed once every file is written
    print(format_table(table, summary_header))
    for path in [csv_path, *plots]:
        print(f"wrote {path}")
    return EXIT_OK


def _manifest(args: argparse.Namespace, sweep: Any, name: str, files: list[Path]) -> dict[str, Any]:
    """The sweep folder's manifest.json: the base experiment resolved, each point's overrides as given."""
    from ..output.manifest import manifest, resolved

    spec = sweep.spec
    return manifest("sweep", getattr(args, "argv", None), name=name, sweep_file=str(Path(args.sweep).resolve()),
                    sweep={"base": spec.base, "grid": spec.grid, "points": spec.points}, sources=sweep.base.sources,
                    overrides=[{"point": p.index, **p.overrides} for p in sweep.points],
                    base_overrides=parse_overrides(getattr(args, "set", None)), **resolved(sweep.base.spec),
                    files=[p.name for p in files], resumed=bool(args.resume),
                    workers=None if args.scheduler else args.workers, scheduler=args.scheduler)


def _check_owner(out: Path, name: str) -> None:
    """Refuse a folder that holds another sweep's results (its ``sweep.json`` names another sweep)."""
    from ..config.errors import ConfigError
    from ..config.yaml_strict import read_bounded

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


class _Progress:
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


# ------------------------------------------------------------------------------------------------- plot


def _cmd_plot(args: argparse.Namespace) -> int:
    import json

    from ..config.errors import ConfigError, shown
    from ..output.files import prepare_dir

    if args.wafer:
        folder = Path(args.wafer)
        source = folder / "wafer.json"
        if not source.exists():
            raise ConfigError("expected a run folder with wafer.json (from wsesim run --out DIR)", source=str(folder))
        from ..analysis.wafer import WaferMaps
        from ..config.yaml_strict import read_bounded
        from ..output.plotting import plot_wafer

        text = read_bounded(source, limit=2**32, what="wafer maps written by wsesim run")
        try:
            maps = WaferMaps.from_dict(json.loads(text.decode("utf-8")))
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            raise ConfigError(f"expected wafer maps written by wsesim run, got unreadable JSON ({shown(e, 120)})",
                              source=str(source)) from None
        check_output_folder(str(args.out or folder))
        paths = plot_wafer(maps, prepare_dir(args.out or folder))
    else:
        if not args.results:
            raise ConfigError("expected RESULTS.csv or --wafer DIR", source="wsesim plot")
        from ..output.plotting import plot_results

        csv_path = Path(args.results)
        if not csv_path.exists():  # a FIFO or a device is refused by name when read
            raise ConfigError("no such file", source=str(csv_path))
        out = Path(args.out or csv_path.parent)
        check_output_folder(str(out))
        check_output_files(out, ["figures.json", "manifest.json"])
        from ..output.files import folder_lock, holder_of

        if (holder := holder_of(csv_path.parent)) is not None:  # a sweep still writing the CSV: not all there
            raise ConfigError(f"another wsesim is writing to this folder ({holder}); plot when it has finished",
                              source=str(csv_path.parent))
        with folder_lock(out) if out.is_dir() else nullcontext(out):
            paths = plot_results(csv_path, out)  # makes the folder once the CSV reads
            source = csv_path
            paths = _plot_manifest(args, paths, source)
        _print_paths(args, paths)
        return EXIT_OK
    paths = _plot_manifest(args, paths, source)
    _print_paths(args, paths)
    return EXIT_OK


def _plot_manifest(args: argparse.Namespace, paths: list[Path], source: Path) -> list[Path]:
    if paths:
        import hashlib

        from ..output.manifest import manifest, write_manifest

        folder = paths[0].parent
        paths.append(write_manifest(folder, manifest(
            "plot", getattr(args, "argv", None), source=str(Path(source).resolve()),
            source_sha256=hashlib.sha256(Path(source).read_bytes()).hexdigest(), files=[p.name for p in paths])))
    return paths


def _print_paths(args: argparse.Namespace, paths: list[Path]) -> None:
    if args.json:
        print_json([str(path) for path in paths])
        return
    for path in paths:
        print(f"wrote {path}")


def register(sub: Any, commands: dict[str, Any]) -> None:
    t = sub.add_parser("tune", help="find the tiling factor G (and B) with the highest throughput")
    add_experiment_arguments(t)
    t.add_argument("--json", action="store_true", help='print {"best": run, "candidates": [run, ...]}')
    add_tune_arguments(t)
    commands["tune"] = _cmd_tune

    s = sub.add_parser("sweep", help="run a grid of experiments, streaming results to a CSV")
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

    p = sub.add_parser("plot", help="plot a sweep's results.csv (PNG and SVG), or a run's wafer pictures")
    p.add_argument("results", metavar="RESULTS.csv", nargs="?", help="a sweep's results.csv (from wsesim sweep)")
    p.add_argument("--wafer", metavar="RUN_DIR", help="draw the wafer pictures of a run saved with wsesim run --out")
    p.add_argument("--out", metavar="DIR", help="output folder (default: next to the CSV)")
    p.add_argument("--json", action="store_true", help="print the paths written as a JSON list")
    commands["plot"] = _cmd_plot
