"""The sweep figures, drawn from the plans of ``analysis.figures``: throughput against each swept key
(colour, marker, facets and separate figures as planned; infeasible points marked at the bottom of the
axis with a cross; the tuned / G=1 speedup below where the sweep pairs them), and the phase breakdown
(horizontal stacked bars, labels on the left, the legend beside the bars, thin phases grouped).

matplotlib comes through ``output.mpl`` (the one module that imports it, with the Agg backend set
first); ``plot_results`` in ``output.plotting`` saves these figures.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..analysis.figures import FigurePlan, PhasesPlan, describe, number
from .labels import ABOVE_FIRST, place_labels, some
from .mpl import PolyCollection, cross, plain_log_axis, plt
from .palette import COLOURS, MARKERS, PHASE_COLOURS
from .palette import colour as series_colour

MAX_LABELS = 40  # per panel: tuned points labelled with their G and B, speedups with their value
MAX_TICKS = 40  # x values labelled (beyond, every n-th)
MAX_BARS = 48   # phase bars drawn one by one, each labelled (beyond, one collection, every n-th labelled)


def _colour(plan: FigurePlan, index: int) -> str:
    if plan.roles.get("training.tiles") == "colour" and plan.colour_values[index] in ("1", "tuned"):
        # as the README has always had them
        return COLOURS[0] if plan.colour_values[index] == "1" else COLOURS[1]
    return series_colour(index + 1)


def throughput_figure(plan: FigurePlan) -> Any:
    """Throughput (thousand or million tokens/s: ``plan.y_scale``) against the view's key, one panel per
    facet (a log y when ``plan.y_log``); the speedup below."""
    Line2D = plt.Line2D  # noqa: N806 (matplotlib's class, through mpl)
    n, speed = len(plan.panels), plan.has_speedup
    axes = _panel_axes(n, speed)
    fig = axes[0][0].figure
    ys = [p["y"] for panel in plan.panels for s in panel.series for p in s.points if p["y"]]
    top_y, scale = max(ys, default=1.0), plan.y_scale
    failed, beside = False, False
    pending: dict[tuple[int, int], list[tuple[float, float, str, str]]] = {}  # labels placed after the layout
    for col, panel in enumerate(plan.panels):
        top = axes[0][col]
        tuned_at = Counter(p["x_index"] for s in panel.series if s.fixed.get("training.tiles") == "tuned"
                           for p in s.points)
        labelled = sum(tuned_at.values()) <= MAX_LABELS  # past that many, labels would only cover each other
        side: list[tuple[int, float, str, str, float]] = []
        shift = dodge([(p["x_index"], p["y"], (si, pi)) for si, s in enumerate(panel.series)
                       for pi, p in enumerate(s.points) if p["y"] is not None], 1.18 * top_y)
        for si, s in enumerate(panel.series):
            colour, (marker, style) = _colour(plan, s.colour), MARKERS[s.marker % len(MARKERS)]
            ran = [(pi, p) for pi, p in enumerate(s.points) if p["y"] is not None]
            top.plot([p["x_index"] + shift.get((si, pi), 0.0) for pi, p in ran],
                     [p["y"] / scale for _, p in ran], marker=marker, color=colour, ms=6,
                     linestyle="" if plan.categorical else style)  # no line between models
            for pi, p in enumerate(s.points):
                if p["y"] is None:  # not run: marked where a throughput of 0 would be (_crosses)
                    failed = True
                # beside the point where several share an x
                elif s.fixed.get("training.tiles") == "tuned" and labelled:
                    text = f"G={p['row'].get('tiles')}, B={p['row'].get('batch_per_tile')}"
                    if tuned_at[p["x_index"]] > 1:
                        side.append((p["x_index"], p["y"] / scale, text, colour,
                                     p["x_index"] + shift.get((si, pi), 0.0)))
                    else:
                        pending.setdefault((0, col), []).append((p["x_index"], p["y"] / scale, text, colour))
        _crosses(top, panel, plan)
        if plan.y_log:
            plain_log_axis(top, "y")
            top.set_ylim(min(ys, default=1.0) / 1.6 / scale, 1.6 * top_y / scale)
        else:
            top.set_ylim(0, 1.18 * top_y / scale)
        beside |= _side_labels(top, side, 0.04 * 1.18 * top_y / scale)
        side = []
        top.grid(alpha=0.3)
        if panel.facet:
            top.set_title(", ".join(f"{k.split('.')[-1]} {v}" for k, v in panel.facet.items()), fontsize=9)
        if speed:
            bottom = axes[1][col]
            sharing = Counter(o["x_index"] for o in panel.speedup)
            top_s = 1.3 * max([sp["value"] for p in plan.panels for sp in p.speedup], default=1.0)
            # the speedup panel is 1 / 2.2 the throughput panel's height: markers cover more of its span
            moved = dodge([(sp["x_index"], sp["value"], i) for i, sp in enumerate(panel.speedup)],
                          2.2 * top_s)
            for m in sorted({sp["marker"] for sp in panel.speedup}):
                pts = [(i, sp) for i, sp in enumerate(panel.speedup) if sp["marker"] == m]
                marker, style = MARKERS[m % len(MARKERS)]
                bottom.plot([sp["x_index"] + moved.get(i, 0.0) for i, sp in pts],
                            [sp["value"] for _, sp in pts], marker=marker, color=COLOURS[1],
                            linestyle="" if plan.categorical else style)
                for i, sp in pts if len(panel.speedup) <= MAX_LABELS else ():
                    if sharing[sp["x_index"]] > 1:
                        side.append((sp["x_index"], sp["value"], sp["label"], "black",
                                     sp["x_index"] + moved.get(i, 0.0)))
                    else:
                        pending.setdefault((1, col), []).append((sp["x_index"], sp["value"], sp["label"],
                                                                 "black"))
            bottom.axhline(1.0, color="grey", lw=0.8)
            bottom.set_ylim(0, top_s)
            _side_labels(bottom, side, 0.09 * top_s)
            bottom.grid(alpha=0.3, axis="y")
    for col in range(0, n, MAX_FACET_COLUMNS):  # the first panel of each row of panels
        axes[0][col].set_ylabel(plan.y_label)
        if speed:
            axes[1][col].set_ylabel("speedup\n(tuned / G=1)")
    step = -(-len(plan.x_values) // MAX_TICKS)  # every value up to MAX_TICKS, else every step-th
    shown = plan.x_labels[::step]
    slanted = (sum(len(v) + 2 for v in shown) > 60
               or max((len(v) for v in shown), default=0) > 12)  # else they collide
    for ax in axes[-1]:
        ax.set_xticks(range(0, len(plan.x_values), step), shown, rotation=30 if slanted else 0,
                      ha="right" if slanted else "center")
        ax.tick_params(labelbottom=True)
        ax.set_xlabel(plan.x_label)
        ax.set_xlim(-0.5, len(plan.x_values) - (0.1 if beside else 0.5))
    handles, labels = [], []
    colour_key = next((k for k, r in plan.roles.items() if r == "colour"), None)
    marker_key = next((k for k, r in plan.roles.items() if r == "marker"), None)
    for i, v in enumerate(plan.colour_values if colour_key else []):
        handles.append(Line2D([], [], color=_colour(plan, i), lw=2.5))
        labels.append(describe(colour_key, v, leaf=True))
    for i, v in _by_value(plan.marker_values if marker_key else []):  # top_k 1, 2, 4, 8: not by count
        marker, style = MARKERS[i % len(MARKERS)]
        handles.append(Line2D([], [], color="#333333", marker=marker, linestyle=style))
        labels.append(describe(marker_key, v, leaf=True))
    if failed:
        handles.append(Line2D([], [], color="#333333", marker="x", linestyle="", ms=8, mew=2))
        labels.append("infeasible or failed")
    fig.suptitle(plan.title, fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 1) if pending else None)
    dropped = [f"{t} at {plan.x_labels[int(x)]}" for (row, col), labels in pending.items()
               for x, _, t, _ in place_labels(axes[row][col], labels, fontsize=6.5, offsets=ABOVE_FIRST)]
    if dropped:
        fig.text(0.01, 0.005, f"not labelled (they would overprint): {some(dropped, 8)}", fontsize=7)
    if handles:  # beside the panels, never over a point
        fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.0, 0.92), fontsize=8, frameon=False)
    return fig


MAX_FACET_COLUMNS = 2  # panels side by side; more facets wrap onto further rows (the width stays ~1,600 px)
CROSS_SPREAD = 0.5  # of the distance between two x values: several infeasible points at one x spread over it


def _panel_axes(n: int, speed: bool) -> list[list[Any]]:
    """``[tops, bottoms]`` (bottoms only with a speedup panel): one throughput axis per facet, at most
    ``MAX_FACET_COLUMNS`` side by side and further facets on further rows, each with its speedup below;
    every axis shares the x axis and the throughputs (and speedups) share their y axis."""
    columns = min(n, MAX_FACET_COLUMNS)
    rows = -(-n // columns)
    per = 2 if speed else 1
    fig = plt.figure(figsize=(1.6 + 4.6 * columns, (6.4 if speed else 4.4) * rows))
    grid = fig.add_gridspec(per * rows, columns, height_ratios=(2.2, 1) * rows if speed else None)
    tops: list[Any] = []
    bottoms: list[Any] = []
    for i in range(n):
        r, c = divmod(i, columns)
        top = fig.add_subplot(grid[per * r, c], sharex=tops[0] if tops else None,
                              sharey=tops[0] if tops else None)
        tops.append(top)
        if speed:
            bottoms.append(fig.add_subplot(grid[per * r + 1, c], sharex=top,
                                           sharey=bottoms[0] if bottoms else None))
            top.tick_params(labelbottom=False)
    return [tops, bottoms] if speed else [tops]


def _crosses(ax: Any, panel: Any, plan: FigurePlan) -> None:
    """Each infeasible or failed point a cross at the bottom of the axis in its series' colour; several at
    one x spread side by side (never one on top of another), so that each is seen and can be counted."""
    at: dict[int, list[str]] = {}
    for s in panel.series:
        for p in s.points:
            if p["y"] is None:
                at.setdefault(p["x_index"], []).append(_colour(plan, s.colour))
    for x, colours in at.items():
        k = len(colours)
        for j, colour in enumerate(colours):
            dx = 0.0 if k == 1 else CROSS_SPREAD * (j / (k - 1) - 0.5)
            cross(ax, x + dx, colour, ms=9 if k < 5 else 6)


def _side_labels(ax: Any, labels: list[tuple[int, float, str, str, float]], gap: float) -> bool:
    """Labels to the right of points that share an x, pushed apart to ``gap`` (data units) so none
    covers another; True if there were any."""
    for x in sorted({t[0] for t in labels}):
        last = -float("inf")
        # (x, y, text, colour, the point's own x, dodged): the text right of the dodged points
        right = x + 0.1 + max(t[4] - x for t in labels if t[0] == x)
        for _, y, text, colour, at in sorted((t for t in labels if t[0] == x), key=lambda t: t[1]):
            last = max(y, last + gap)
            ax.annotate(text, (at, y), xytext=(right, last), fontsize=6.5, color=colour, va="center",
                        arrowprops={"arrowstyle": "-", "color": colour, "lw": 0.4, "alpha": 0.6})
    return bool(labels)


def _ordinal(n: int) -> str:
    return ("row" if n == 1
            else f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}")


def _bars_at_once(ax: Any, left: list[float], widths: list[float], colour: str, label: str) -> None:
    """Horizontal bars, one per row, as one collection (a rectangle artist each costs ~10 ms a row to draw
    in three formats): for sweeps of more than ``MAX_BARS`` rows."""
    verts = [[(x, i - 0.35), (x + w, i - 0.35), (x + w, i + 0.35), (x, i + 0.35)]
             for i, (x, w) in enumerate(zip(left, widths, strict=True)) if w > 0]
    ax.add_collection(PolyCollection(verts, facecolors=colour, edgecolors="none", label=label))
    ax.set_ylim(-0.5, len(left) - 0.5)  # inverted by the caller, as barh's are
    ax.set_xlim(0, max((x + w for x, w in zip(left, widths, strict=True)), default=1.0) * 1.02 or 1.0)


def _by_value(values: list[str]) -> list[tuple[int, str]]:
    """(index, value) in the values' own order: numbers ascending, then the rest as they came."""
    return sorted(enumerate(values), key=lambda iv: (number(iv[1]) is None, number(iv[1]) or 0.0, iv[0]))


def dodge(points: list[tuple[int, float, Any]], span: float) -> dict[Any, float]:
    """x offsets for points (x index, y, key) that would be drawn on one spot (the same x, y within
    ``NEAR`` of the axis's ``span``): side by side over ``DODGE`` of an x step, in key order, so each is
    seen (bta-paper's four G=1 points at 128 experts, one throughput whatever top_k). Keyed by key."""
    out: dict[Any, float] = {}
    by_x: dict[int, list[tuple[float, Any]]] = {}
    for x, y, key in points:
        by_x.setdefault(x, []).append((y, key))
    for near in by_x.values():
        near.sort(key=lambda p: p[0])
        groups: list[list[tuple[float, Any]]] = []
        for p in near:
            if groups and p[0] - groups[-1][-1][0] <= NEAR * span:
                groups[-1].append(p)
            else:
                groups.append([p])
        for group in groups:
            for j, (_, key) in enumerate(sorted(group, key=lambda p: p[1]) if len(group) > 1 else ()):
                out[key] = DODGE * (j / (len(group) - 1) - 0.5)
    return out


DODGE = 0.36  # of the distance between two x values: points on one spot spread over it
NEAR = 0.025  # of the y axis: markers closer than this cover each other


def phases_figure(plan: PhasesPlan) -> Any:
    """Per-token step time by phase, one horizontal bar per run, labelled with its settings."""
    bars = plan.bars
    many = len(bars) > MAX_BARS  # then one collection per phase, a figure of bounded height, some labels
    fig, ax = plt.subplots(figsize=(8.8, 1.4 + 0.34 * min(len(bars), MAX_BARS)))
    left = [0.0] * len(bars)
    for phase in plan.phases:
        widths = [b["us_per_token"].get(phase, 0.0) for b in bars]
        label = phase.replace("_", " ") if phase != "other" else "other: " + ", ".join(
            p.replace("_", " ") for p in plan.other)
        colour = PHASE_COLOURS.get(phase, "#aab7b8")
        if many:
            _bars_at_once(ax, left, widths, colour, label)
        else:
            ax.barh(range(len(bars)), widths, left=left, color=colour, label=label, height=0.7,
                    edgecolor="white", linewidth=0.4)
        left = [a + w for a, w in zip(left, widths, strict=True)]
    for i, b in enumerate(bars):
        if not b["us_per_token"] and not many:
            ax.text(0, i, f"  {b['status']}", va="center", fontsize=7, color=COLOURS[0])
    step = -(-len(bars) // MAX_BARS)
    ax.set_yticks(range(0, len(bars), step), [b["label"] for b in bars][::step], fontsize=8)
    ax.invert_yaxis()  # the CSV's first row on top
    ax.set_xlabel("step time per token (µs)")
    title = plan.title
    if many:  # what the picture cannot show row by row, said on it
        unrun = sum(1 for b in bars if not b["us_per_token"])
        title += (f"\n{len(bars)} runs, every {_ordinal(step)} labelled"
                  + (f", {unrun} not run (blank rows)" if unrun else "")
                  + "; each run's bar and label in figures.json")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig
