"""``wsesim plot``: a sweep's figures from its results.csv (training's or serving's), tune's from its
candidates.csv (``tune --out``), a serving run's decode step from its folder, or a run's wafer pictures."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError, shown
from ..config.yaml_strict import read_bounded
from ..output.figure_limits import MAX_FIGURES
from ..output.files import command_folder, folder_lock, holder_of, prepare_dir
from ..output.manifest import read_manifest, sweep_settings, write_manifest
from .common import EXIT_OK, check_output_files, check_output_folder, print_json, print_written


def _cmd_plot(args: argparse.Namespace) -> int:
    if args.wafer:
        folder = Path(args.wafer)
        source = folder / "wafer.json"
        if not source.exists():
            raise ConfigError("expected a run folder with wafer.json (from wsesim run --out DIR)",
                              source=str(folder))
        # local: keeps matplotlib out of every command's start
        from ..analysis.wafer import WaferMaps
        from ..output.plotting import plot_wafer

        text = read_bounded(source, limit=2**32, what="wafer maps written by wsesim run")
        try:
            maps = WaferMaps.from_dict(json.loads(text.decode("utf-8")))
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            raise ConfigError("expected wafer maps written by wsesim run, got unreadable JSON "
                              f"({shown(e, 120)})", source=str(source)) from None
        check_output_folder(str(args.out or folder))

        with command_folder(prepare_dir(args.out or folder), "plot") as out:
            paths = _plot_manifest(args, plot_wafer(maps, out), source)
        _print_paths(args, paths)
        return EXIT_OK
    else:
        if not args.results:
            raise ConfigError("expected RESULTS.csv, CANDIDATES.csv, a folder or --wafer DIR",
                              source="wsesim plot")
        # local: keeps matplotlib out of every command's start
        from ..output.plotting import plot_results

        csv_path = Path(args.results)
        if csv_path.is_dir() and (csv_path / "results.csv").is_file():  # a sweep's folder
            csv_path = csv_path / "results.csv"
        elif csv_path.is_dir() and (csv_path / "candidates.csv").is_file():  # a tune folder (tune --out)
            csv_path = csv_path / "candidates.csv"
        elif csv_path.is_dir():  # a serving run's folder (infer --out)
            return _plot_serving_run(args, csv_path)
        if not csv_path.exists():  # a FIFO or a device is refused by name when read
            raise ConfigError("no such file", source=str(csv_path))
        out = Path(args.out or csv_path.parent)
        check_output_folder(str(out))
        check_output_files(out, ["figures.json", "manifest.json"])

        if (holder := holder_of(csv_path.parent)) is not None:  # a sweep still writing the CSV: not all there
            raise ConfigError(f"another wsesim is writing to this folder ({holder}); plot when it has "
                              "finished", source=str(csv_path.parent))
        with folder_lock(out) if out.is_dir() else nullcontext(out):
            # makes the folder once the CSV reads; titled with the sweep's --set, as its own plot was
            paths = plot_results(csv_path, out, sweep_settings(csv_path.parent), max_figures=args.max_figures)
            source = csv_path
            paths = _plot_manifest(args, paths, source)
        if not paths:  # said, never a silent exit 0
            sys.stderr.write(f"wsesim: {csv_path}: nothing drawn: no row ran (status ok); their reasons are "
                             "in the CSV\n")
        _print_paths(args, paths)
        return EXIT_OK


def _plot_serving_run(args: argparse.Namespace, folder: Path) -> int:
    """``wsesim plot DIR`` of ``wsesim infer --out DIR``: its decode step, stage by stage and op by op."""
    # local: keeps matplotlib out of every command's start
    from ..output.plotting import plot_serving_run

    out = Path(args.out or folder)
    check_output_folder(str(out))
    check_output_files(out, ["figures.json", "manifest.json"])
    if not (folder / "ops.csv").is_file():
        if read_manifest(folder, "run") is not None:  # wsesim run --out: its pictures are the wafer's
            raise ConfigError("expected a sweep's, tune's or serving run's folder, got a training run's "
                              f"(wsesim run --out): draw its wafer pictures with wsesim plot --wafer "
                              f"{folder}", source=str(folder))
        raise ConfigError("expected a sweep's folder (results.csv), a tune folder (candidates.csv from "
                          "wsesim tune --out DIR) or a serving run's (ops.csv and result.json from wsesim "
                          "infer --out DIR)", source=str(folder))
    with command_folder(prepare_dir(out), "plot") as held:
        paths = _plot_manifest(args, plot_serving_run(folder, held), folder / "ops.csv")
    _print_paths(args, paths)
    return EXIT_OK


def _plot_manifest(args: argparse.Namespace, paths: list[Path], source: Path) -> list[Path]:
    if paths:
        folder = paths[0].parent
        paths.append(write_manifest(folder, "plot", getattr(args, "argv", None), paths,
                                    source=str(Path(source).resolve()),
                                    source_sha256=hashlib.sha256(Path(source).read_bytes()).hexdigest()))
    return paths


def _print_paths(args: argparse.Namespace, paths: list[Path]) -> None:
    """The paths written (stdout), and on stderr the figures a figures.json among them says it left out."""
    for listing in (p for p in paths if p.name == "figures.json"):
        skipped = json.loads(listing.read_text(encoding="utf-8")).get("left_out", {})
        if isinstance(skipped, dict) and skipped:  # the first few by name, the count of the rest
            more = f" and {len(skipped) - 3:,} more (figures.json lists them)" if len(skipped) > 3 else ""
            named = ", ".join(f"{stem}.png" for stem in list(skipped)[:3])
            why = "; ".join(list(dict.fromkeys(skipped.values()))[:3])
            sys.stderr.write(f"wsesim: left out {named}{more}: {why}\n")
    if args.json:
        print_json([str(path) for path in paths])
        return
    print_written(paths)


def register(sub: Any, commands: dict[str, Any]) -> None:
    p = sub.add_parser("plot", help="plot a sweep's results.csv or tune's candidates.csv (PNG, SVG and PDF), "
                                    "or a run's wafer pictures")
    p.add_argument("results", metavar="RESULTS.csv|CANDIDATES.csv|DIR", nargs="?",
                   help="a sweep's results.csv or folder (wsesim sweep, infer --vary --out), tune's "
                        "candidates.csv or folder (wsesim tune --out: the candidates against G, and with "
                        "--search-systems the systems front), or a serving run's folder (wsesim infer --out: "
                        "its decode step, stage by stage and op by op)")
    p.add_argument("--wafer", metavar="RUN_DIR",
                   help="draw the wafer pictures of a run saved with wsesim run --out")
    p.add_argument("--out", metavar="DIR", help="output folder (default: next to the CSV)")
    p.add_argument("--json", action="store_true", help="print the paths written as a JSON list")
    p.add_argument("--max-figures", type=_positive, default=MAX_FIGURES, metavar="N",
                   help=f"draw at most N of a sweep's figures (default {MAX_FIGURES}); the others are named "
                        "on stderr and in figures.json")
    commands["plot"] = _cmd_plot


def _positive(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 0 < int(text) <= 10**6:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 1,000,000, got {text!r}")
    return int(text)
