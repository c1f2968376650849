"""Pictures of sweep results — the only module that imports matplotlib (Agg backend, files only).

``plot_results(csv, out)`` draws, from a sweep's results.csv, as planned by ``analysis.figures`` and drawn
by ``output.sweep_figures`` (which takes matplotlib from here):

* ``throughput_vs_<key>`` — throughput against each swept key (paper Figs. 2 and 3: experts, top_k), every
  other swept key a colour, a marker, a facet or a figure of its own, infeasible points marked, and the
  tuned/G=1 speedup in a second panel where the sweep pairs them;
* ``phases`` — where each run's time goes per token, by phase, as stacked bars.

Each as PNG, SVG and PDF (text kept as text: ``svg.fonttype: none``, ``pdf.fonttype: 42``), and
``figures.json`` listing every throughput figure's series with their fixed keys and points (x, y, the
CSV row) and the phase bars. A figure whose data is not in the CSV is skipped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams.update({"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "wsesim"})
import matplotlib.pyplot as plt  # noqa: E402

from ..analysis.figures import check_rows  # noqa: E402
from ..experiments.sweep import read_results_table  # noqa: E402
from .files import atomic_write_bytes  # noqa: E402

_COLOURS = {"G=1": "#c0392b", "tuned": "#2471a3"}
_NO_DATES = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}  # the same figure, the same bytes


def _save(fig: Any, out: Path, stem: str, formats: tuple[str, ...] = ("png", "svg", "pdf")) -> list[Path]:
    import io

    paths = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=150, bbox_inches="tight", metadata=_NO_DATES.get(fmt))
        path = out / f"{stem}.{fmt}"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths


_COLUMNS = ("status", "experts", "top_k", "tiles", "batch_per_tile", "throughput_tokens_per_s", "step_time_s",
            "step_cycles", "model", "hardware", "tokens_per_step", "seq_len")  # what _runs reads


def _read_table(csv_path: str | Path) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a sweep's results.csv; any other file (binary, empty, another program's CSV,
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
        header, rows = read_results_table(csv_path)
        check_rows(rows)
        return header, rows
    except (ValueError, TypeError, KeyError) as e:
        raise ConfigError(f"{expected}, got a row it cannot read ({shown(e, 120)})", source=source) from None


def plot_results(csv_path: str | Path, out: str | Path) -> list[Path]:
    """Write the figures for a results CSV into ``out``, and ``figures.json`` (see the module docstring);
    returns the paths written. Raises ``ConfigError`` for a file that is not a sweep's results.csv."""
    import json

    from ..analysis.figures import plan_figures, plan_phases
    from .sweep_figures import phases_figure, throughput_figure

    header, rows = _read_table(csv_path)
    ran = [r for r in rows if r.get("status") == "ok"]
    if not ran:
        return []
    from .files import atomic_write_text, prepare_dir

    out = prepare_dir(out)  # only now: a file that is not a results.csv leaves no empty folder
    written: list[Path] = []
    listing: dict[str, Any] = {"source": str(csv_path), "figures": []}
    for plan in plan_figures(header, rows):
        files = _save(throughput_figure(plan), out, plan.stem)
        listing["figures"].append({**plan.to_dict(), "files": [p.name for p in files]})
        written += files
    phases = plan_phases(header, rows)
    files = _save(phases_figure(phases), out, "phases")
    listing["phases"] = {**phases.to_dict(), "files": [p.name for p in files]}
    written += files
    atomic_write_text(out / "figures.json", json.dumps(listing, indent=1) + "\n")
    return [*written, out / "figures.json"]


# ------------------------------------------------------------------------------------------ wafer pictures


def plot_wafer(maps: Any, out: str | Path) -> list[Path]:
    """Wafer pictures of a run (``wsesim.wafer.WaferMaps``; drawn by ``output.wafer_figures``): PE busy
    fraction, SRAM high-water, link load, expert placement, and one layer's Gantt chart. PNG files in
    ``out``; returns their paths."""
    from .wafer_figures import wafer_figures

    return [path for stem, fig in wafer_figures(maps).items() for path in _save(fig, Path(out), stem, ("png",))]


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
