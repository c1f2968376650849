"""A serving sweep's figures (wsesim.analysis.serving_plans, wsesim.output.serving_figures), from its
results.csv: one figure per varying key, five panels (three from a CSV older than ITL), every row once
per panel (one not served at y None, with its reason), categorical keys on their own positions, grids by
their PEs, figures.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wsesim.analysis.serving_plans import BASE, plan_serving
from wsesim.experiments.resume import override_keys, table_columns
from wsesim.experiments.sweep import run_sweep, sweep_from_data
from wsesim.experiments.table import csv_text, read_results_table
from wsesim.output.files import atomic_write_text
from wsesim.output.plotting import plot_results

SERVE: dict[str, Any] = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
                         "inference": {"load": {"prompt_len": 16, "output_len": 4}}}


def _csv(tmp_path: Path, grid: dict[str, list[Any]], points: list[dict[str, Any]] | None = None) -> Path:
    data = {"kind": "sweep", "base": SERVE, "grid": grid, **({"points": points} if points else {})}
    sweep = sweep_from_data(data, source="<test>", base_dir=None)
    path = tmp_path / "results.csv"
    atomic_write_text(path, csv_text(run_sweep(sweep), override_keys(sweep), columns=table_columns(sweep)))
    return path


def test_each_varying_key_is_a_view_and_every_row_a_point_of_each_panel(tmp_path: Path) -> None:
    path = _csv(tmp_path, {"inference.kv_layout": ["concat", "shift"],
                           "inference.grid": ["8x8", "1x1", "4x4"]})
    header, rows = read_results_table(path)
    plans = plan_serving(header, rows)
    assert [(p.stem, p.view, p.x_values) for p in plans] == [
        ("serving_vs_kv_layout", "inference.kv_layout", ["concat", "shift"]),  # as the sweep ran them
        ("serving_vs_grid", "inference.grid", ["1x1", "4x4", "8x8"])]  # by their PEs
    for plan in plans:
        assert [p.metric for p in plan.panels] == ["tokens_per_s_per_request", "tokens_per_s", "ttft_s",
                                                   "itl_p99_s", "e2e_p99_s"]
        for panel in plan.panels:
            points = [p for s in panel.series for p in s.points]
            assert sorted(p["point"] for p in points) == list(range(6))
            not_served = sorted(p["point"] for p in points if p["y"] is None)
            assert not_served == [1, 4]  # the 1x1 grid: 48 KiB per PE holds no layer
            assert all("1x1 grid" in p["reason"] for p in points if p["y"] is None)
    assert plans[1].title == "Serving vs grid\ntiny-moe on tiny8, prompt 16, output 4, batch 1"
    assert [s.label for s in plans[1].panels[0].series] == ["kv_layout concat", "kv_layout shift"]


def test_a_key_left_to_the_base_is_drawn_at_the_bases_value(tmp_path: Path) -> None:
    """A point that sets no ``hardware.pe.sram`` is at the base's 48 KiB (its unit-named column), and
    one that sets no grid at the grid ``auto`` chose: never a series of its own with an empty label."""
    path = _csv(tmp_path, {}, points=[{"hardware.pe.sram": "1 MiB"}, {"inference.grid": "4x4"}])
    header, rows = read_results_table(path)
    sram, grid = plan_serving(header, rows)
    assert sram.x_values == ["49152 B", "1 MiB"] and grid.x_values == ["4x4", "8x8"]
    assert BASE not in sram.x_values + grid.x_values


def test_plot_results_draws_a_serving_csv_and_lists_it_in_figures_json(tmp_path: Path) -> None:
    path = _csv(tmp_path, {"inference.kv_layout": ["shift", "concat"], "inference.grid": ["8x8", "1x1"]})
    written = plot_results(path, tmp_path / "figs")
    names = [p.name for p in written]
    assert names == [f"serving_vs_{k}.{f}" for k in ("kv_layout", "grid") for f in ("png", "svg", "pdf")] + [
        "figures.json"]
    listing = json.loads((tmp_path / "figs" / "figures.json").read_text())
    assert listing["source"] == str(path)
    assert [f["files"] for f in listing["figures"]] == [names[:3], names[3:6]]
    svg = (tmp_path / "figs" / "serving_vs_kv_layout.svg").read_text()
    assert "does not fit" in svg and "tokens/s per request" in svg  # text kept as text, the crosses labelled


def test_a_sweep_where_nothing_fits_still_draws_every_point(tmp_path: Path) -> None:
    path = _csv(tmp_path, {"inference.grid": ["1x1", "1x2"], "inference.scheduler.batch": [1, 2]})
    header, rows = read_results_table(path)
    assert {r["status"] for r in rows} == {"infeasible"}
    written = plot_results(path, tmp_path / "figs")
    assert {p.name for p in written} >= {"serving_vs_grid.png", "serving_vs_batch.png", "figures.json"}
