"""The serving figures, drawn from the plans of ``analysis.serving_plans``: against one swept key (batch,
grid, prompt length, KV layout, hardware, ...), tokens/s per request, tokens/s of all requests and the
time to first token side by side, below them the 99th percentiles of the inter-token latency and of each
request's end to end, one line per combination of the other swept keys (colours and markers from
``output.palette``). Each x value has its own position (a categorical axis: numbers and grids in order,
names as they came); a point that was not served is a cross at the bottom of its panel, labelled "does not
fit" (or "failed"), crosses of several series at one x side by side; its reason is in ``figures.json``.
The mapping each point was served on (stages × grid, wafers) is in the title when one mapping serves every
row, else written beside each point of the first panel where its series' mapping changes (at its first
point and wherever it differs from the point before; up to ``MAX_MAPPING_LABELS`` served points; beyond,
the title says where to read them).

matplotlib comes through ``output.mpl`` (the one module that imports it); ``plotting.plot_results``
saves these figures.
"""

from __future__ import annotations

import textwrap
from typing import Any

from ..analysis.frontier import NOT_GIVEN, PANELS, PER_USER, ThroughputLatencyPlan
from ..analysis.serving_plans import ServingPlan, logged
from .labels import place_labels, some, thin_ticks
from .mpl import NullLocator, cross, plain_log_axis, plt
from .palette import MARKERS, blue_first, marker

MAX_TICKS = 40  # x values labelled (beyond, every n-th)
PANELS_PER_ROW = 3  # the five panels and the key as two rows of three
MAX_KEY_LINES = 22  # legend lines in the key (series and their mappings); beyond, the mappings are left out
_NOT_SERVED = {"infeasible": "does not fit", "error": "failed"}


def _tick(plan: ServingPlan, text: str) -> str:
    """A tick's label: a square grid as its side (``420²``), anything else as written."""
    if plan.view.endswith(".grid") and "x" in text:
        rows, _, cols = text.partition("x")
        return f"{rows}²" if rows == cols else text
    return text


def _x_axis(ax: Any, plan: ServingPlan) -> None:
    """The x axis: categories each at its place, numbers at their true spacing (log past
    ``LOG_SPAN``), each value ticked (every n-th past ``MAX_TICKS``) as the sweep wrote it."""
    n = len(plan.x_values)
    step = max(1, -(-n // MAX_TICKS))
    at = plan.x_positions or [float(i) for i in range(n)]
    if plan.x_scale == "log":
        ax.set_xscale("log")
        ax.set_xlim(min(at) / 1.25, max(at) * 1.25)
    elif plan.x_scale == "linear":
        pad = 0.06 * ((max(at) - min(at)) or 1.0)
        ax.set_xlim(min(at) - pad, max(at) + pad)
    else:
        ax.set_xlim(-0.5, n - 0.5)
    ticks = list(range(0, n, step))
    ax.set_xticks([at[i] for i in ticks], [_tick(plan, plan.x_values[i]) for i in ticks], fontsize=8,
                  rotation=30 if max((len(v) for v in plan.x_values), default=0) > 8 else 0)
    ax.xaxis.set_minor_locator(NullLocator())


def _key_lines(plan: ServingPlan) -> tuple[list[str], bool]:
    """Each series' legend entry: its label, and below it each mapping it was served on with the x
    values where; whether the mappings fit (``MAX_KEY_LINES``)."""
    series = plan.panels[0].series
    with_maps = [s.label or "served on" for s in series]
    if any(s.mappings for s in series):
        with_maps = ["\n".join([s.label or "served on", *(f"  {m}" for m in s.mappings)]) for s in series]
    fits = sum(t.count("\n") + 1 for t in with_maps) + len(plan.mappings) <= MAX_KEY_LINES
    return (with_maps if fits else [s.label for s in series]), fits


def serving_figure(plan: ServingPlan) -> Any:
    """Five panels against the swept key and, in the last place, the key: the series, each with the
    mappings it was served on; lines only where x is a number (categories are points)."""
    cols = PANELS_PER_ROW if len(plan.panels) >= PANELS_PER_ROW else len(plan.panels) + 1
    rows = -(-(len(plan.panels) + 1) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.9 * rows), squeeze=False)
    axes = [ax for row in grid for ax in row]
    key = axes[len(plan.panels)]
    for spare in axes[len(plan.panels):]:
        spare.set_axis_off()
    joined = plan.x_scale != "category"
    at = plan.x_positions or [float(i) for i in range(len(plan.x_values))]
    handles = []
    for ax, panel in zip(axes[:len(plan.panels)], plan.panels, strict=False):
        served = [p["y"] * panel.scale for s in panel.series for p in s.points if p["y"] is not None]
        crossed: dict[int, list[tuple[str, str]]] = {}  # x_index -> (colour, status) of each point not served
        for s in panel.series:
            colour, (symbol, style) = blue_first(s.colour), marker(s.colour)
            ran = [p for p in s.points if p["y"] is not None]  # coinciding series still show: each its marker
            ax.plot([at[p["x_index"]] for p in ran], [p["y"] * panel.scale for p in ran],
                    marker=symbol, linestyle=style if joined else "", color=colour,
                    ms=7 - 0.8 * (s.colour % len(MARKERS)), alpha=0.9)
            if len(handles) < len(panel.series):
                handles.append(plt.Line2D([], [], marker=symbol, linestyle=style, color=colour, ms=6))
            for p in s.points:
                if p["y"] is None:
                    crossed.setdefault(p["x_index"], []).append((colour, p["status"]))
        _x_axis(ax, plan)
        for x, marks in crossed.items():  # side by side where several share an x
            for i, (colour, status) in enumerate(marks):
                shift = 0.12 * (i - (len(marks) - 1) / 2)
                spot = at[x] * 1.12 ** shift if plan.x_scale == "log" else at[x] + shift * (
                    (at[-1] - at[0]) / max(len(at) - 1, 1) if plan.x_scale == "linear" else 1.0)
                cross(ax, spot, colour)
                ax.annotate(_NOT_SERVED.get(status, status or "not served"), (spot, 0.0),
                            xycoords=ax.get_xaxis_transform(), textcoords="offset points", xytext=(0, 8),
                            ha="center", va="bottom", rotation=90, fontsize=6.5, color=colour)
        ax.set_title(logged(panel.y_label) if panel.y_log else panel.y_label, fontsize=10)
        ax.set_xlabel(logged(plan.x_label) if plan.x_scale == "log" else plan.x_label, fontsize=9)
        top = max(served, default=1.0)
        if panel.y_log:
            plain_log_axis(ax, "y")
            ax.set_ylim(min(served) / 1.6, top * 1.6)
        else:
            ax.set_ylim(0, 1.15 * top if top > 0 else 1.0)
            ax.yaxis.set_major_formatter(plt.FuncFormatter(
                lambda y, _: f"{y:,.4g}" if y < 1000 else f"{y:,.0f}"))
        ax.grid(alpha=0.3)
    labels, mapped = _key_lines(plan)
    crosses = any(p["y"] is None for panel in plan.panels for s in panel.series for p in s.points)
    if crosses:
        handles.append(plt.Line2D([], [], marker="x", linestyle="", color="#333333", ms=8, mew=2))
        labels.append("not served (its reason: figures.json)")
    mapping_lists = any(s.mappings for s in plan.panels[0].series) or plan.mappings
    if any(s.label for s in plan.panels[0].series) or mapping_lists or crosses:
        shown = [(h, t) for h, t in zip(handles, labels, strict=False) if t]
        heading = None
        if mapped and mapping_lists:
            heading = "\n".join(["mapping: stages × PEs per stage, wafers: at the x values after it",
                                 *(f"  {m}" for m in plan.mappings)])
        key.legend([h for h, _ in shown], [t for _, t in shown], loc="upper left", fontsize=7,
                   title=heading, title_fontsize=7, frameon=False, alignment="left")
    unlabelled = "  (each point's mapping: figures.json)" if not plan.mapping and not mapped else ""
    fig.suptitle(plan.title.replace("\n", ": ", 1) + unlabelled, fontsize=10)
    fig.tight_layout()
    for ax in axes[:len(plan.panels)]:
        thin_ticks(ax)
    return fig


_PART_COLOURS = {"instruction_cycles": "#8e44ad", "compute_cycles": "#27ae60",
                 "communication_cycles": "#2471a3", "waiting_cycles": "#b2babb", "handoff_cycles": "#d68910"}
_PART_LABELS = {"instruction_cycles": "instruction issue", "compute_cycles": "arithmetic",
                "communication_cycles": "wavelets on the fabric", "waiting_cycles": "waiting",
                "handoff_cycles": "hand-off to the next stage"}


def decode_step_figure(plan: dict[str, Any], title: str) -> Any:
    """A serving run's decode step (``analysis.serving_ops.decode_step_plan``): each stage's cycles as a
    stacked bar of instruction issue, arithmetic, wavelets, waiting and the hand-off; beside it one layer's
    ops, each split the same way."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.9), gridspec_kw={"width_ratios": [1, 2]})
    stages = plan["stages"]
    for axis, bars, parts, names in (
            (left, stages, [*_PART_COLOURS], [f"stage {s['stage']}" for s in stages]),
            (right, plan["layer"]["ops"], list(_PART_COLOURS)[:4], [o["op"] for o in plan["layer"]["ops"]])):
        bottom = [0.0] * len(bars)
        for part in parts:
            values = [b.get(part, 0.0) for b in bars]
            axis.bar(range(len(bars)), values, bottom=bottom, color=_PART_COLOURS[part],
                     label=_PART_LABELS[part])
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        axis.set_xticks(range(len(bars)), names, rotation=45 if len(bars) > 4 else 0, ha="right"
                        if len(bars) > 4 else "center", fontsize=7)
        axis.set_ylabel("cycles")
        axis.yaxis.set_major_formatter(plt.FuncFormatter(lambda y, _: f"{y:,.0f}"))
        axis.grid(axis="y", alpha=0.3)
    left.set_title("one decode step, per stage", fontsize=10)
    layer = plan["layer"]
    right.set_title(f"stage {layer['stage']}'s layer {layer['layer']}, op by op", fontsize=10)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
    fig.suptitle(f"{title}: decode at a context of {plan['context']} tokens", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def throughput_latency_figure(plan: ThroughputLatencyPlan) -> Any:
    """The frontier (``analysis.frontier``): tokens/s per user on x and one panel per y figure (per system,
    per kW, $ per million tokens), a line per series through its loads, each marker labelled with its load
    where the label overprints nothing (those left out are named below the axes); where a series' curve
    turns back (more offered load, more tokens/s per user: past what it serves) a note says so; the rows it
    could not place, and the points a panel has no figure for, are named below too."""
    panels = plan.panels
    fig, grid = plt.subplots(1, len(panels), figsize=(6.4 if len(panels) == 1 else 5.0 * len(panels), 4.8),
                             squeeze=False)
    axes = list(grid[0])
    x_words = "tokens/s per user (1 / mean time per output token)"
    for ax, panel in zip(axes, panels, strict=True):
        for s in plan.series:
            colour, (symbol, style) = blue_first(s.colour), marker(s.colour)
            shown = [p for p in s.points if p[panel.metric] is not None]
            label = (f"{s.label} (a system: {s.system})" if s.label and s.system else s.label) or None
            ax.plot([p[PER_USER] for p in shown], [p[panel.metric] for p in shown], marker=symbol,
                    linestyle=style, color=colour, label=label)
        ax.set_xlabel(logged(x_words) if plan.x_log else x_words, fontsize=8)
        ax.set_ylabel(logged(panel.y_label) if panel.y_log else panel.y_label, fontsize=8)
        for which, log in (("x", plan.x_log), ("y", panel.y_log)):
            if log:
                plain_log_axis(ax, which)
            else:
                getattr(ax, f"set_{which}lim")(0, None)
        ax.margins(0.08)
        ax.grid(alpha=0.3)
    notes = []
    for turn in plan.turns_back:
        who = f"{turn['label']}: " if turn["label"] else ""
        notes.append(f"{who}past {plan.point_label(turn['load'])} more load gives more tokens/s per user "
                     "(the curve turns back): the load is past what it serves, queueing sets these points")
    if plan.left_out:
        shown = some([f"{p['series']} {plan.point_label(p['load'])}".strip()
                      + f" ({p['status'] or 'not served'})" for p in plan.left_out], 6)
        notes.append(f"not drawn: {shown} (figures.json: reasons)")
    for panel in panels:
        if panel.missing:
            notes.append(f"{panel.y_label}: n/a for {some(panel.missing, 6)}")
    for metric in plan.not_drawn:
        notes.append(f"{dict(PANELS)[metric]}: n/a on every row ({NOT_GIVEN[metric]}), so no panel")
    fig.suptitle(plan.title, fontsize=9)
    legend = any(s.label for s in plan.series)
    if legend:  # below the axes, never over a point
        fig.legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="lower center",
                   bbox_to_anchor=(0.5, 0.0), ncol=min(len(plan.series), 3), frameon=False)
    rows = -(-len(plan.series) // 3) if legend else 0
    width = 110 * len(panels) // 2 + 55  # characters a note's line holds across the panels
    lines = 1 + sum(len(textwrap.wrap(n, width)) for n in notes)
    fig.tight_layout(rect=(0, 0.05 * rows + 0.025 * lines + 0.03, 1, 1))
    dropped = []
    for ax, panel in zip(axes, panels, strict=True):
        for s in plan.series:
            colour = blue_first(s.colour)
            dropped += [f"{t} ({s.label})" if s.label else t for _, _, t, _ in
                        place_labels(ax, [(p[PER_USER], p[panel.metric], plan.point_label(p["load"]), colour)
                                          for p in s.points if p[panel.metric] is not None])]
    if dropped:
        notes.append(f"loads not labelled (they would overprint): {', '.join(sorted(set(dropped)))}")
    if notes:
        fig.text(0.01, 0.05 * rows + 0.01, "\n".join(textwrap.fill(n, width) for n in notes), fontsize=6.5,
                 va="bottom")
    return fig

