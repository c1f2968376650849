"""``wsesim tune --out DIR``'s figures: every candidate's throughput and peak SRAM per PE against the tiles
G (``candidates``), and with ``--search-systems`` each count of systems' best as cluster throughput against
per-system efficiency, its Pareto front joined (``systems_front``). Each as PNG, SVG and PDF, saved by
``plotting.save_figure``; matplotlib through ``output.mpl``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .mpl import plain_log_axis, plt
from .palette import MARKERS
from .palette import colour as series_colour

KIB = 1024


def tune_figures(out: Path, marked: list[tuple[Any, dict[str, Any]]], search: Any = None) -> list[Path]:
    """Draw the candidates (``marked``: (RunResult, its marks) as ``candidates.csv`` has them) and, given a
    ``SystemsSearch``, its front, into ``out``; the paths written."""
    from .plotting import save_figure

    paths = save_figure(candidates_figure(marked), out, "candidates")
    if search is not None and search.bests():
        paths += save_figure(systems_figure(search), out, "systems_front")
    return paths


def candidates_figure(marked: list[tuple[Any, dict[str, Any]]]) -> Any:
    """Throughput (top) and peak SRAM per PE against its capacity (bottom) of every candidate against G,
    one colour per number of systems, each point labelled with its B; one that does not fit a cross at
    the bottom of the throughput axis, the best ringed."""
    runs = [r for r, _ in marked]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.2, 6.6), sharex=True, height_ratios=(2, 1.3))
    counts = sorted({r.systems for r in runs})
    clustered = counts != [1]
    scale = 1e6 if max((r.cluster_throughput_tokens_per_s for r in runs), default=0) >= 1e6 else 1e3
    for i, n in enumerate(counts):
        colour = series_colour(i + 1)
        mine = sorted((m for m in marked if m[0].systems == n),
                      key=lambda m: (m[0].tiles, m[0].batch_per_tile))
        ran = [r for r, _ in mine if r.feasible]
        label = f"{n} system{'s' if n > 1 else ''}" if clustered else "candidates"
        top.plot([r.tiles for r in ran], [r.cluster_throughput_tokens_per_s / scale for r in ran], "o",
                 color=colour, label=label, ms=5)
        at: dict[int, int] = {}
        for r in sorted(ran, key=lambda r: r.cluster_throughput_tokens_per_s):
            k = at[r.tiles] = at.get(r.tiles, -1) + 1  # several B at one G: labels right, left, right…
            top.annotate(f"B={r.batch_per_tile}", (r.tiles, r.cluster_throughput_tokens_per_s / scale),
                         textcoords="offset points", xytext=(5, -2) if k % 2 == 0 else (-5, -2),
                         ha="left" if k % 2 == 0 else "right", fontsize=6, color=colour)
        for r in (r for r, _ in mine if not r.feasible):
            top.plot(r.tiles, 0, "x", color=colour, ms=8, mew=2, clip_on=False,
                     transform=top.get_xaxis_transform())
        for r, marks in mine:
            if marks.get("best") or marks.get("best_of_systems"):
                top.plot(r.tiles, r.cluster_throughput_tokens_per_s / scale, "o", ms=12, mfc="none",
                         color="black" if marks.get("best") else colour, mew=1.2)
        # hollow, of shrinking size: counts of systems at the same peak stay visible inside one another
        bottom.plot([r.tiles for r, _ in mine], [r.peak_sram_bytes_per_pe / KIB for r, _ in mine],
                    MARKERS[i % len(MARKERS)][0], color=colour, ms=max(9 - 2 * i, 3), mfc="none", ls="")
    capacity = max((r.sram_capacity_bytes_per_pe for r in runs), default=0)
    if capacity:
        bottom.axhline(capacity / KIB, color="grey", lw=0.8, ls="--", label="SRAM capacity per PE")
        bottom.legend(fontsize=7, loc="lower right")
    what = "cluster throughput" if clustered else "throughput"
    top.set_ylabel(f"{what}\n({'million' if scale == 1e6 else 'thousand'} tokens/s)")
    top_y = max((r.cluster_throughput_tokens_per_s for r in runs), default=1.0)
    top.set_ylim(0, 1.15 * top_y / scale or 1.0)
    bottom.set_ylabel("peak SRAM per PE (KiB)")
    bottom.set_ylim(0, 1.1 * max([r.peak_sram_bytes_per_pe for r in runs] + [capacity]) / KIB or 1.0)
    gs = sorted({r.tiles for r in runs})
    if gs and gs[-1] / max(gs[0], 1) > 16:
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
        plain_log_axis(bottom.xaxis)
    bottom.set_xlabel("tiles G")
    first = runs[0] if runs else None
    head = f"{first.model} on {first.hardware}, seq_len {first.seq_len}" if first else ""
    ringed = "the best of each count" if clustered else "the best"
    top.set_title(f"Tuning candidates: each (G, B) tried (ringed: {ringed}; x: does not fit)\n{head}",
                  fontsize=9)
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def systems_figure(search: Any) -> Any:
    """Each count's best: cluster throughput (x, log) against per-system efficiency (y, %), labelled with
    N; the Pareto front joined, the best ringed, counts off the front grey."""
    bests, front = search.bests(), search.pareto()
    best = search.best
    scale = 1e6 if max(r.cluster_throughput_tokens_per_s for r in bests) >= 1e6 else 1e3
    fig, ax = plt.subplots(figsize=(6.8, 4.6))
    on = [r for r in bests if any(r is f for f in front)]
    ax.plot([r.cluster_throughput_tokens_per_s / scale for r in on], [100 * search.efficiency(r) for r in on],
            "o-", color=series_colour(1), label="Pareto front")
    off = [r for r in bests if all(r is not f for f in front)]
    if off:
        ax.plot([r.cluster_throughput_tokens_per_s / scale for r in off],
                [100 * search.efficiency(r) for r in off], "o", color="#999999", label="off the front")
    for r in bests:
        ax.annotate(f"N={r.systems}", (r.cluster_throughput_tokens_per_s / scale, 100 * search.efficiency(r)),
                    textcoords="offset points", xytext=(5, 4), fontsize=7)
    if best is not None:
        ax.plot(best.cluster_throughput_tokens_per_s / scale, 100 * search.efficiency(best), "o", ms=13,
                mfc="none", color="black", mew=1.2, label="best (highest throughput)")
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)
    ax.set_xlabel(f"cluster throughput ({'million' if scale == 1e6 else 'thousand'} tokens/s)")
    ax.set_ylabel("efficiency per system (%)")
    ax.set_ylim(0, 105)
    r0 = bests[0]
    ax.set_title(f"Global batch {search.global_batch} on each number of systems N: its best (G, B, "
                 f"micro-batches)\n{r0.model} on {r0.hardware}, seq_len {r0.seq_len}", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig
