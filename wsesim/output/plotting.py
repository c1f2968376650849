"""Pictures of sweep results — the only module that imports matplotlib (Agg backend, files only).

``plot_results(csv, out)`` draws, from a sweep's results.csv:

* ``throughput_vs_experts`` — throughput against the number of experts at fixed top_k (paper Fig. 2),
  one line for G=1 and one for tuned G, and the tuned/G=1 speedup in a second panel;
* ``throughput_vs_top_k`` — the same against top_k at the largest expert count (paper Fig. 3);
* ``phases`` — where each run's time goes per token, by phase, as stacked bars.

Each as PNG and SVG. A figure whose data is not in the CSV is skipped.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..analysis.results import STEP_PHASES  # noqa: E402
from ..experiments.sweep import read_results  # noqa: E402
from .files import atomic_write_bytes  # noqa: E402

_COLOURS = {"G=1": "#c0392b", "tuned": "#2471a3"}
_PHASE_COLOURS = ["#2471a3", "#7fb3d5", "#f5b041", "#a9cce3", "#27ae60", "#76d7c4", "#f8c471", "#8e44ad", "#c0392b",
                  "#e6b0aa", "#aab7b8"]


def _runs(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if r.get("status") != "ok":
            continue
        out.append({"experts": int(r["experts"]), "top_k": int(r["top_k"]), "tuned": r.get("tuned") == "True",
                    "tiles": int(r["tiles"]), "B": int(r["batch_per_tile"]),
                    "throughput": float(r["throughput_tokens_per_s"]), "step_s": float(r["step_time_s"]),
                    "cycles": float(r["step_cycles"]), "model": r["model"], "hardware": r["hardware"],
                    "tokens": int(r["tokens_per_step"]),
                    "seq_len": int(r["seq_len"]),
                    "phases": {p: float(r.get(f"phase_{p}_cycles") or 0) for p in STEP_PHASES}})
    return out


def _save(fig: Any, out: Path, stem: str, formats: tuple[str, ...] = ("png", "svg")) -> list[Path]:
    import io

    paths = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=150, bbox_inches="tight")
        path = out / f"{stem}.{fmt}"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths


def _sparsity_figure(runs: list[dict[str, Any]], axis: str, fixed: str, fixed_value: int, title: str,
                     xlabel: str) -> Any | None:
    """Throughput (top) and tuned/G=1 speedup (bottom) against ``axis``, at ``fixed`` = ``fixed_value``;
    the x values are evenly spaced categories (experts and top_k grow in powers of two). None when no
    run is at G=1 or tuned."""
    series: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in runs:
        if r[fixed] == fixed_value and (r["tuned"] or r["tiles"] == 1):
            series["tuned" if r["tuned"] else "G=1"][r[axis]] = r
    if not series:
        return None
    xs = sorted({x for s in series.values() for x in s})
    pos = {x: i for i, x in enumerate(xs)}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 6.4), sharex=True, height_ratios=(2.2, 1))
    for kind, label in (("G=1", "G = 1 (no BTA)"), ("tuned", "BTA, G tuned")):
        points = sorted(series.get(kind, {}).items())
        top.plot([pos[x] for x, _ in points], [r["throughput"] / 1e3 for _, r in points], "o-",
                 color=_COLOURS[kind], label=label)
        if kind == "tuned":
            for x, r in points:
                top.annotate(f"G={r['tiles']}, B={r['B']}", (pos[x], r["throughput"] / 1e3), textcoords="offset points",
                             xytext=(0, 7), ha="center", fontsize=7, color=_COLOURS[kind])
    top.set_ylabel("throughput (thousand tokens/s)")
    top.set_ylim(0, 1.15 * max(r["throughput"] for s in series.values() for r in s.values()) / 1e3)
    top.set_title(title)
    top.grid(alpha=0.3)
    top.legend(loc="lower left")
    both = [x for x in xs if x in series.get("G=1", {}) and x in series.get("tuned", {})]
    speedup = [series["tuned"][x]["throughput"] / series["G=1"][x]["throughput"] for x in both]
    bottom.bar([pos[x] for x in both], speedup, color=_COLOURS["tuned"], alpha=0.8, width=0.5)
    for x, value in zip(both, speedup, strict=True):
        bottom.text(pos[x], value, f"{value:.2f}x", ha="center", va="bottom", fontsize=8)
    bottom.axhline(1.0, color="grey", lw=0.8)
    bottom.set_ylim(0, 1.3 * max(speedup, default=1.0))
    bottom.set_ylabel("speedup\n(tuned / G=1)")
    bottom.set_xticks(range(len(xs)), [str(x) for x in xs])
    bottom.set_xlabel(xlabel)
    bottom.grid(alpha=0.3, axis="y")
    return fig


def _phases_figure(runs: list[dict[str, Any]]) -> Any:
    """Where the step goes, per token: each run's step time over its tokens, split by phase (lower is
    better; tuned runs carry more tokens per step, so per-token time is what compares)."""
    runs = sorted(runs, key=lambda r: (-r["top_k"], r["experts"], r["tuned"]))
    names = [f"E{r['experts']} k{r['top_k']} G={r['tiles']}{'*' if r['tuned'] else ''}" for r in runs]
    fig, ax = plt.subplots(figsize=(max(6.4, 0.6 * len(runs)), 4.4))
    bottom = [0.0] * len(runs)
    for phase, colour in zip(STEP_PHASES, _PHASE_COLOURS, strict=True):
        values = [1e6 * r["step_s"] * r["phases"][phase] / r["cycles"] / r["tokens"] for r in runs]
        if not any(values):
            continue
        ax.bar(range(len(runs)), values, bottom=bottom, color=colour, label=phase.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xticks(range(len(runs)), names, fontsize=7, rotation=45, ha="right")
    ax.set_ylabel("step time per token (µs)")
    ax.set_title("Where the time goes, per token (* = tuned G)")
    ax.legend(fontsize=7, ncol=3, loc="upper left")
    ax.grid(alpha=0.3, axis="y")
    return fig


_COLUMNS = ("status", "experts", "top_k", "tiles", "batch_per_tile", "throughput_tokens_per_s", "step_time_s",
            "step_cycles", "model", "hardware", "tokens_per_step", "seq_len")  # what _runs reads


def _read_runs(csv_path: str | Path) -> list[dict[str, Any]]:
    """The finished runs of a sweep's results.csv; any other file (binary, empty, another program's CSV,
    a damaged row) is a ``ConfigError`` naming it, before anything is drawn or made."""
    import csv
    import io

    from ..config.errors import ConfigError, shown

    expected, source = "expected a results.csv written by wsesim sweep", str(csv_path)
    data = Path(csv_path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{expected}, got bytes that are not UTF-8 text (at byte {e.start})", source=source) from None
    if "\x00" in text:
        raise ConfigError(f"{expected}, got binary data (a NUL byte at byte {data.index(0)})", source=source)
    if not text.strip():
        raise ConfigError(f"{expected}, got an empty file", source=source)
    header = next(csv.reader(io.StringIO(text, newline="")), [])
    missing = [c for c in _COLUMNS if c not in header]
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise ConfigError(f"{expected}, got a CSV without the columns {shown(', '.join(missing[:3]))}{more}",
                          source=source)
    try:
        return _runs(read_results(csv_path))
    except (ValueError, TypeError, KeyError) as e:
        raise ConfigError(f"{expected}, got a row it cannot read ({shown(e, 120)})", source=source) from None


def plot_results(csv_path: str | Path, out: str | Path) -> list[Path]:
    """Write the figures for a results CSV into ``out``; returns the paths written. Raises
    ``ConfigError`` for a file that is not a sweep's results.csv."""
    runs = _read_runs(csv_path)
    if not runs:
        return []
    from .files import prepare_dir

    out = prepare_dir(out)  # only now: a file that is not a results.csv leaves no empty folder
    meta = f"{runs[0]['model']} on {runs[0]['hardware']}, seq_len {runs[0]['seq_len']}"
    written: list[Path] = []
    by_k = defaultdict(set)
    for r in runs:
        by_k[r["top_k"]].add(r["experts"])
    k_fixed = max(by_k, key=lambda k: (len(by_k[k]), k))
    if len(by_k[k_fixed]) > 1:
        fig = _sparsity_figure(runs, "experts", "top_k", k_fixed, f"Throughput vs experts, top_k = {k_fixed}\n{meta}",
                               "number of experts")
        written += _save(fig, out, "throughput_vs_experts") if fig is not None else []
    e_fixed = max(r["experts"] for r in runs)
    if len({r["top_k"] for r in runs if r["experts"] == e_fixed}) > 1:
        fig = _sparsity_figure(runs, "top_k", "experts", e_fixed, f"Throughput vs top_k, {e_fixed} experts\n{meta}",
                               "top_k (experts per token)")
        written += _save(fig, out, "throughput_vs_top_k") if fig is not None else []
    written += _save(_phases_figure(runs), out, "phases")
    return written


# ------------------------------------------------------------------------------------------ wafer pictures


def _heatmap(maps: Any, data: Any, title: str, unit: str, cmap: str, vmax: float | None = None) -> Any:
    import numpy as np

    arr = np.asarray(data, dtype=float)
    fig, ax = plt.subplots(figsize=(7.2, 7.2 * arr.shape[0] / arr.shape[1] + 0.8))
    k = maps.block
    im = ax.imshow(arr, origin="upper", cmap=cmap, vmin=0, vmax=vmax, interpolation="nearest",
                   extent=(0, arr.shape[1] * k, arr.shape[0] * k, 0))
    ax.set_xlabel("PE column")
    ax.set_ylabel("PE row")
    ax.set_title(f"{title}\n{maps.title}", fontsize=9)
    bar = fig.colorbar(im, ax=ax, shrink=0.8)
    bar.set_label(unit)
    return fig


def _placement_figure(maps: Any) -> Any:
    import numpy as np

    region = np.asarray(maps.region, dtype=float)
    region[region < 0] = np.nan
    fig, ax = plt.subplots(figsize=(7.2, 7.2 * region.shape[0] / region.shape[1] + 0.8))
    k = maps.block
    im = ax.imshow(region, origin="upper", cmap="tab20", interpolation="nearest",
                   extent=(0, region.shape[1] * k, region.shape[0] * k, 0))
    n = len(maps.region_experts)
    if n <= 64:  # label each region with its experts
        for r, experts in enumerate(maps.region_experts):
            ys, xs = np.nonzero(np.asarray(maps.region) == r)
            if len(xs):
                label = ",".join(map(str, experts[:3])) + ("…" if len(experts) > 3 else "")
                ax.text((xs.mean() + 0.5) * k, (ys.mean() + 0.5) * k, label, ha="center", va="center", fontsize=6)
    ax.set_xlabel("PE column")
    ax.set_ylabel("PE row")
    ax.set_title(f"Expert placement: {n} regions (numbers: experts)\n{maps.title}", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8).set_label("region index")
    return fig


def _gantt_figure(maps: Any) -> Any:
    """One layer's spans in two panels, each on its own time range: the forward pass, and the backward
    pass with its recompute (they are the whole step apart)."""
    lanes = sorted({lane for lane, *_ in maps.gantt}, key=lambda x: (x != "step", x))
    colours = {"attention": "#2471a3", "router": "#7fb3d5", "dispatch": "#f5b041", "experts": "#27ae60",
               "combine": "#f8c471", "expand": "#a9cce3", "weighted_sum": "#76d7c4", "weight_stall": "#c0392b",
               "gradient_stall": "#e6b0aa",
               "gate_up": "#1e8449", "down": "#82e0aa"}
    us = 1e6 / maps.clock_hz
    groups = {"forward": [g for g in maps.gantt if g[1].startswith("fwd")],
              "recompute and backward": [g for g in maps.gantt if not g[1].startswith("fwd")]}
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.45 * len(lanes) + 1.8), sharey=True)
    handles: dict[str, Any] = {}
    for ax, (title, spans) in zip(axes, groups.items(), strict=True):
        for lane, name, start, end in spans:
            key = name.split()[-1]
            bar = ax.broken_barh([(start * us, (end - start) * us)], (lanes.index(lane) - 0.4, 0.8),
                                 color=colours.get(key, "#aab7b8"))
            handles.setdefault(key, bar)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("simulated time (µs)")
        ax.grid(alpha=0.3, axis="x")
    axes[0].set_yticks(range(len(lanes)), lanes, fontsize=8)
    axes[0].invert_yaxis()
    fig.suptitle(f"Layer {maps.gantt_layer}, its phases and the first expert regions\n{maps.title}", fontsize=9)
    fig.legend(list(handles.values()), list(handles), fontsize=7, ncol=len(handles), loc="lower center",
               bbox_to_anchor=(0.5, -0.02))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def plot_wafer(maps: Any, out: str | Path) -> list[Path]:
    """Wafer pictures of a run (``wsesim.wafer.WaferMaps``): PE busy fraction, SRAM high-water, link load,
    expert placement, and one layer's Gantt chart. PNG files in ``out``; returns their paths."""
    out = Path(out)
    figures = {
        "wafer_busy": _heatmap(maps, maps.busy, "PE busy fraction", "fraction of the step computing", "viridis", 1.0),
        "wafer_sram": _heatmap(maps, [[v / 1024 for v in row] for row in maps.sram],
                               f"SRAM high-water per PE (capacity {maps.sram_capacity / 1024:.0f} KiB)", "KiB",
                               "magma", maps.sram_capacity / 1024),
        "wafer_links": _heatmap(maps, [[v / 1e6 for v in row] for row in maps.link],
                                "Busiest outgoing link per node, dispatch + combine over the step", "MB", "inferno"),
        "wafer_placement": _placement_figure(maps),
        "gantt": _gantt_figure(maps),
    }
    return [path for stem, fig in figures.items() for path in _save(fig, out, stem, ("png",))]


def plot_link_load(mesh: Any, result: Any, path: str, title: str) -> None:
    """Save a heat map of each node's busiest outgoing mesh link (bytes) to ``path`` (PNG), for
    ``wsesim fabric --png``."""
    import io

    import numpy as np

    from ..config.errors import ConfigError

    loads = result.link_load.reshape(mesh.rows, mesh.cols, 6)[:, :, :4].max(axis=2)
    fig, ax = plt.subplots(figsize=(6, 6 * mesh.rows / max(mesh.cols, 1) + 0.8))
    image = ax.imshow(loads, cmap="magma", interpolation="nearest", vmin=0, vmax=max(float(np.max(loads)), 1.0))
    fig.colorbar(image, ax=ax, label="bytes on the busiest outgoing link")
    ax.set_title(title)
    ax.set_xlabel(f"node column ({mesh.granularity})")
    ax.set_ylabel("node row")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    try:
        atomic_write_bytes(path, buf.getvalue())
    except OSError as e:
        raise ConfigError(f"cannot write the image ({e.strerror or e.__class__.__name__})", source=str(path)) from None
