"""The accumulation and cluster figures (issue 11): drawn from a sweep that varies G and the micro-batches
at one global batch, or the number of systems; their data (wsesim.analysis.scaling) checked by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from wsesim.analysis.scaling import accumulation_points, cluster_series
from wsesim.experiments.resume import override_keys
from wsesim.experiments.sweep import run_sweep, sweep_from_data
from wsesim.experiments.table import csv_text, read_results
from wsesim.output.files import atomic_write_text
from wsesim.output.plotting import plot_results

BASE: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 16}, "simulation": {"granularity": "pe"}}
TREE = {"name": "t", "fan_out": 2, "link_bandwidth": "2 GB/s", "latency": "100 ns"}


def _csv(folder: Path, sweep: dict[str, Any]) -> Path:
    loaded = sweep_from_data({"kind": "sweep", "name": "t", "base": BASE, **sweep}, source="<test>", base_dir=None)
    path = folder / "results.csv"
    atomic_write_text(path, csv_text(run_sweep(loaded), override_keys(loaded)))
    return path


def test_the_accumulation_figure(tmp_path: Path) -> None:
    path = _csv(tmp_path, {"grid": {"training.global_batch": [12]},
                           "points": [{"training.tiles": g, "training.micro_batches": 12 // g} for g in (1, 2, 3)]})
    points = accumulation_points(read_results(path))
    assert [(p["tiles"], p["N"], p["B"]) for p in points] == [(1, 12, 1), (2, 6, 1), (3, 4, 1)]
    assert points[0]["io_in"] == 3 * points[2]["io_in"]  # 12 micro-batches stream the weights 3x as often as 4
    names = {p.name for p in plot_results(path, tmp_path)}
    assert {"bta_vs_accumulation.png", "bta_vs_accumulation.svg"} <= names and "cluster_scaling.png" not in names
    assert plt.get_fignums() == []


def test_the_cluster_figure(tmp_path: Path) -> None:
    path = _csv(tmp_path, {"grid": {"cluster.systems": [1, 2, 4]},
                           "points": [{"cluster.interconnect": TREE, "training.batch_per_tile": 2},
                                      {"cluster.interconnect": TREE, "training.global_batch": 8}]})
    series = cluster_series(read_results(path))
    assert set(series) == {"batch per tile 2", "global batch 8"}
    strong = series["global batch 8"]
    assert [(p["systems"], p["share"]) for p in strong] == [(1, 8), (2, 4), (4, 2)]
    assert strong[0]["vs_one"] == 1.0 and all(0 < p["vs_one"] <= 1 and 0 < p["tree"] <= 1 for p in strong)
    assert [p["share"] for p in series["batch per tile 2"]] == [2, 2, 2]
    names = {p.name for p in plot_results(path, tmp_path)}
    assert {"cluster_scaling.png", "cluster_scaling.svg"} <= names and "bta_vs_accumulation.png" not in names
    assert plt.get_fignums() == []
