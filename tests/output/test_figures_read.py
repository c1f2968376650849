"""Figures fit for a paper (issue 40, item 4): ``figure_check`` finds overprinting text, labels over the
frame or a line, and legends on the data; every figure the serving, sweep and tune plotting code draws
from small inputs has none of them, categorical axes carry no lines, numeric ones their true spacing and
unit. The serving CSVs in tests/data/figures are the shipped serve-vs-load and serve-vs-batch sweeps'
own results.csv."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsesim.analysis.frontier import plan_throughput_latency
from wsesim.analysis.serving_plans import plan_serving
from wsesim.experiments.table import read_results_table
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
    assert load.turns_back == [{"label": "model llama3.1-70b", "load": "3"}]
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


def _candidate(systems: int, tiles: int, b: int, throughput: float, **marks: object) -> dict[str, str]:
    return {"model": "m", "hardware": "hw", "seq_len": "32", "sram_capacity_bytes_per_pe": "49152",
            "best": str(marks.get("best", False)), "systems": str(systems), "tiles": str(tiles),
            "batch_per_tile": str(b), "feasible": "True", "cluster_throughput_tokens_per_s": str(throughput),
            "peak_sram_bytes_per_pe": "40960", "best_of_systems": str(marks.get("best_of_systems", False)),
            "pareto": "True", "efficiency_per_system": "0.98", "global_batch": "48", "micro_batches": "1"}


def test_tunes_candidates_of_several_counts_read_and_the_legend_tells_them_apart() -> None:
    """1, 2 and 4 systems at nearly one cluster throughput (a search where the counts tie): their B labels
    would sit on one another; those that would overprint are left out and the figure says how many. The
    legend shows each count's own marker, not three dots."""
    from wsesim.analysis.tune_plans import plan_candidates
    from wsesim.output.tune_figures import candidates_figure

    rows = [_candidate(n, g, 48 // (n * g), 1e6 * (1 + 0.001 * n), best=(n, g) == (4, 1))
            for n in (1, 2, 4) for g in (1, 2, 3, 4, 6) if 48 % (n * g) == 0]
    fig = candidates_figure(plan_candidates(rows))
    assert problems(fig) == []
    legend = fig.axes[0].get_legend()
    assert len({h.get_marker() for h in legend.legend_handles}) == 3
    assert any("B labels left out where they would overprint" in t.get_text() for t in fig.texts)
    plt.close(fig)


def test_no_two_of_the_six_line_styles_are_both_dots() -> None:
    """The third style is dotted; the sixth was sparse dots, so the third and sixth series (green and teal
    in a serving figure: α 0.8 and 1.0 of a speculative sweep) read as one. Now only one is all dots."""
    from wsesim.output.mpl import plt as pyplot
    from wsesim.output.palette import MARKERS

    dotted = []
    for _, style in MARKERS:
        line = pyplot.Line2D([0, 1], [0, 1], linestyle=style, linewidth=1.5)
        offset, dashes = line._unscaled_dash_pattern
        dotted.append(bool(dashes) and max(dashes[::2]) <= 1.0)  # every "on" segment no longer than a dot
    assert dotted.count(True) == 1
    assert len({str(style) for _, style in MARKERS}) == len(MARKERS)


def test_the_sweep_figures_read() -> None:
    from wsesim.analysis.figures import plan_figures
    from wsesim.output.sweep_figures import throughput_figure

    from .test_sweep_figures import _bta_rows, _systems_rows

    for header, rows in (_bta_rows(("regions", "in_place")), _systems_rows()):
        for plan in plan_figures(header, rows):
            fig = throughput_figure(plan)
            assert problems(fig) == [], plan.stem
            plt.close(fig)


def _neighbours_alike(region: list[list[int]], rgba: object) -> int:
    import numpy as np

    ids, colours = np.asarray(region), np.asarray(rgba)[..., :3]
    alike = 0
    for (a, b), (ca, cb) in (((ids[:, :-1], ids[:, 1:]), (colours[:, :-1], colours[:, 1:])),
                             ((ids[:-1, :], ids[1:, :]), (colours[:-1, :], colours[1:, :]))):
        differ = (a != b) & (a >= 0) & (b >= 0)
        alike += int((differ & np.all(np.isclose(ca, cb), axis=-1)).sum())
    return alike


def test_wafer_placement_neighbours_never_share_a_colour() -> None:
    """40 regions of 2 × 3 blocks side by side, numbered along rows: with a 20-colour map stretched over
    40 indices, regions 2k and 2k + 1 (neighbours) took one colour; now no two that touch do."""
    from wsesim.analysis.wafer import WaferMaps, region_colours
    from wsesim.output.wafer_figures import _placement_figure

    region = [[(r // 2) * 8 + c // 3 for c in range(24)] for r in range(10)]
    count = 40
    shades = region_colours(region, count)
    assert _neighbours_alike(region, [[[shades[v], 0, 0] for v in row] for row in region]) == 0
    flat = [[0.0] * 24 for _ in range(10)]
    maps = WaferMaps(10, 24, 1, 1e9, 1.0, flat, flat, 1.0, flat, region,
                     [[2 * r, 2 * r + 1] for r in range(count)], 0, [], "m on hw")
    fig = _placement_figure(maps)
    image = fig.axes[0].images[0]
    assert _neighbours_alike(region, image.to_rgba(image.get_array())) == 0
    plt.close(fig)


def test_the_frontier_of_a_wafer_and_a_gpu_node_reads_and_names_what_it_leaves_out() -> None:
    """Three panels (per system, per kW, $) over two hardware; the node's b=8 row not served and the
    wafer's rows without a price: the notes below the axes name each, and nothing overprints."""
    header = ["point", "status", "reason", "set:hardware", "set:inference.scheduler.batch", "model", "hardware",
              "system", "systems", "tokens_per_s_per_request", "tokens_per_s_per_system", "tokens_per_s_per_kw",
              "usd_per_million_tokens"]
    cells = [("0", "ok", "", "wse3", "1", "m", "wse3", "wafer", "2", "2000", "100", "9.1", ""),
             ("1", "ok", "", "wse3", "8", "m", "wse3", "wafer", "2", "1200", "450", "39", ""),
             ("2", "ok", "", "h200", "1", "m", "h200", "8-GPU node", "1", "900", "800", "100", "4.5"),
             ("3", "infeasible", "too big", "h200", "8", "m", "h200", "8-GPU node", "1", "", "", "", "")]
    rows = [dict(zip(header, c, strict=True)) for c in cells]
    load = plan_throughput_latency(header, rows)
    assert [p.metric for p in load.panels] == ["tokens_per_s_per_system", "tokens_per_s_per_kw",
                                               "usd_per_million_tokens"]
    fig = throughput_latency_figure(load)
    assert problems(fig) == [] and len(fig.axes) == 3
    words = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
    assert "not drawn: hardware h200 b=8 (infeasible)" in words
    assert "$ per million tokens (lower is better): n/a for hardware wse3 b=1, hardware wse3 b=8" in words
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["hardware wse3 (a system: wafer)", "hardware h200 (a system: 8-GPU node)"]
    plt.close(fig)
