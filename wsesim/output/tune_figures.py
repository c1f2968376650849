"""``wsesim tune --out DIR``'s figures, and ``wsesim plot``'s of a tune folder, drawn from the plans
``analysis.tune_plans`` makes of ``candidates.csv``: every candidate's throughput and peak SRAM per PE
against the tiles G (``candidates``), and with ``--search-systems`` each count of systems' best as cluster
throughput against per-system efficiency, its Pareto front joined (``systems_front``). Saved (PNG, SVG and
PDF) with ``figures.json`` by ``plotting.plot_candidates``; matplotlib through ``output.mpl``."""

from __future__ import annotations

from typing import Any

from .labels import place_labels
from .mpl import cross, plain_log_axis, plt
from .palette import MARKERS
from .palette import colour as series_colour

KIB = 1024
THROUGHPUT = "cluster_throughput_tokens_per_s"  # one system's when there is one


def tune_figure(plan: Any) -> Any:
    """The figure of a plan (``CandidatesPlan`` or ``SystemsFrontPlan``)."""
    return candidates_figure(plan) if plan.stem == "candidates" else systems_figure(plan)


def candidates_figure(plan: Any) -> Any:
    """Throughput (top) and peak SRAM per PE against its capacity (bottom) of every candidate against G,
    one colour per number of systems, each point labelled with its B; one that does not fit a cross at
    the bottom of the throughput axis, the best ringed."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.2, 6.6), sharex=True, height_ratios=(2, 1.3))
    scale = plan.scale
    labels: list[tuple[float, float, str, str]] = []
    for s in plan.series:
        colour, i = series_colour(s.colour), s.marker
        symbol = MARKERS[i % len(MARKERS)][0]  # one marker per count of systems: both panels, the legend
        ran = [p for p in s.points if p["feasible"]]
        top.plot([p["tiles"] for p in ran], [p[THROUGHPUT] / scale for p in ran], symbol, color=colour,
                 label=s.label, ms=5, ls="")
        labels += [(p["tiles"], p[THROUGHPUT] / scale, f"B={p['batch_per_tile']}", colour)
                   for p in sorted(ran, key=lambda p: -p[THROUGHPUT])]
        for p in (p for p in s.points if not p["feasible"]):
            cross(top, p["tiles"], colour, ms=8, zorder=2)  # (under the frame, as a line is)
        for p in (p for p in s.points if p["ring"]):
            top.plot(p["tiles"], p[THROUGHPUT] / scale, "o", ms=12, mfc="none",
                     color="black" if p["ring"] == "best" else colour, mew=1.2)
        # hollow, of shrinking size: counts of systems at the same peak stay visible inside one another
        bottom.plot([p["tiles"] for p in s.points], [p["peak_sram_bytes_per_pe"] / KIB for p in s.points],
                    symbol, color=colour, ms=max(9 - 2 * i, 3), mfc="none", ls="")
    if plan.sram_capacity_bytes_per_pe:
        bottom.axhline(plan.sram_capacity_bytes_per_pe / KIB, color="grey", lw=0.8, ls="--",
                       label="SRAM capacity per PE")
        bottom.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    top.set_ylabel(plan.y_label)
    top.set_ylim(0, plan.throughput_top)
    bottom.set_ylabel("peak SRAM per PE (KiB)")
    bottom.set_ylim(0, plan.sram_top_kib)
    if plan.log_x:
        top.set_xscale("log", base=2)
        plain_log_axis(bottom, "x", base=2)  # (the x axis they share)
    gs = [p["tiles"] for s in plan.series for p in s.points]
    if gs:  # room for a label right or left of the first and last G
        low, high = min(gs), max(gs)
        top.set_xlim(low / 1.3, high * 1.3) if plan.log_x else top.set_xlim(low - 0.08 * (high - low or 1),
                                                                         high + 0.08 * (high - low or 1))
    bottom.set_xlabel("tiles G")
    top.set_title(plan.title, fontsize=9)
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    dropped = place_labels(top, labels, fontsize=6)
    if dropped:
        fig.text(0.01, 0.005, f"{len(dropped)} of {len(labels)} B labels left out where they would overprint "
                 "(every candidate's B: candidates.csv)", fontsize=7)
    return fig


def systems_figure(plan: Any) -> Any:
    """Each count's best: cluster throughput (x, log) against per-system efficiency (y, %), labelled with
    N; the Pareto front joined, the best ringed, counts off the front grey."""
    scale, points = plan.scale, plan.points
    fig, ax = plt.subplots(figsize=(6.8, 4.6))
    on = [p for p in points if p["pareto"]]
    ax.plot([p[THROUGHPUT] / scale for p in on], [100 * p["efficiency_per_system"] for p in on], "o-",
            color=series_colour(1), label="Pareto front")
    off = [p for p in points if not p["pareto"]]
    if off:
        ax.plot([p[THROUGHPUT] / scale for p in off],
                [100 * p["efficiency_per_system"] for p in off], "o", color="#999999", label="off the front")
    for p in (p for p in points if p["best"]):
        ax.plot(p[THROUGHPUT] / scale, 100 * p["efficiency_per_system"], "o", ms=13,
                mfc="none", color="black", mew=1.2, label="best (highest throughput)")
    plain_log_axis(ax, "x")
    ax.set_xlabel(plan.x_label)
    ax.set_ylabel("efficiency per system (%)")
    ax.set_ylim(0, 105)
    ax.set_title(plan.title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    dropped = place_labels(ax, [(p[THROUGHPUT] / scale, 100 * p["efficiency_per_system"], f"N={p['systems']}",
                                 "black") for p in points])
    if dropped:
        fig.text(0.01, 0.005, f"not labelled (they would overprint): {', '.join(dropped)}", fontsize=7)
    return fig
