"""``wsesim sweep``, ``wsesim tune`` and ``wsesim plot``: grids of runs, tuned G, pictures."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .common import (
    EXIT_OK,
    add_experiment_arguments,
    check_output_folder,
    format_table,
    load_from_args,
    print_json,
)
from .run import format_result

# ------------------------------------------------------------------------------------------------- tune


def _cmd_tune(args: argparse.Namespace) -> int:
    from ..experiments.tune import tune

    result = tune(load_from_args(args))
    if args.json:
        print_json(result.to_dict())
        return EXIT_OK
    rows = []
    for r in result.candidates:
        mark = "*" if r is result.best else ""
        rows.append((f"{r.tiles}{mark}", r.batch_per_tile, r.global_batch,
                     f"{r.throughput_tokens_per_s:,.0f}" if r.feasible else "-", f"{100 * r.mfu:.1f}" if r.feasible else "-",
                     r.binding_memory_phase, "" if r.feasible else r.infeasible_reason[:90]))
    print(format_table(rows, ("G", "B", "G·B", "tokens/s", "MFU %", "binding SRAM phase", "note")))
    print()
    print(format_result(result.best))
    base = next(r for r in result.candidates if r.tiles == 1)
    if base.feasible and result.best.feasible:
        print(f"tuned G={result.best.tiles} is {result.best.throughput_tokens_per_s / base.throughput_tokens_per_s:.2f}x G=1")
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ sweep


def summary_rows(rows: list[dict[str, Any]], keys: list[str]) -> tuple[list[tuple[Any, ...]], list[str]]:
    """One line per configuration (overrides other than training.tiles): G=1 and tuned side by side."""
    varying = [k for k in keys if k != "training.tiles"]
    groups: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for row in rows:
        config = tuple(row.get(f"set:{k}", "") for k in varying)
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
            out.append((*config, kind, row.get("tiles", ""), row.get("batch_per_tile", ""),
                        f"{thr:,.0f}" if thr else "-", speedup, row.get("status", ""),
                        (row.get("reason") or "")[:60]))
    return out, [*varying, "run", "G", "B", "tokens/s", "speedup", "status", "reason"]


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ..experiments.sweep import connect_dask, load_sweep

    sweep = load_sweep(args.sweep)
    client = connect_dask(args.scheduler) if args.scheduler else None  # before writing anything
    try:
        return _sweep(args, sweep, client)
    finally:
        if client is not None:
            client.close()


def _sweep(args: argparse.Namespace, sweep: Any, client: Any) -> int:
    from ..experiments.sweep import csv_text, override_keys, read_results, run_sweep
    from ..output.files import atomic_write_text, prepare_dir

    name = sweep.spec.name or Path(args.sweep).stem
    out = prepare_dir(args.out or Path("out") / name)
    csv_path = out / "results.csv"
    keys = override_keys(sweep)
    done: dict[str, dict[str, Any]] = {}
    if args.resume and csv_path.exists():
        done = {r["point_key"]: r for r in read_results(csv_path) if r.get("point_key")}
    total = len(sweep.points)
    todo = sum(1 for p in sweep.points if p.key not in done)
    sys.stderr.write(f"sweep {name}: {total} points, {todo} to run, results in {csv_path}\n")

    def on_row(row: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        atomic_write_text(csv_path, csv_text(rows, keys))
        settings = ", ".join(f"{k}={row.get(f'set:{k}')}" for k in keys)
        figure = (f"{float(row['throughput_tokens_per_s']):,.0f} tokens/s (G={row.get('tiles')}, B={row.get('batch_per_tile')})"
                  if row["status"] == "ok" else row["reason"][:80])
        sys.stderr.write(f"[{len(rows):>{len(str(total))}}/{total}] {settings}: {row['status']} {figure}\n")

    rows = run_sweep(sweep, done=done, workers=args.workers, scheduler=client, on_row=on_row)
    atomic_write_text(csv_path, csv_text(rows, keys))
    table, header = summary_rows(rows, keys)
    print(format_table(table, header))
    print(f"wrote {csv_path}")
    if args.plot:
        from ..output.plotting import plot_results

        for path in plot_results(csv_path, out):
            print(f"wrote {path}")
    return EXIT_OK


# ------------------------------------------------------------------------------------------------- plot


def _cmd_plot(args: argparse.Namespace) -> int:
    import json

    from ..config.errors import ConfigError, shown
    from ..output.files import prepare_dir

    if args.wafer:
        folder = Path(args.wafer)
        source = folder / "wafer.json"
        if not source.is_file():
            raise ConfigError("expected a run folder with wafer.json (from wsesim run --out DIR)", source=str(folder))
        from ..analysis.wafer import WaferMaps
        from ..output.plotting import plot_wafer

        try:
            maps = WaferMaps.from_dict(json.loads(source.read_text(encoding="utf-8")))
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
        if not csv_path.is_file():
            raise ConfigError("no such file", source=str(csv_path))
        check_output_folder(str(args.out or csv_path.parent))
        paths = plot_results(csv_path, args.out or csv_path.parent)  # makes the folder once the CSV reads
    if args.json:
        print_json([str(path) for path in paths])
        return EXIT_OK
    for path in paths:
        print(f"wrote {path}")
    return EXIT_OK


def register(sub: Any, commands: dict[str, Any]) -> None:
    t = sub.add_parser("tune", help="find the tiling factor G (and B) with the highest throughput")
    add_experiment_arguments(t)
    t.add_argument("--json", action="store_true", help='print {"best": run, "candidates": [run, ...]}')
    commands["tune"] = _cmd_tune

    s = sub.add_parser("sweep", help="run a grid of experiments, streaming results to a CSV")
    s.add_argument("sweep", metavar="SWEEP.yaml", help="a sweep file (kind: sweep)")
    s.add_argument("--workers", type=int, default=2, help="local worker processes (default 2)")
    s.add_argument("--scheduler", metavar="ADDRESS", help="run on a Dask distributed cluster instead")
    s.add_argument("--out", metavar="DIR", help="output folder (default out/<sweep name>)")
    s.add_argument("--resume", action="store_true", help="run only the points missing from DIR/results.csv")
    s.add_argument("--plot", action="store_true", help="write the plots when done")
    commands["sweep"] = _cmd_sweep

    p = sub.add_parser("plot", help="plot a sweep's results.csv (PNG and SVG), or a run's wafer pictures")
    p.add_argument("results", metavar="RESULTS.csv", nargs="?", help="a sweep's results.csv (from wsesim sweep)")
    p.add_argument("--wafer", metavar="RUN_DIR", help="draw the wafer pictures of a run saved with wsesim run --out")
    p.add_argument("--out", metavar="DIR", help="output folder (default: next to the CSV)")
    p.add_argument("--json", action="store_true", help="print the paths written as a JSON list")
    commands["plot"] = _cmd_plot
