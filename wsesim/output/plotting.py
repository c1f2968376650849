"""Pictures of sweep results and runs, saved as files (matplotlib comes from ``output.mpl``).

Each figure is planned in ``analysis`` (pure: rows in, plans out) and drawn by a module here; what each
shows is said where it is planned:

* ``plot_results``, a sweep's results.csv: ``throughput_vs_<key>`` and ``phases`` (``analysis.figures``,
  drawn by ``sweep_figures``), ``bta_vs_accumulation`` and ``cluster_scaling`` (``analysis.scaling``,
  drawn here); a serving sweep's ``serving_vs_<key>`` (``analysis.serving_plans``) and its frontier
  (``analysis.frontier``), drawn by ``serving_figures``;
* ``plot_candidates``, tune's candidates.csv: ``candidates`` and ``systems_front`` (``analysis.tune_plans``,
  drawn by ``tune_figures``);
* ``plot_serving_run``, ``plot_wafer`` and ``plot_link_load``: one run's pictures.

Each as PNG, SVG and PDF (text kept as text: ``svg.fonttype: none``, ``pdf.fonttype: 42``), and
``figures.json`` listing every figure's plan (series with their fixed keys and points: x, y, the CSV row).
A figure whose data is not in the CSV is skipped.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis.compare import is_candidates
from ..analysis.figures import check_rows, plan_figures, plan_phases
from ..analysis.frontier import plan_throughput_latency
from ..analysis.scaling import accumulation_points, cluster_series, constant_settings
from ..analysis.serving_ops import DECODE_OPS_COLUMNS, decode_step_plan
from ..analysis.serving_plans import REQUIRED, check_serving_rows, is_serving, plan_serving
from ..analysis.tune_plans import CANDIDATES, left_out, missing_columns, parse_candidates, plan_tune
from ..config.errors import ConfigError, shown
from ..config.yaml_strict import read_bounded
from ..experiments.table import MAX_CSV_BYTES, allow_long_fields, read_results, read_results_table
from .figure_limits import MAX_FIGURES, MAX_PIXELS, FigureTooLarge, capped
from .files import atomic_write_bytes, atomic_write_text, prepare_dir
from .mpl import plain_log_axis, plt
from .palette import COLOURS, blue_first
from .serving_figures import decode_step_figure, serving_figure, throughput_latency_figure
from .sweep_figures import phases_figure, throughput_figure
from .tune_figures import tune_figure
from .wafer_figures import wafer_figures

_NO_DATES = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}  # the same figure, the same bytes


def save_figure(fig: Any, out: Path, stem: str,
                formats: tuple[str, ...] = ("png", "svg", "pdf")) -> list[Path]:
    """Save ``fig`` as ``out/stem.<format>`` (the same figure, the same bytes), close it; the paths.
    ``FigureTooLarge`` (nothing written) for a figure larger than ``MAX_PIXELS`` a side."""
    width, height = (float(x) * 150 for x in fig.get_size_inches())
    if max(width, height) > MAX_PIXELS:
        plt.close(fig)
        raise FigureTooLarge(f"{width:,.0f} × {height:,.0f} px, more than {MAX_PIXELS:,} px a side (too many "
                             "series for one figure: sweep fewer values)")
    paths = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=150, bbox_inches="tight", metadata=_NO_DATES.get(fmt))
        path = out / f"{stem}.{fmt}"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths


def _draw(fig: Any, out: Path, stem: str, left_out: dict[str, str]) -> list[Path]:
    """``save_figure``, a figure too large named in ``left_out`` instead."""
    try:
        return save_figure(fig, out, stem)
    except FigureTooLarge as e:
        left_out[stem] = str(e)
        return []


def _draw_plans(plans: list[Any], figure: Any, out: Path, listing: dict[str, Any],
                left_out: dict[str, str]) -> list[Path]:
    """Each plan drawn by ``figure`` and saved (``_draw``), listed with its files in ``listing``."""
    written: list[Path] = []
    for plan in plans:
        if files := _draw(figure(plan), out, plan.stem, left_out):
            listing["figures"].append({**asdict(plan), "files": [p.name for p in files]})
        written += files
    return written


def _listed(out: Path, listing: dict[str, Any], written: list[Path], left_out: Any = None) -> list[Path]:
    """``figures.json`` written (with ``left_out`` when anything was); ``written`` and it."""
    if left_out:
        listing["left_out"] = left_out
    atomic_write_text(out / "figures.json", json.dumps(listing, indent=1) + "\n")
    return [*written, out / "figures.json"]


_COLUMNS = ("status", "experts", "top_k", "tiles", "batch_per_tile", "throughput_tokens_per_s", "step_time_s",
            "step_cycles", "model", "hardware", "tokens_per_step", "seq_len")  # what _runs reads


_SWEEP_CSV = "expected a results.csv written by wsesim sweep"
_TUNE_CSV = "expected a candidates.csv written by wsesim tune --out"


def _read_text(csv_path: str | Path, expected: str) -> str:
    """A CSV's text; a file that is not one (binary, not UTF-8, empty) is a ``ConfigError`` naming it,
    saying what was ``expected``."""
    source = str(csv_path)
    data = read_bounded(csv_path, limit=MAX_CSV_BYTES, what=expected.removeprefix("expected "))
    allow_long_fields()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{expected}, got bytes that are not UTF-8 text (at byte {e.start})",
                          source=source) from None
    if "\x00" in text:
        raise ConfigError(f"{expected}, got binary data (a NUL byte at byte {data.index(0)})", source=source)
    if not text.strip():
        raise ConfigError(f"{expected}, got an empty file", source=source)
    return text


def _missing(missing: list[str], expected: str, source: str | Path) -> None:
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise ConfigError(f"{expected}, got a CSV without the columns {shown(', '.join(missing[:3]))}{more}",
                          source=str(source))


def _read_table(csv_path: str | Path, header: list[str]) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a sweep's results.csv (its text read and its ``header`` parsed); another
    program's CSV or a damaged row is a ``ConfigError`` naming it, before anything is drawn or made."""
    serving = is_serving(header)
    _missing([c for c in (REQUIRED if serving else _COLUMNS) if c not in header], _SWEEP_CSV, csv_path)
    try:
        header, rows = read_results_table(csv_path)
        (check_serving_rows if serving else check_rows)(rows)
        return header, rows
    except (ValueError, TypeError, KeyError) as e:
        raise ConfigError(f"{_SWEEP_CSV}, got a row it cannot read ({shown(e, 120)})",
                          source=str(csv_path)) from None


def plot_results(csv_path: str | Path, out: str | Path, settings: dict[str, Any] | None = None,
                 max_figures: int = MAX_FIGURES) -> list[Path]:
    """Write the figures for a results CSV into ``out``, and ``figures.json`` (see the module docstring);
    returns the paths written. ``settings``: the sweep-wide ``--set`` overrides (its manifest's
    ``base_overrides``), said in every title and in ``figures.json``, since no CSV column holds them.
    Tune's ``candidates.csv`` (by its name or its columns) is drawn by ``plot_candidates``. Raises
    ``ConfigError`` for a file that is not a sweep's results.csv or tune's candidates.csv, or one with no
    row (a header only); [] for a training sweep where no row ran. At most ``max_figures`` throughput (or
    serving) figures are drawn (``capped``)."""
    named = Path(csv_path).name == CANDIDATES
    text = _read_text(csv_path, _TUNE_CSV if named else _SWEEP_CSV)
    header = next(csv.reader(io.StringIO(text, newline="")), [])
    if named or is_candidates(header):
        return plot_candidates(text, csv_path, out)
    header, rows = _read_table(csv_path, header)

    if not rows:
        raise ConfigError("expected at least one row to plot, got a header only (no point finished)",
                          source=str(csv_path))
    if is_serving(header):
        return _plot_serving(csv_path, header, rows, out, max_figures)
    ran = [r for r in rows if r.get("status") == "ok"]
    if not ran:  # nothing to draw (the caller says so): not bad input, a sweep where nothing fits
        return []

    out = prepare_dir(out)  # only now: a file that is not a results.csv leaves no empty folder
    meta = constant_settings(rows)  # only what holds for every row: a swept seq_len is not in a title
    if settings:
        meta = ", ".join(filter(None, [meta, *(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in settings.items())]))
    listing: dict[str, Any] = {"source": str(csv_path), "settings": dict(settings or {}), "figures": []}
    left_out: dict[str, str] = {}
    plans = capped(plan_figures(header, rows, settings), max_figures, left_out)
    written = _draw_plans(plans, throughput_figure, out, listing, left_out)
    phases = plan_phases(header, rows, settings)
    if files := _draw(phases_figure(phases), out, "phases", left_out):
        listing["phases"] = {**asdict(phases), "files": [p.name for p in files]}
    written += files
    rows = read_results(csv_path)
    if points := accumulation_points(rows):
        written += _draw(_accumulation_figure(points), out, "bta_vs_accumulation", left_out)
    if series := cluster_series(rows):
        files = _draw(_cluster_figure(series, meta), out, "cluster_scaling", left_out)
        listing["cluster_scaling"] = {"series": [
            {"label": label, "points": [{"systems": p["systems"],
                                         "cluster_throughput_tokens_per_s": p["cluster"],
                                         "throughput_per_system_tokens_per_s": p["per_system"],
                                         "sequences_per_system": p["share"],
                                         "efficiency_vs_n_times_one": p["vs_one"],
                                         "tree_efficiency": p["tree"]} for p in points]}
            for label, points in series.items()], "files": [p.name for p in files]}
        written += files
    return _listed(out, listing, written, left_out)


def plot_candidates(text: str, source: str | Path, out: str | Path) -> list[Path]:
    """Tune's figures (``analysis.tune_plans``, drawn by ``output.tune_figures``) from the text of its
    ``candidates.csv`` (``source``: the file's path, as ``figures.json`` names it) into ``out``, and
    ``figures.json`` listing each plan; the paths written. ``tune --out`` draws from the text it writes,
    ``wsesim plot`` from the file: the same plans. Raises ``ConfigError`` (before anything is made) for text
    that is not a candidates.csv."""
    try:
        header, rows = parse_candidates(text)
        _missing(missing_columns(header), _TUNE_CSV, source)
        if not rows:
            raise ConfigError(f"{_TUNE_CSV}, got its header and no candidates", source=str(source))
        plans = plan_tune(header, rows)
    except ValueError as e:  # (a ConfigError is not one: it passes)
        raise ConfigError(f"{_TUNE_CSV}, got a row it cannot read ({shown(e, 120)})",
                          source=str(source)) from None
    out = prepare_dir(out)
    listing: dict[str, Any] = {"source": str(source), "figures": []}
    omitted = left_out(header)
    return _listed(out, listing, _draw_plans(plans, tune_figure, out, listing, omitted), omitted)


def _accumulation_figure(points: list[dict[str, Any]]) -> Any:
    """Throughput (top) and weight bytes streamed in per step (bottom) against G at one global batch."""
    p0 = points[0]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 6.4), sharex=True, height_ratios=(2.2, 1))
    x = range(len(points))
    top.plot(x, [p["throughput"] / 1e3 for p in points], "o-", color=COLOURS[1])
    for i, p in enumerate(points):
        top.annotate(f"N={p['N']}, B={p['B']}", (i, p["throughput"] / 1e3), textcoords="offset points",
                     xytext=(0, 7), ha="center", fontsize=7)
    top.set_ylim(0, 1.2 * max(p["throughput"] for p in points) / 1e3)
    top.set_ylabel("throughput (thousand tokens/s)")
    top.set_title(f"BTA and gradient accumulation at a global batch of {p0['global_batch']} sequences\n"
                  f"{p0['model']} on {p0['hardware']}, seq_len {p0['seq_len']}: G tiles of B, "
                  "N micro-batches")
    top.grid(alpha=0.3)
    bottom.bar(x, [p["io_in"] / 1e9 for p in points], color=COLOURS[0], alpha=0.8, width=0.5)
    bottom.set_ylabel("weights streamed in\nper step (GB)")
    bottom.set_xticks(list(x), [str(p["tiles"]) for p in points])
    bottom.set_xlabel("tiles G (micro-batch G·B; N = global batch / (G·B))")
    bottom.grid(alpha=0.3, axis="y")
    return fig


def _cluster_figure(series: dict[str, list[dict[str, Any]]], meta: str) -> Any:
    """Cluster throughput (top, with N × one system's dashed) and efficiency (bottom) against systems."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.4, 6.8), sharex=True, height_ratios=(2, 1.2))
    for i, (label, points) in enumerate(series.items()):
        colour = blue_first(i)  # blue, red, green, purple, then the palette's others
        n = [p["systems"] for p in points]
        top.plot(n, [p["cluster"] / 1e6 for p in points], "o-", color=colour, label=label)
        if points[0]["systems"] == 1:
            top.plot(n, [m * points[0]["cluster"] / 1e6 for m in n], "--", color=colour, lw=0.8, alpha=0.6)
        shares = {p["share"] for p in points}
        for p in points if len(shares) > 1 else ():  # (one share: it is in the legend)
            top.annotate(f"{p['share']}", (p["systems"], p["cluster"] / 1e6), textcoords="offset points",
                         xytext=(6, -10), ha="left", fontsize=6, color=colour)
        if len(shares) == 1:
            top.lines[-2 if points[0]["systems"] == 1 else -1].set_label(
                f"{label}: {shares.pop()} per system")
        bottom.plot(n, [100 * p["vs_one"] for p in points], "o-", color=colour)
        bottom.plot(n, [100 * p["tree"] for p in points], ":", color=colour, lw=1)
    top.set_xscale("log", base=2)
    plain_log_axis(top, "y")
    top.set_ylabel("cluster throughput (million tokens/s)")
    top.set_title(f"Data parallel over a broadcast-reduce tree\n{meta} (numbers: sequences per system; "
                  "dashed: N × one system)", fontsize=9)
    top.grid(alpha=0.3, which="both")
    top.legend(fontsize=7, loc="upper left")
    bottom.set_ylabel("scaling efficiency (%)\nsolid: vs N × one system\ndotted: the tree's cost", fontsize=7)
    bottom.set_xlabel("systems N")
    bottom.set_xticks([p["systems"] for p in next(iter(series.values()))],
                      [str(p["systems"]) for p in next(iter(series.values()))])
    bottom.set_ylim(0, 105)
    bottom.grid(alpha=0.3)
    return fig


# ------------------------------------------------------------------------------------------ wafer pictures


def plot_wafer(maps: Any, out: str | Path) -> list[Path]:
    """Wafer pictures of a run (``wsesim.analysis.wafer.WaferMaps``; drawn by ``output.wafer_figures``): PE
    busy fraction, SRAM high-water, link load, expert placement, and one layer's Gantt chart. PNG files in
    ``out``; returns their paths."""
    return [path for stem, fig in wafer_figures(maps).items()
            for path in save_figure(fig, Path(out), stem, ("png",))]


def plot_link_load(mesh: Any, result: Any, path: str, title: str) -> None:
    """Save a heat map of each node's busiest outgoing mesh link (bytes) to ``path`` (PNG), for
    ``wsesim fabric --png``."""
    loads = result.link_load.reshape(mesh.rows, mesh.cols, 6)[:, :, :4].max(axis=2)
    fig, ax = plt.subplots(figsize=(6, 6 * mesh.rows / max(mesh.cols, 1) + 0.8))
    image = ax.imshow(loads, cmap="magma", interpolation="nearest", vmin=0,
                      vmax=max(float(np.max(loads)), 1.0))
    fig.colorbar(image, ax=ax, label="bytes on the busiest outgoing link")
    ax.set_title(title)
    ax.set_xlabel(f"node column ({mesh.granularity})")
    ax.set_ylabel("node row")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())  # what the system refuses: one line naming the file


def plot_serving_run(folder: str | Path, out: str | Path) -> list[Path]:
    """A serving run's folder (``wsesim infer --out``): ``decode_step`` (PNG, SVG, PDF) from its
    ``ops.csv`` and ``result.json``, and ``figures.json`` listing what it drew (every stage's parts and one
    layer's ops). Raises ``ConfigError`` for a folder without them."""
    folder = Path(folder)
    ops, result = folder / "ops.csv", folder / "result.json"
    if not ops.is_file() or not result.is_file():
        raise ConfigError("expected a serving run's folder with ops.csv and result.json (from wsesim infer "
                          "--out DIR, of a mapping that fits)", source=str(folder))
    try:
        served = json.loads(read_bounded(result, limit=2**28, what="a serving result").decode("utf-8"))
        if not isinstance(served, dict):  # a JSON list or number is no result (its fields are read below)
            kind = type(served).__name__
            raise ValueError(f"expected result.json to hold a JSON object, got a JSON {kind}")
        rows = list(csv.DictReader(read_bounded(ops, limit=2**30, what="ops.csv").decode("utf-8")
                                   .splitlines()))
        if not rows or any(c not in rows[0] for c in DECODE_OPS_COLUMNS):
            raise ValueError(f"expected the columns {', '.join(DECODE_OPS_COLUMNS)}")
        plan = decode_step_plan(rows)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise ConfigError(f"expected ops.csv and result.json written by wsesim infer, got one it cannot read "
                          f"({str(e)[:120]})", source=str(folder)) from None
    out = prepare_dir(out)
    wafers = served.get("systems")
    wafers = f"{wafers} wafer{'' if wafers == 1 else 's'}"
    title = (f"{served.get('model')} on {served.get('hardware')}, {served.get('stages')} × "
             f"{served.get('grid')} on {wafers}, batch {served.get('batch')}")
    files = save_figure(decode_step_figure(plan, title), out, "decode_step")
    return _listed(out, {"source": str(ops), "figures": [{"stem": "decode_step", "title": title, **plan,
                                                          "files": [p.name for p in files]}]}, files)


def _plot_serving(csv_path: str | Path, header: list[str], rows: list[dict[str, str]],
                  out: str | Path, max_figures: int = MAX_FIGURES) -> list[Path]:
    """A serving sweep's figures and ``figures.json`` (every row drawn: one not served is a cross), even
    when no row was served."""
    out = prepare_dir(out)
    listing: dict[str, Any] = {"source": str(csv_path), "figures": []}
    left_out: dict[str, str] = {}
    written = _draw_plans(capped(plan_serving(header, rows), max_figures, left_out), serving_figure, out,
                          listing, left_out)
    load = plan_throughput_latency(header, rows)  # a sweep over a load (the rate, or the batch), or None
    written += _draw_plans([load] if load else [], throughput_latency_figure, out, listing, left_out)
    return _listed(out, listing, written, left_out)
