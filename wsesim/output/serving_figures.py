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

from typing import Any

from ..analysis.serving_plans import ServingPlan, ThroughputLatencyPlan
from .mpl import plt
from .palette import MARKERS, blue_first, marker

MAX_TICKS = 40  # x values labelled (beyond, every n-th)
PANELS_PER_ROW = 3  # the five panels as two rows: three, then two
MAX_MAPPING_LABELS = 40  # points whose mapping is written beside them
_NOT_SERVED = {"infeasible": "does not fit", "error": "failed"}


def _tick(plan: ServingPlan, text: str) -> str:
    """A tick's label: a square grid as its side (``420²``), anything else as written."""
    if plan.view.endswith(".grid") and "x" in text:
        rows, _, cols = text.partition("x")
        return f"{rows}²" if rows == cols else text
    return text


def serving_figure(plan: ServingPlan) -> Any:
    cols = min(len(plan.panels), PANELS_PER_ROW)
    rows = -(-len(plan.panels) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.9 * rows), squeeze=False)
    axes = [ax for row in grid for ax in row]
    for spare in axes[len(plan.panels):]:
        spare.set_visible(False)
    n = len(plan.x_values)
    step = max(1, -(-n // MAX_TICKS))
    served = [p for s in plan.panels[0].series for p in s.points if p["y"] is not None]
    label_mappings = not plan.mapping and len(served) <= MAX_MAPPING_LABELS
    for number, (ax, panel) in enumerate(zip(axes[:len(plan.panels)], plan.panels, strict=True)):
        top = max((p["y"] * panel.scale for s in panel.series for p in s.points if p["y"] is not None),
                  default=1.0)
        crossed: dict[int, list[tuple[str, str]]] = {}  # x_index -> (colour, status) of each point not served
        for s in panel.series:
            colour, (symbol, style) = blue_first(s.colour), marker(s.colour)
            ran = [p for p in s.points if p["y"] is not None]  # coinciding series still show: each its marker
            ax.plot([p["x_index"] for p in ran], [p["y"] * panel.scale for p in ran], marker=symbol,
                    linestyle=style, color=colour, ms=7 - 0.8 * (s.colour % len(MARKERS)), alpha=0.9,
                    label=s.label or None)
            last = None
            for p in s.points:
                if p["y"] is None:
                    crossed.setdefault(p["x_index"], []).append((colour, p["status"]))
                elif label_mappings and number == 0 and p["mapping"] != last:  # where the mapping changes
                    last = p["mapping"]
                    ax.annotate(p["mapping"], (p["x_index"], p["y"] * panel.scale),
                                textcoords="offset points", xytext=(4, 3), fontsize=5.5, color=colour,
                                alpha=0.9)
        for x, marks in crossed.items():  # side by side where several share an x
            for i, (colour, status) in enumerate(marks):
                at = x + 0.12 * (i - (len(marks) - 1) / 2)
                ax.plot([at], [0.0], "x", color=colour, markersize=9, mew=2, clip_on=False, zorder=5)
                ax.annotate(_NOT_SERVED.get(status, status or "not served"), (at, 0.0),
                            textcoords="offset points", xytext=(0, 8), ha="center", va="bottom", rotation=90,
                            fontsize=6.5, color=colour)
        ax.set_title(panel.y_label, fontsize=10)
        ax.set_xlabel(plan.x_label)
        ax.set_ylim(0, 1.15 * top if top > 0 else 1.0)
        ax.set_xlim(-0.5, n - 0.5)
        ticks = list(range(0, n, step))
        ax.set_xticks(ticks, [_tick(plan, plan.x_values[i]) for i in ticks], fontsize=8,
                      rotation=30 if max((len(v) for v in plan.x_values), default=0) > 8 else 0)
        ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda y, _: f"{y:,.4g}" if y < 1000 else f"{y:,.0f}"))
        ax.grid(alpha=0.3)
    if any(s.label for s in plan.panels[0].series):
        axes[0].legend(fontsize=7)
    crosses = any(p["y"] is None for panel in plan.panels for s in panel.series for p in s.points)
    unlabelled = "  (each point's mapping: figures.json)" if not plan.mapping and not label_mappings else ""
    fig.suptitle(plan.title.replace("\n", ": ", 1) + ("  (x: not served)" if crosses else "") + unlabelled,
                 fontsize=10)
    fig.tight_layout()
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
    """Tokens/s per system against tokens/s per user, one marker per load labelled with its rate
    (requests/s), a line per series through the loads in rate order; the rows it could not place are
    named below the axes."""
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for s in plan.series:
        colour, (symbol, style) = blue_first(s.colour), marker(s.colour)
        x = [p["per_user"] for p in s.points]
        y = [p["per_system"] for p in s.points]
        ax.plot(x, y, marker=symbol, linestyle=style, color=colour, label=s.label or None)
        for p in s.points:
            ax.annotate(f"{p['rate']}/s", (p["per_user"], p["per_system"]), textcoords="offset points",
                        xytext=(4, 4), fontsize=7, color=colour)
    ax.set_xlabel("tokens/s per user (1 / mean time per output token)")
    ax.set_ylabel("tokens/s per system")
    ax.set_xlim(left=0)
    tops = [max(p["per_system"] for p in s.points) for s in plan.series if s.points]
    if tops and min(tops) > 0 and max(tops) / min(tops) > 4:  # series far apart: each visible on a log axis
        ax.set_yscale("log")
        ax.set_ylabel("tokens/s per system (log)")
    else:
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if any(s.label for s in plan.series):
        ax.legend(fontsize=7)
    if plan.left_out:
        shown = ", ".join(f"{p['rate']}/s ({p['status'] or 'not served'})" for p in plan.left_out[:6])
        more = f" and {len(plan.left_out) - 6} more" if len(plan.left_out) > 6 else ""
        fig.text(0.01, 0.01, f"not drawn: {shown}{more} (figures.json: reasons)", fontsize=7)
    ax.set_title(plan.title.replace("\n", "\n", 1), fontsize=9)
    fig.tight_layout(rect=(0, 0.04 if plan.left_out else 0, 1, 1))
    return fig
