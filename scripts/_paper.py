"""Shared by the figure scripts: run part of the bta-paper sweep, write its CSV and plots."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from wsesim.config.loader import read_yaml, shipped_file
from wsesim.experiments.sweep import csv_text, override_keys, run_sweep, sweep_from_data
from wsesim.output.files import atomic_write_text, prepare_dir
from wsesim.output.plotting import plot_results


def run_figure(name: str, keep: Any, out: str, workers: int) -> list[Path]:
    """Run the bta-paper points for which ``keep(point_overrides)`` is true; plot into ``out``."""
    path = shipped_file("qwen3-30b-a3b/bta-paper.yaml")
    data = read_yaml(path)
    data["points"] = [p for p in data["points"] if keep(p)]
    data["name"] = name
    sweep = sweep_from_data(data, source=str(path), base_dir=path.parent)
    folder = prepare_dir(out)
    start = time.perf_counter()
    rows = run_sweep(sweep, workers=workers)
    csv_path = folder / "results.csv"
    atomic_write_text(csv_path, csv_text(rows, override_keys(sweep)))
    print(f"{name}: {len(rows)} points in {time.perf_counter() - start:.1f} s -> {csv_path}")
    return plot_results(csv_path, folder)


def main(doc: str, name: str, keep: Any, default_out: str) -> None:
    """The figure scripts' command line: ``[--out DIR] [--workers N]``."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out", default=default_out)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    for path in run_figure(name, keep, args.out, args.workers):
        print(f"wrote {path}")
