"""Shared by the figure scripts: run part of the bta-paper sweep into a folder as ``wsesim sweep --plot``
does (results.csv, the plots, figures.json and manifest.json, the script's command line in it)."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from wsesim.config.loader import read_yaml, shipped_file
from wsesim.experiments.sweep import sweep_from_data
from wsesim.output.sweep_folder import SweepJob, run_into_folder


def run_figure(name: str, keep: Any, out: str, workers: int, command: str | None = None) -> list[Path]:
    """Run the bta-paper points for which ``keep(point_overrides)`` is true into ``out`` and plot them;
    the files written (``command``: the command line the manifest records)."""
    path = shipped_file("qwen3-30b-a3b/bta-paper.yaml")
    data = read_yaml(path)
    data["points"] = [p for p in data["points"] if keep(p)]
    data["name"] = name
    sweep = sweep_from_data(data, source=str(path), base_dir=path.parent)
    command = command or shlex.join(["python", *sys.argv])
    job = SweepJob(sweep, name, Path(out), command, workers=workers, plot=True, command_line=command)
    start = time.perf_counter()
    outcome = run_into_folder(job)
    print(f"{name}: {len(outcome.rows)} points in {time.perf_counter() - start:.1f} s -> "
          f"{Path(out) / 'results.csv'}")
    return outcome.files


def main(doc: str, name: str, keep: Any, default_out: str) -> None:
    """The figure scripts' command line: ``[--out DIR] [--workers N]``."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out", default=default_out, help=f"the folder (default {default_out}): results.csv, "
                    "the figures, figures.json and manifest.json")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    for path in run_figure(name, keep, args.out, args.workers):
        print(f"wrote {path}")
