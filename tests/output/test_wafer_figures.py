"""The wafer pictures (wsesim.output.wafer_figures) show what is there (issue 12 item 14): colours over the
data's own range with the hottest region outlined, every region numbered by its experts, and a Gantt
chart with the waits, the weights arriving, and each pass's time from its start."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from wsesim.analysis.wafer import WaferMaps, expert_ranges, wafer_maps
from wsesim.config.loader import load_experiment_data
from wsesim.experiments.runner import simulate_experiment
from wsesim.output.mpl import plt
from wsesim.output.wafer_figures import wafer_figures

TINY: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2, "routing": "zipf:1.5"},
                        "simulation": {"granularity": "pe"}}


@pytest.fixture(scope="module")
def figures() -> tuple[WaferMaps, dict[str, Any]]:
    run = simulate_experiment(load_experiment_data(TINY, overrides={"model.experts": 8}).spec)
    maps = wafer_maps(run)
    yield maps, wafer_figures(maps)
    plt.close("all")


def test_heat_maps_span_the_data_and_outline_the_hottest_region(figures: tuple[WaferMaps, dict[str, Any]]) -> None:
    """The busy map used to run from 0 to 1 and the SRAM map from 0 to the capacity: a region 2 % busier
    than the rest was the same colour."""
    maps, figs = figures
    for stem, data in (("wafer_busy", maps.busy), ("wafer_sram", [[v / 1024 for v in r] for r in maps.sram])):
        ax = figs[stem].axes[0]
        [image] = ax.get_images()
        assert image.get_clim() == pytest.approx((np.min(data), np.max(data)))
        [outline] = ax.patches
        assert outline.get_width() > 0 and not outline.get_fill()
        assert any("hottest region" in t.get_text() for t in ax.texts)


def test_the_placement_numbers_every_region_by_its_experts(figures: tuple[WaferMaps, dict[str, Any]]) -> None:
    """Beyond 64 regions the experts used not to be written at all (the README's 128-expert wafer)."""
    maps, figs = figures
    texts = sorted(t.get_text() for t in figs["wafer_placement"].axes[0].texts)
    assert texts == sorted(expert_ranges(e) for e in maps.region_experts)
    grid = [[0.5] * 16 for _ in range(10)]
    many = WaferMaps(10, 16, 1, 1e9, 1.0, grid, grid, 1.0, grid, np.arange(160).reshape(10, 16).tolist(),
                     [[2 * r, 2 * r + 1] for r in range(160)], 0, [("step", "fwd attention", 0.0, 1.0)], "t")
    fig = wafer_figures(many)["wafer_placement"]
    assert sorted(t.get_text() for t in fig.axes[0].texts) == sorted(f"{2 * r}-{2 * r + 1}" for r in range(160))


def test_the_gantt_chart_shows_waits_arrivals_and_time_from_each_pass(figures: tuple[WaferMaps, dict[str, Any]]) -> None:
    maps, figs = figures
    forward, backward = figs["gantt"].axes[:2]
    lanes = [t.get_text() for t in forward.get_yticklabels()]
    assert lanes[:2] == ["step", "weights in"] and all(lane.startswith("region ") for lane in lanes[2:])
    assert ": expert " in lanes[2]
    for ax in (forward, backward):  # the step's first span of each pass starts at 0
        step = [bar for bar in ax.collections if abs(bar.get_paths()[0].vertices[:, 1].mean()) < 0.5]
        assert min(p.vertices[:, 0].min() for bar in step for p in bar.get_paths()) == pytest.approx(0.0, abs=1e-9)
    legend = [t.get_text() for t in figs["gantt"].legends[0].get_texts()]
    assert "region waiting for weights" in legend and "expert weights arriving" in legend
