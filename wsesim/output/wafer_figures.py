"""A run's wafer pictures, from its ``analysis.wafer.WaferMaps``: heat maps scaled to the data's own range
(so a variation of a few per cent shows) with the hottest expert region outlined and named, the placement
with every region numbered by its experts, and one layer's Gantt chart: the step timeline, a lane of the
layer's weights arriving, and the regions that waited longest for theirs (the waits drawn before each op),
each pass on a time axis that starts with it.

matplotlib comes through ``output.mpl`` (the one module that imports it); ``plot_wafer`` in
``output.plotting`` saves these figures.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..analysis.wafer import expert_ranges, hottest_region, region_colours
from .mpl import plt
from .palette import PHASE_COLOURS


def left_out(maps: Any) -> dict[str, str]:
    """The pictures ``wafer_figures`` does not draw for this run, by file stem, with why: a model without
    experts has no regions to place and sends no tokens over the fabric (its Gantt chart is still drawn:
    the layer's phases and its weights arriving)."""
    if any(maps.region_experts):
        return {}
    why = ("the model has no experts (a dense model): no expert regions, no dispatch or combine over the "
           "fabric")
    return {"wafer_links": why, "wafer_placement": why}


def wafer_figures(maps: Any) -> dict[str, Any]:
    """The five pictures by file stem (fewer for a dense model: see ``left_out``)."""
    capacity = maps.sram_capacity / 1024
    skipped = left_out(maps)
    figures = {
        "wafer_busy": _heatmap(maps, maps.busy, "PE busy fraction", "fraction of the step computing",
                               "viridis"),
        "wafer_sram": _heatmap(maps, [[v / 1024 for v in row] for row in maps.sram],
                               f"SRAM high-water per PE (capacity {capacity:.0f} KiB)", "KiB", "magma",
                               note=f"capacity {capacity:.0f} KiB"),
        "wafer_links": lambda m: _heatmap(m, [[v / 1e6 for v in row] for row in m.link],
                                          "Busiest outgoing link per node, dispatch + combine over the step",
                                          "MB", "inferno"),
        "wafer_placement": _placement_figure,
        "gantt": _gantt_figure(maps),
    }
    return {stem: (fig(maps) if callable(fig) else fig) for stem, fig in figures.items()
            if stem not in skipped}


def _heatmap(maps: Any, data: Any, title: str, unit: str, cmap: str, note: str = "") -> Any:
    """``data`` over the wafer, the colours spanning its own min to max; the hottest region outlined."""
    arr = np.asarray(data, dtype=float)
    low, high = float(arr.min()), float(arr.max())
    if high - low < 1e-12 * max(abs(high), 1.0):  # flat: say so, do not invent a gradient
        low, high = low - 0.5 * abs(low or 1.0), high + 0.5 * abs(high or 1.0)
        title += " (the same everywhere)"
    fig, ax = plt.subplots(figsize=(7.2, 7.2 * arr.shape[0] / arr.shape[1] + 0.8))
    k = maps.block
    im = ax.imshow(arr, origin="upper", cmap=cmap, vmin=low, vmax=high, interpolation="nearest",
                   extent=(0, arr.shape[1] * k, arr.shape[0] * k, 0))
    hot = hottest_region(maps, data) if any(maps.region_experts) else None
    if hot is not None:
        r, (row0, col0, rows, cols) = hot
        ax.add_patch(plt.Rectangle((col0 * k, row0 * k), cols * k, rows * k, fill=False, edgecolor="#00e5ff",
                                   lw=1.8))
        ax.text(0.01, 0.99,
                f"outlined: the hottest region, {r} (expert {expert_ranges(maps.region_experts[r])})",
                transform=ax.transAxes, ha="left", va="top", fontsize=7,
                bbox={"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": "#00e5ff",
                      "alpha": 0.9})
    ax.set_xlabel("PE column")
    ax.set_ylabel("PE row")
    ax.set_title(f"{title}\n{maps.title}", fontsize=9)
    bar = fig.colorbar(im, ax=ax, shrink=0.8)
    bar.set_label(f"{unit} (scale: {low:.4g} to {high:.4g}{'; ' + note if note else ''})")
    return fig


REGION_COLOURS = ("#a9cce3", "#f9e79f", "#abebc6", "#f5b7b1", "#d7bde2", "#fad7a0", "#a3e4d7", "#d5dbdb")
"""Light, apart, so a region's black number reads on each."""
LABEL_EM = 0.62  # a digit's width in the label font, in ems (DejaVu Sans: 0.636)
MIN_LABEL_PT = 3.0  # below this a region's number cannot be read: left out, and the title says how many


def _placement_figure(maps: Any) -> Any:
    region = np.asarray(maps.region, dtype=float)
    fig, ax = plt.subplots(figsize=(7.2, 7.2 * region.shape[0] / region.shape[1] + 0.8))
    k = maps.block
    n = len(maps.region_experts)
    ids = np.asarray(maps.region)
    # no two regions that touch alike (their numbers, not the colours, name them): light colours, black digits
    shade = region_colours(maps.region, n, len(REGION_COLOURS))
    rgb = np.ones((*ids.shape, 3))
    for r, c in enumerate(shade):
        rgb[ids == r] = [int(REGION_COLOURS[c][i:i + 2], 16) / 255 for i in (1, 3, 5)]
    ax.imshow(rgb, origin="upper", interpolation="nearest", extent=(0, ids.shape[1] * k, ids.shape[0] * k, 0))
    fig.canvas.draw()  # the axes' final place, after the colorbar and the aspect
    box = ax.get_position()  # points per PE: the image keeps its aspect, so the tighter of the two sides
    per_pe = min(box.width * fig.get_figwidth() / (ids.shape[1] * k),
                 box.height * fig.get_figheight() / (ids.shape[0] * k)) * 72
    unlabelled = 0
    for r, experts in enumerate(maps.region_experts):  # every region numbered by its experts
        ys, xs = np.nonzero(ids == r)
        if len(xs):
            text = expert_ranges(experts)
            # as large as the region's own width and height allow: a label never runs into the next one
            row = int(np.median(ys))
            wide, high = np.count_nonzero(ys == row) * k * per_pe, (ys.max() - ys.min() + 1) * k * per_pe
            size = min(9.0, 0.85 * wide / (LABEL_EM * len(text)), 0.8 * high)
            if size < MIN_LABEL_PT:
                unlabelled += 1
                continue
            ax.text((xs[ys == row].mean() + 0.5) * k, (row + 0.5) * k, text, ha="center", va="center",
                    fontsize=size, color="black")
    ax.set_xlabel("PE column")
    ax.set_ylabel("PE row")
    note = f"; {unlabelled} too small to number" if unlabelled else ""
    ax.set_title(f"Expert placement: {n} regions (numbers: the experts each holds{note})\n{maps.title}",
                 fontsize=9)
    return fig


def _gantt_figure(maps: Any) -> Any:
    """One layer's spans in two panels, each on its own time axis from its first span: the forward pass,
    and the recompute with the backward pass (they are the whole step apart)."""
    lanes = sorted({lane for lane, *_ in maps.gantt},
                   key=lambda x: (x != "step", x != "weights in",
                                  int(x.split()[-1]) if x.startswith("region") else 0))
    cycles = [c for _, _, start, end in maps.gantt for c in (start, end)]
    span_s = (max(cycles, default=0.0) - min(cycles, default=0.0)) / maps.clock_hz
    unit, per_s = ("ms", 1e3) if span_s >= 0.01 else ("µs", 1e6)  # never "30000 µs"
    us = per_s / maps.clock_hz  # axis units per cycle
    groups = {"forward": [g for g in maps.gantt if g[1].startswith("fwd")],
              "recompute and backward": [g for g in maps.gantt if not g[1].startswith("fwd")]}
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.42 * len(lanes) + 2.0), sharey=True)
    seen: dict[str, str] = {}
    for ax, (title, spans) in zip(axes, groups.items(), strict=True):
        origin = min((start for lane, _, start, _ in spans if lane == "step"), default=0.0)
        for lane, name, start, end in spans:
            key = name.split()[-1]
            y = lanes.index(lane)
            ax.broken_barh([((start - origin) * us, max(end - start, 0) * us)], (y - 0.38, 0.76),
                           color=PHASE_COLOURS.get(key, "#aab7b8"),
                           hatch="///" if key == "weight_wait" else None,
                           edgecolor="#c0392b" if key == "weight_wait" else "none", lw=0.4)
            seen.setdefault(key, PHASE_COLOURS.get(key, "#aab7b8"))
        ax.set_title(f"{title} (time from its first span; weights may arrive before it)", fontsize=9)
        ax.set_xlabel(f"{unit} from the start of the pass")
        ax.axvline(0, color="grey", lw=0.8)
        ax.grid(alpha=0.3, axis="x")
    labels = [f"{lane}: expert {expert_ranges(maps.region_experts[int(lane.split()[-1])])}"
              if lane.startswith("region") else lane for lane in lanes]
    axes[0].set_yticks(range(len(lanes)), labels, fontsize=8)
    axes[0].invert_yaxis()
    regions = ", and the expert regions that waited longest for theirs" if any(maps.region_experts) else ""
    fig.suptitle(f"Layer {maps.gantt_layer}: its phases and its weights arriving{regions}\n{maps.title}",
                 fontsize=9)
    names = {"weight_wait": "region waiting for weights", "layer_weights": "layer's weights arriving",
             "expert_weights": "expert weights arriving"}
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=c, hatch="///" if k == "weight_wait" else None,
                     edgecolor="#c0392b" if k == "weight_wait" else c) for k, c in seen.items()]
    fig.legend(handles, [names.get(k, k.replace("_", " ")) for k in seen], fontsize=7, ncol=min(len(seen), 8),
               loc="lower center", bbox_to_anchor=(0.5, -0.01), frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
