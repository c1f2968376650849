"""Figures at scale (issue 20): facets wrap instead of growing a figure to 3,000+ px, the phase breakdown
of a big sweep has a bounded height and says what it leaves out, several infeasible points at one x are
each visible, log axes read as plain numbers, and a sweep of ``points`` (one key each) gives figures whose
series have several points (the base's value is a point on the key's axis, not an unlabelled series).
The rows are made up (no simulation)."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from PIL import Image

from wsesim.analysis.figures import plan_figures, plan_phases
from wsesim.experiments.table import result_columns
from wsesim.output import sweep_figures
from wsesim.output.plotting import _cluster_figure, save_figure

KEYS: dict[str, list[Any]] = {"model.experts": [8, 16], "model.top_k": [1, 2, 4, 8], "training.tiles": [1, "tuned"],
                              "simulation.moe_mapping": ["regions", "in_place"]}


def _csv(path: Path, keys: dict[str, list[Any]], infeasible: Any = lambda s: False) -> Path:
    columns = result_columns(list(keys))
    rows = []
    for i, combo in enumerate(itertools.product(*keys.values())):
        s = dict(zip(keys, combo, strict=True))
        ok = not infeasible(s)
        row = dict.fromkeys(columns, "")
        row.update({"point": i, "status": "ok" if ok else "infeasible", **{f"set:{k}": v for k, v in s.items()},
                    "model": "m", "hardware": "wse2", "experts": s.get("model.experts", 8), "top_k": s.get("model.top_k", 1),
                    "seq_len": 1024, "tiles": 1 if s.get("training.tiles") == 1 else 5, "batch_per_tile": 2, "systems": 1,
                    "tokens_per_step": 4096})
        if ok:
            row.update({"throughput_tokens_per_s": 1000.0 + i, "step_time_s": 0.5, "step_cycles": 1000.0,
                        "phase_attention_cycles": 600.0, "phase_experts_cycles": 400.0})
        rows.append(row)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return list(rows[0]), rows


def test_four_facets_wrap_and_the_width_stays_bounded(tmp_path: Path) -> None:
    path = _csv(tmp_path / "results.csv", KEYS)
    header, rows = _read(path)
    [plan] = [p for p in plan_figures(header, rows) if p.stem == "throughput_vs_experts"]
    assert len(plan.panels) == 4  # top_k 1, 2, 4, 8 as facets
    save_figure(sweep_figures.throughput_figure(plan), tmp_path, plan.stem, ("png",))  # as plot_results saves it
    width, height = Image.open(tmp_path / "throughput_vs_experts.png").size
    assert width <= 2000, width  # once 4 panels side by side: 3,271 px
    assert height <= 2200
    assert plt.get_fignums() == []


def test_several_infeasible_points_at_one_x_are_each_drawn_apart(tmp_path: Path) -> None:
    path = _csv(tmp_path / "results.csv", KEYS, infeasible=lambda s: s["model.top_k"] == 8)
    header, rows = _read(path)
    [plan] = [p for p in plan_figures(header, rows) if p.stem == "throughput_vs_experts"]
    fig = sweep_figures.throughput_figure(plan)
    crosses = [(round(float(x), 3), float(y)) for ax in fig.axes for line in ax.lines if line.get_marker() == "x"
               for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)]
    plt.close(fig)
    failed = sum(r["status"] != "ok" for r in rows)
    assert failed == 8 and len(crosses) == failed and len(set(crosses)) == failed  # none hidden under another


def test_phases_of_a_big_sweep_is_bounded_and_says_what_it_leaves_out(tmp_path: Path) -> None:
    keys = {**KEYS, "training.seq_len": [1024, 2048, 4096, 8192]}  # 128 rows
    path = _csv(tmp_path / "results.csv", keys, infeasible=lambda s: s["training.seq_len"] == 8192 and s["model.top_k"] == 8)
    header, rows = _read(path)
    assert len(rows) == 128
    fig = sweep_figures.phases_figure(plan_phases(header, rows))
    title = fig.axes[0].get_title()
    assert "128 runs, every 3rd labelled, 8 not run" in title
    # saved as plot_results saves it (its three throughput views in three formats are not this test's)
    save_figure(fig, tmp_path, "phases", ("png",))
    assert Image.open(tmp_path / "phases.png").size[1] < 3000  # once 5,338 px for 128 rows
    assert plt.get_fignums() == []


def test_a_log_axis_reads_as_plain_numbers() -> None:
    series = {"s": [{"systems": n, "cluster": 3e5 * n, "per_system": 3e5, "share": 4, "vs_one": 1.0, "tree": 1.0}
                    for n in (1, 2, 4, 8, 16, 32)]}
    fig = _cluster_figure(series, "m on wse2")
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    plt.close(fig)
    assert labels and all("10^" not in t and "\\times" not in t and "×" not in t for t in labels), labels
    assert all(float(t.replace(",", "")) > 0 for t in labels)


def test_a_sweep_of_points_one_key_each_gives_multi_point_series() -> None:
    columns = result_columns(["training.seq_len", "hardware.io.bandwidth"])
    base = dict.fromkeys(columns, "") | {"status": "ok", "model": "m", "hardware": "wse2", "tiles": "1",
                                        "batch_per_tile": "2", "systems": "1", "tokens_per_step": "4096",
                                        "step_time_s": "0.5", "step_cycles": "1000.0"}
    rows = []
    for i, (seq, bw, bits) in enumerate([("1024", "", "1.2e12"), ("2048", "", "1.2e12"), ("4096", "", "1.2e12"),
                                         ("", "1.2 Tbit/s", "1.2e12"), ("", "2.4 Tbit/s", "2.4e12")]):
        rows.append(base | {"point": str(i), "set:training.seq_len": seq, "set:hardware.io.bandwidth": bw,
                            "seq_len": seq or "2048", "io_bandwidth_bits_per_s": bits,
                            "throughput_tokens_per_s": str(1000.0 + i)})
    plans = {p.stem: p for p in plan_figures(columns, rows)}
    bandwidth = plans["throughput_vs_io.bandwidth"]
    assert bandwidth.x_values == ["1.2 Tbit/s", "2.4 Tbit/s"]  # the base's 150 GB/s is the 1.2 Tbit/s point
    assert max(len(s.points) for panel in bandwidth.panels for s in panel.series) >= 2
    labels = [s.label for p in plans["throughput_vs_seq_len"].panels for s in p.series]
    assert all(not label.endswith(" ") for label in labels) and "io.bandwidth 1.2 Tbit/s" in labels
