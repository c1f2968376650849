"""What ``wsesim tune --out``'s figures show, planned from its ``candidates.csv`` text alone (pure: rows in,
plans out; ``output.tune_figures`` draws them and ``figures.json`` lists each plan). ``tune --out`` plans
from the text it writes and ``wsesim plot`` from the file, so both draw the same figures.

* ``candidates``: every candidate's throughput (the cluster's: one system's when there is one) and peak
  SRAM per PE against the tiles G, one series per number of systems, each point labelled with its B; one
  that does not fit is a cross at the bottom of the throughput axis; the best ringed (black), and with
  ``--search-systems`` the best of each count (its colour).
* ``systems_front`` (a CSV from ``--search-systems``: its ``best_of_systems`` and ``efficiency_per_system``
  columns): each count's best that fits as cluster throughput against per-system efficiency, the Pareto
  front (``pareto``) joined, the best ringed. The efficiency is the column's, as the search computed it
  (``experiments.tune.SystemsSearch.efficiency``), never recomputed here.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any

from .figure_text import thousands

CANDIDATES = "candidates.csv"
"""The file's name in a tune folder."""
REQUIRED = ("best", "model", "hardware", "seq_len", "tiles", "batch_per_tile", "systems", "feasible",
            "cluster_throughput_tokens_per_s", "peak_sram_bytes_per_pe", "sram_capacity_bytes_per_pe")
"""The columns a ``candidates.csv`` must have to be drawn."""
FRONT = ("best_of_systems", "pareto", "efficiency_per_system", "global_batch", "micro_batches")
"""The columns of a ``--search-systems`` CSV that make its ``systems_front``."""
KIB = 1024


@dataclass
class CandidateSeries:
    systems: int
    label: str
    colour: int  # the series colour's index (``output.palette.colour``)
    marker: int  # the index of its peak-SRAM marker (``output.palette.MARKERS``), its size shrinking with it
    points: list[dict[str, Any]] = field(default_factory=list)  # tiles, batch_per_tile, feasible,
    #   cluster_throughput_tokens_per_s, peak_sram_bytes_per_pe, ring ("best", "best_of_systems" or ""), row


@dataclass
class CandidatesPlan:
    stem: str
    title: str
    y_label: str
    scale: float  # tokens/s to the throughput axis's unit (thousand or million)
    throughput_top: float  # the throughput axis's upper limit, in its unit
    sram_capacity_bytes_per_pe: int  # 0: none known (no line)
    sram_top_kib: float  # the SRAM axis's upper limit
    log_x: bool  # G spans more than a factor 16: both axes log 2
    series: list[CandidateSeries]


@dataclass
class SystemsFrontPlan:
    stem: str
    title: str
    x_label: str
    scale: float
    points: list[dict[str, Any]]  # each count's best that fits: systems, tiles, batch_per_tile,
    #   micro_batches, cluster_throughput_tokens_per_s, efficiency_per_system, pareto, best, row


def parse_candidates(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a ``candidates.csv``'s text; a row with the wrong number of cells is a
    ``ValueError`` naming it (tune writes whole files, so a short row is damage, not a run cut short)."""
    try:
        lines = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise ValueError(str(e)) from None
    header = lines[0] if lines else []
    rows = []
    for i, cells in enumerate(lines[1:], start=1):
        if len(cells) != len(header):
            raise ValueError(f"row {i} has {len(cells)} cells, the header {len(header)}")
        rows.append(dict(zip(header, cells, strict=True)))
    return header, rows


def missing_columns(header: list[str]) -> list[str]:
    """The columns of ``REQUIRED`` a header lacks."""
    return [c for c in REQUIRED if c not in header]


def _flag(row: dict[str, str], column: str, i: int) -> bool:
    text = row.get(column, "False")
    if text not in ("True", "False"):
        raise ValueError(f"row {i}: expected True or False for {column}, got {text[:40]!r}")
    return text == "True"


def _whole(row: dict[str, str], column: str, i: int) -> int:
    text = row[column]
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"row {i}: expected a whole number for {column}, got {text[:40]!r}")
    return int(text)


def _real(row: dict[str, str], column: str, i: int) -> float:
    try:
        value = float(row[column])
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"row {i}: expected a number for {column}, got {row[column][:40]!r}")
    return value


def plan_candidates(rows: list[dict[str, str]]) -> CandidatesPlan:
    """The ``candidates`` figure of a ``candidates.csv``'s rows (see the module docstring); ``ValueError``
    for a row whose values do not read (naming the row and the column)."""
    if not rows:
        raise ValueError("expected at least one candidate, got none")
    read = []
    for i, row in enumerate(rows, start=1):
        feasible = _flag(row, "feasible", i)
        ring = ("best" if _flag(row, "best", i) else
                "best_of_systems" if _flag(row, "best_of_systems", i) and feasible else "")
        read.append({"systems": _whole(row, "systems", i), "tiles": _whole(row, "tiles", i),
                     "batch_per_tile": _whole(row, "batch_per_tile", i), "feasible": feasible,
                     "cluster_throughput_tokens_per_s": _real(row, "cluster_throughput_tokens_per_s", i),
                     "peak_sram_bytes_per_pe": _whole(row, "peak_sram_bytes_per_pe", i),
                     "sram_capacity_bytes_per_pe": _whole(row, "sram_capacity_bytes_per_pe", i),
                     "ring": ring, "row": i})
    counts = sorted({p["systems"] for p in read})
    clustered = counts != [1]
    throughputs = [p["cluster_throughput_tokens_per_s"] for p in read]
    scale, unit = thousands(max(throughputs))
    series = []
    for i, n in enumerate(counts):
        mine = sorted((p for p in read if p["systems"] == n), key=lambda p: (p["tiles"], p["batch_per_tile"]))
        label = f"{n} system{'s' if n > 1 else ''}" if clustered else "candidates"
        drawn = [{k: v for k, v in p.items() if k not in ("systems", "sram_capacity_bytes_per_pe")}
                 for p in mine]
        series.append(CandidateSeries(n, label, i + 1, i, drawn))
    capacity = max(p["sram_capacity_bytes_per_pe"] for p in read)
    what = "cluster throughput" if clustered else "throughput"
    gs = sorted({p["tiles"] for p in read})
    first = rows[0]
    head = f"{first['model']} on {first['hardware']}, seq_len {first['seq_len']}"
    ringed = "the best of each count" if clustered else "the best"
    return CandidatesPlan(
        "candidates",
        f"Tuning candidates: each (G, B) tried (ringed: {ringed}; x: does not fit)\n{head}",
        f"{what}\n({unit} tokens/s)", scale,
        1.15 * max(throughputs) / scale or 1.0, capacity,
        1.1 * max([p["peak_sram_bytes_per_pe"] for p in read] + [capacity]) / KIB or 1.0,
        gs[-1] / max(gs[0], 1) > 16, series)


def plan_systems_front(header: list[str], rows: list[dict[str, str]]) -> SystemsFrontPlan | None:
    """The ``systems_front`` figure of a ``--search-systems`` CSV (None for another CSV, or when no count's
    best fits); ``ValueError`` for a best whose values do not read."""
    if any(c not in header for c in FRONT):
        return None
    bests = [(i, row) for i, row in enumerate(rows, start=1)
             if _flag(row, "best_of_systems", i) and _flag(row, "feasible", i)]
    if not bests:
        return None
    points = [{**{c: _whole(row, c, i) for c in ("systems", "tiles", "batch_per_tile", "micro_batches")},
               **{c: _real(row, c, i) for c in ("cluster_throughput_tokens_per_s", "efficiency_per_system")},
               "pareto": _flag(row, "pareto", i), "best": _flag(row, "best", i), "row": i}
              for i, row in bests]
    scale, unit = thousands(max(p["cluster_throughput_tokens_per_s"] for p in points))
    first = bests[0][1]
    title = (f"Global batch {first['global_batch']} on each number of systems N: its best (G, B, "
             f"micro-batches)\n{first['model']} on {first['hardware']}, seq_len {first['seq_len']}")
    return SystemsFrontPlan("systems_front", title, f"cluster throughput ({unit} tokens/s)", scale, points)


def left_out(header: list[str]) -> dict[str, str]:
    """The figures a ``candidates.csv`` cannot give, by stem, with the reason: a ``--search-systems`` CSV
    written before ``efficiency_per_system`` was a column has no front to draw (the efficiency is the
    search's, never recomputed here)."""
    search = [c for c in FRONT if c != "efficiency_per_system"]
    if all(c in header for c in search) and "efficiency_per_system" not in header:
        return {"systems_front": "this --search-systems CSV has no efficiency_per_system column (an older "
                                 "wsesim wrote it); run the search again to draw its front"}
    return {}


def plan_tune(header: list[str], rows: list[dict[str, str]]) -> list[CandidatesPlan | SystemsFrontPlan]:
    """Every figure of a ``candidates.csv``: ``candidates``, then ``systems_front`` where it has one."""
    front = plan_systems_front(header, rows)
    return [plan_candidates(rows), *([front] if front is not None else [])]
