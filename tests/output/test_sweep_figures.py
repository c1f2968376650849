"""A sweep's figures (wsesim.output.sweep_figures, with the log-axis locator of wsesim.output.mpl, the
series' colours of wsesim.output.palette and the cluster figure of wsesim.output.plotting): log axes of
less than a decade show numbers, no two series share a colour, the systems view is log-log in millions
where it passes a million. Each test failed on the code before issue 29's fixes."""

from __future__ import annotations

from typing import Any

from wsesim.analysis.figures import plan_figures
from wsesim.output.mpl import PlainLogLocator, plain_log_axis, plt
from wsesim.output.palette import colour as series_colour
from wsesim.output.plotting import _cluster_figure
from wsesim.output.sweep_figures import throughput_figure


def _labels(axis: Any) -> list[str]:
    axis.figure.canvas.draw()
    lo, hi = sorted(axis.get_view_interval())
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text() and lo <= t.get_position()[
        1 if axis.axis_name == "y" else 0] <= hi]


def test_a_log_axis_of_less_than_a_decade_shows_numbers() -> None:
    """2.5 … 4 holds no decade and no 1-2-5 step but 3 and 4 (the 1…9 steps); 0.6 … 3 holds 1 and 2 (1-2-5);
    1 … 1,000 its four decades; 3.1 … 3.9 none of those, so a linear axis's nice numbers inside it."""
    assert PlainLogLocator().tick_values(2.5, 4) == [3.0, 4.0]
    assert PlainLogLocator().tick_values(0.6, 3) == [1.0, 2.0]
    assert PlainLogLocator().tick_values(1, 1000) == [1.0, 10.0, 100.0, 1000.0]
    ticks = PlainLogLocator().tick_values(3.1, 3.9)
    assert len(ticks) >= 2 and all(3.1 <= t <= 3.9 for t in ticks)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [2.6, 3.8])
    plain_log_axis(ax, "y")
    ax.set_ylim(2.5, 4)
    assert _labels(ax.yaxis) == ["3", "4"]
    plt.close(fig)


def test_no_two_series_share_a_colour() -> None:
    colours = [series_colour(i) for i in range(30)]
    assert len(set(colours)) == 30
    series = {f"s{i}": [{"systems": n, "cluster": 1e5 * n, "per_system": 1e5, "share": 4, "vs_one": 1.0,
                         "tree": 1.0} for n in (1, 2, 4)] for i in range(6)}
    fig = _cluster_figure(series, "m on h")
    top = fig.axes[0]
    solid = [line.get_color() for line in top.lines if line.get_linestyle() == "-"]
    assert len(solid) == 6 and len(set(solid)) == 6  # the fifth is not the first's
    plt.close(fig)


def _systems_rows() -> tuple[list[str], list[dict[str, str]]]:
    header = ["point", "status", "set:cluster.systems", "model", "hardware", "experts", "top_k", "tiles",
              "batch_per_tile", "seq_len", "tokens_per_step", "systems", "throughput_tokens_per_s",
              "cluster_throughput_tokens_per_s", "step_time_s", "step_cycles"]
    rows = []
    for i, n in enumerate((1, 2, 4, 8, 16, 32, 64)):
        rows.append(dict(zip(header, [str(i), "ok", str(n), "gpt3-xl", "wse2", "0", "0", "1", "4", "2048",
                                      "8192", str(n), "160000", str(160000 * n), "0.05", "42500000"],
                             strict=True)))
    return header, rows


def test_the_systems_view_is_log_log_and_in_millions() -> None:
    """1 … 64 systems, equally spaced (a log₂ x), at 160,000 tokens/s each: the cluster reaches 10.24 M
    tokens/s, so the y axis is in millions (never "10,240 thousand") and logarithmic, as the x is."""
    plan, = plan_figures(*_systems_rows())
    assert plan.y_log and plan.y_scale == 1e6 and plan.y_label == "cluster throughput (million tokens/s)"
    fig = throughput_figure(plan)
    top = fig.axes[0]
    assert top.get_yscale() == "log"
    ys = [y for line in top.lines for y in line.get_ydata()]
    assert max(ys) == 10.24 and min(ys) == 0.16
    assert "10" in _labels(top.yaxis)
    plt.close(fig)


def test_a_view_of_other_keys_stays_linear_in_thousands() -> None:
    header, rows = _systems_rows()
    for r in rows:
        r["cluster_throughput_tokens_per_s"] = r["throughput_tokens_per_s"] = "50000"
        r["systems"] = "1"
    header[2] = "set:model.experts"
    for r in rows:
        r["set:model.experts"] = r.pop("set:cluster.systems")
    plan, = plan_figures(header, rows)
    assert not plan.y_log and plan.y_scale == 1e3 and plan.y_label == "throughput (thousand tokens/s)"


def test_placement_labels_never_run_into_each_other() -> None:
    """The shipped experiment's 128 regions on WSE-2: the narrow ones in the last row were labelled
    "112113114" (each at up to 9 pt however narrow its region: 0.6 pt apart); each label now fits its
    region's width, so labels side by side stay at least 2 pt apart once drawn."""
    from wsesim.analysis.wafer import wafer_maps
    from wsesim.config.loader import load_experiment
    from wsesim.experiments.runner import simulate_experiment
    from wsesim.output.wafer_figures import wafer_figures

    figs = wafer_figures(wafer_maps(simulate_experiment(load_experiment().spec)))
    fig = figs["wafer_placement"]
    fig.canvas.draw()
    ax = fig.axes[0]
    boxes = [t.get_window_extent() for t in ax.texts]
    assert len(boxes) == 128  # every region numbered
    gaps = [max(b.x0 - a.x1, a.x0 - b.x1) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if min(a.y1, b.y1) > max(a.y0, b.y0)]  # labels on one line: the space between them
    assert min(gaps) >= 2 * fig.dpi / 72
    plt.close("all")


def _bta_rows(mappings: tuple[str, ...] = ("regions",)) -> tuple[list[str], list[dict[str, str]]]:
    """bta-paper's points (experts 8 … 128 at top_k 8, top_k 1, 2, 4 at 128 experts), G=1 and tuned, under
    each mapping: G=1 at 128 experts is 11,392 tokens/s whatever top_k (the step is the weight stream's)."""
    keys = ["model.experts", "model.top_k", "training.tiles", *(["simulation.moe_mapping"] if len(mappings) > 1
                                                              else [])]
    header = ["point", "status", *(f"set:{k}" for k in keys), "model", "hardware", "experts", "top_k", "tiles",
              "batch_per_tile", "seq_len", "tokens_per_step", "throughput_tokens_per_s", "step_time_s",
              "step_cycles"]
    rows = []
    points = [(8, 8), (16, 8), (32, 8), (64, 8), (128, 8), (128, 4), (128, 2), (128, 1)]
    for mapping in mappings:
        for e, k in points:
            for g in ("1", "tuned"):
                thr = 11392.0 if (g == "1" and e == 128) else 40000.0 - 100 * e + 1000 * k * (g == "tuned")
                row = {"point": str(len(rows)), "status": "ok", "set:model.experts": str(e),
                       "set:model.top_k": str(k), "set:training.tiles": g, "model": "qwen3-30b-a3b",
                       "hardware": "wse2", "experts": str(e), "top_k": str(k), "tiles": "1" if g == "1" else "15",
                       "batch_per_tile": "3" if g == "1" else "1", "seq_len": "4096", "tokens_per_step": "12288",
                       "throughput_tokens_per_s": str(thr), "step_time_s": "1.0", "step_cycles": "850000000"}
                if len(mappings) > 1:
                    row["set:simulation.moe_mapping"] = mapping
                rows.append(row)
    return header, rows


def test_a_mapping_grid_gives_full_facets_and_no_one_x_figures() -> None:
    """Gridding bta-paper over the mapping: the mapping (crossed with every x) is the facet, the key that
    pairs with one x only (top_k beside experts, experts beside top_k) the marker; before, experts fell to
    figures of one x each (throughput_vs_top_k-experts=8 …) and top_k to facets holding one point."""
    header, rows = _bta_rows(("regions", "in_place"))
    plans = plan_figures(header, rows)
    assert [p.stem for p in plans] == ["throughput_vs_experts", "throughput_vs_top_k"]
    for plan in plans:
        assert plan.roles["simulation.moe_mapping"] == "facet"
        assert "figure" not in plan.roles.values()
        for panel in plan.panels:
            assert len({p["x_index"] for s in panel.series for p in s.points}) == len(plan.x_values)
        assert sum(len(s.points) for panel in plan.panels for s in panel.series) == len(rows)  # every row


def test_legend_by_value_and_no_points_on_one_spot() -> None:
    header, rows = _bta_rows()
    plan = next(p for p in plan_figures(header, rows) if p.view == "model.experts")
    fig = throughput_figure(plan)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert [t for t in labels if t.startswith("top_k")] == ["top_k 1", "top_k 2", "top_k 4", "top_k 8"]
    top = fig.axes[0]
    at_128 = [(float(x), float(y)) for line in top.lines for x, y in zip(line.get_xdata(), line.get_ydata(),
                                                                         strict=True)
              if abs(x - 4) < 0.5 and y == 11.392]
    assert len(at_128) == 4 and len({x for x, _ in at_128}) == 4  # four G=1 markers, side by side
    plt.close(fig)


def test_lm_head_and_the_optimizer_step_are_told_apart() -> None:
    """They were two purples (#8e44ad, #7d3c98: 28 apart in RGB), side by side at the end of every bar."""
    from wsesim.output.palette import PHASE_COLOURS

    def rgb(c: str) -> tuple[int, ...]:
        return tuple(int(c[i:i + 2], 16) for i in (1, 3, 5))

    a, b = rgb(PHASE_COLOURS["lm_head"]), rgb(PHASE_COLOURS["optimizer_step"])
    assert sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5 > 100


def test_models_on_x_are_points_named_by_preset_or_file_name() -> None:
    """A sweep over models (a preset and a config.json given by its path): the x axis is categories, so no
    line joins one model to the next, and a file is labelled by its name, not its full path."""
    header, rows = _systems_rows()
    header[2] = "set:model"
    path = "/home/someone/wsesim/tests/data/hf/qwen3-30b-a3b.json"
    for r, m in zip(rows, ["llama-7b", path, "gpt-j-6b"] * 3, strict=False):
        r["set:model"] = m
        del r["set:cluster.systems"]
        r["systems"] = "1"
    plan, = plan_figures(header, rows[:3])
    assert plan.categorical and plan.x_labels == ["llama-7b", "qwen3-30b-a3b.json", "gpt-j-6b"]
    fig = throughput_figure(plan)
    top = fig.axes[0]
    assert all(line.get_linestyle() in ("None", "") for line in top.lines if len(line.get_xdata()) > 1)
    assert [t.get_text() for t in fig.axes[-1].get_xticklabels()] == plan.x_labels
    plt.close(fig)
