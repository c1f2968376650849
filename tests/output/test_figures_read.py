"""Figures fit for a paper (issue 40, item 4): ``figure_check`` finds overprinting text, labels over the
frame or a line, and legends on the data; every figure the serving, sweep and tune plotting code draws
from small inputs has none of them, categorical axes carry no lines, numeric ones their true spacing and
unit. The serving CSVs in tests/data/figures are the shipped serve-vs-load and serve-vs-batch sweeps'
own results.csv."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsesim.analysis.serving_plans import plan_serving, plan_throughput_latency
from wsesim.experiments.sweep import read_results_table
from wsesim.output.figure_check import box, overlapping_text, overlaps, problems
from wsesim.output.mpl import plt
from wsesim.output.serving_figures import serving_figure, throughput_latency_figure

DATA = Path(__file__).resolve().parent.parent / "data" / "figures"


def test_the_check_finds_text_on_text_and_not_text_apart() -> None:
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.annotate("4/s", (0.5, 0.5), xytext=(4, 4), textcoords="offset points")
    ax.annotate("5/s", (0.5, 0.5), xytext=(6, 5), textcoords="offset points")
    ax.annotate("6/s", (0.1, 0.1))
    assert overlapping_text(fig) == [("'4/s'", "'5/s'")]
    assert any("overprints" in p for p in problems(fig))
    plt.close(fig)


def test_rotated_text_is_its_own_rectangle() -> None:
    """Two long labels slanted at 45° side by side: their axis-aligned boxes overlap, the rotated
    rectangles (what is drawn) do not; moved onto each other they do."""
    fig = plt.figure(figsize=(4, 4))
    a = fig.text(0.3, 0.5, "a long slanted label", rotation=45, ha="center", va="center")
    b = fig.text(0.42, 0.5, "a long slanted label", rotation=45, ha="center", va="center")
    fig.canvas.draw()
    outer_a, outer_b = a.get_window_extent(), b.get_window_extent()
    assert outer_a.overlaps(outer_b)
    assert not overlaps(box(a), box(b))
    b.set_position((0.31, 0.5))
    fig.canvas.draw()
    assert overlaps(box(a), box(b))
    plt.close(fig)


def _plans(name: str) -> tuple[list, object]:
    header, rows = read_results_table(DATA / name)
    return plan_serving(header, rows), plan_throughput_latency(header, rows)


@pytest.mark.parametrize("name", ["serve-vs-load.csv", "serve-vs-batch.csv"])
def test_the_serving_figures_read(name: str) -> None:
    """No mapping label overprints another, crosses a line or the frame (the mappings are in the key,
    beside the panels), no legend covers a point."""
    plans, load = _plans(name)
    for plan in plans:
        fig = serving_figure(plan)
        assert problems(fig) == [], plan.stem
        plt.close(fig)
    if load is not None:
        fig = throughput_latency_figure(load)
        assert problems(fig) == []
        plt.close(fig)


def test_models_are_categories_and_the_rate_a_log_axis_with_its_unit() -> None:
    plans, load = _plans("serve-vs-load.csv")
    by_stem = {p.stem: p for p in plans}
    model, rate = by_stem["serving_vs_model"], by_stem["serving_vs_rate"]
    assert model.x_scale == "category"
    fig = serving_figure(model)
    assert all(line.get_linestyle() == "None" for ax in fig.axes[:5] for line in ax.get_lines())
    plt.close(fig)
    assert rate.x_scale == "log" and rate.x_positions == [0.25, 0.5, 1, 2, 3, 4, 5, 6]
    assert rate.x_label == "offered load (requests/s)"
    fig = serving_figure(rate)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and list(ax.get_xticks()) == [0.25, 0.5, 1, 2, 3, 4, 5, 6]
    assert ax.get_xlabel() == "offered load (requests/s, log)"
    # the 8B and the 70B a decade apart in TTFT: a log axis, so neither is flattened
    assert [p.y_log for p in rate.panels][2] and fig.axes[2].get_yscale() == "log"
    plt.close(fig)


def test_the_70bs_curve_turning_back_is_said() -> None:
    _, load = _plans("serve-vs-load.csv")
    assert load.turns_back == [{"label": "model llama3.1-70b", "rate": "3"}]
    fig = throughput_latency_figure(load)
    words = " ".join(t.get_text() for t in fig.texts)
    assert "past 3/s more load gives more tokens/s per user (the curve turns back)" in words
    plt.close(fig)


def test_mappings_that_change_are_in_the_key_with_the_x_values_where() -> None:
    plans, _ = _plans("serve-vs-batch.csv")
    batch = next(p for p in plans if p.stem == "serving_vs_batch")
    by_label = {s.label: s.mappings for s in batch.panels[0].series}
    assert by_label["grid 250x250"] == ["9 × 250², 1 wafer: 1–4", "12 × 250², 2 wafers: 8–16"]
    fig = serving_figure(batch)
    legend = fig.axes[5].get_legend()
    assert "  12 × 250², 2 wafers: 8–16" in [t.get_text() for t in legend.get_texts()][0]
    assert not any(t.get_text() for ax in fig.axes[:5] for t in ax.texts)  # no label among the points
    plt.close(fig)
