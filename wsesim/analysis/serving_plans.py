"""What a serving sweep's figures show, planned from its results CSV (pure: rows in, plans out;
``output.serving_figures`` draws them and ``figures.json`` lists each plan).

One figure per swept key that varies (its x axis; ``serving_vs_<key>``), each of five panels: tokens/s per
request, tokens/s of all requests, the time to first token (mean), and the 99th percentiles of the
inter-token latency and of each request's end to end (a CSV written before those columns existed has the
first three). Every other swept key that varies makes the series: one per combination of their values, so
no series is merged with another. The x values are the key's values in order — numbers ascending, grids by
their PEs, anything else (``shift``, ``concat``, a preset's name) in the order the sweep ran them — each
at its own position on the axis. A row that was served is a point at its figure; an infeasible or failed
one is a point with ``y`` None (drawn as a cross, labelled), never left out. A title says only what is
constant over the rows. Each served point carries the mapping it was served on (``mapping``: stages × the
grid of PEs per stage, and the wafers, "9 × 250², 1 wafer"): the title's when every row shares one, else
written beside each point, so that a change of mapping (``grid: auto`` choosing another for a larger
batch) is seen where it happens.

When the sweep varies a load (the rate, or the batch) there is one figure more, the frontier of tokens/s
per system against tokens/s per user: ``analysis.frontier``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..config.errors import WsesimError
from ..config.units import parse_quantity
from .figures import number, short, slug, swept_keys, with_base_values

METRICS = (("tokens_per_s_per_request", "tokens/s per request", 1.0),
           ("tokens_per_s", "tokens/s, all requests", 1.0),
           ("ttft_s", "time to first token (ms)", 1e3),
           ("itl_p99_s", "inter-token latency p99 (ms)", 1e3),
           ("e2e_p99_s", "end to end per request p99 (s)", 1.0))
"""The panels: the column drawn, its axis label, and the factor from the column's unit to the axis's;
one whose column the CSV lacks (an older sweep's) is left out."""
REQUIRED = ("status", "reason", "model", "hardware", "grid", "stages", "systems", "tokens_per_s_per_request",
            "tokens_per_s", "ttft_s")
"""The columns a serving sweep's CSV must have to be drawn."""
BASE = "base"  # a point that leaves a swept key to the base experiment, where no result column says its value
_RESULT = ("batch", "grid", "prompt_len", "output_len", "kv_layout", "model", "hardware")  # keys read back
_GRID = re.compile(r"^([0-9]+)x([0-9]+)$")


@dataclass
class ServingSeries:
    label: str
    fixed: dict[str, str]  # every other varying key, at this series' value
    colour: int
    points: list[dict[str, Any]] = field(default_factory=list)  # x, x_index, y (None: not served), status,
    #                                                              reason, point, row
    mappings: list[str] = field(default_factory=list)  # each mapping it was served on, with the x values
    #                                                    where ("9 × 250², 1 wafer: 1–4"); the legend says it


@dataclass
class ServingPanel:
    metric: str  # the CSV column drawn
    y_label: str
    scale: float  # the column's unit to the axis's (seconds to ms)
    series: list[ServingSeries]
    y_log: bool = False  # the served values span more than ``LOG_SPAN``: a log axis shows each series


@dataclass
class ServingPlan:
    stem: str
    view: str  # the x axis's swept key
    x_label: str
    x_values: list[str]
    title: str
    constant: dict[str, str]
    series_keys: list[str]  # the other varying keys, one series per combination
    panels: list[ServingPanel]
    mapping: str = ""  # the one mapping every served row shares ("" when they differ: the legend says each)
    x_scale: str = "category"  # "linear" or "log": numbers at their true spacing; "category": each its place
    x_positions: list[float] = field(default_factory=list)  # where each x value is drawn (its index for a
    #                                                         category, its number (a grid: its PEs) else)
    mappings: list[str] = field(default_factory=list)  # when every series was served on the same mapping at
    #   each x: those, with the x values where (the series then list none)


LOG_SPAN = 20.0
"""A numeric axis whose values (all positive) span more than this factor is drawn on a log scale."""
_X_LABELS = {"inference.scheduler.batch": "batch (requests at once)",
             "inference.load.rate": "offered load (requests/s)",
             "inference.load.prompt_len": "prompt length (tokens)",
             "inference.load.output_len": "output length (tokens)",
             "inference.load.requests": "requests",
             "inference.speculative.tokens": "drafted tokens K per pass",
             "inference.speculative.acceptance": "acceptance rate α (per drafted token)",
             "inference.disaggregation.prefill_systems": "prefill wafers",
             "inference.load.warmup": "warm-up (requests)",
             "inference.scheduler.token_budget": "token budget (tokens per pass)"}
_QUANTITY_UNITS = (("size", "bytes"), ("bandwidth", "bytes/s"), ("frequency", "Hz"), ("time", "s"))


def x_axis(key: str, values: list[str]) -> tuple[str, list[float]]:
    """How a swept key's values sit on the x axis: ``("linear" | "log", numbers)`` when each is a number
    (a quantity in its base unit, a grid as its PEs) and no two fall on one spot — log when all are
    positive and span more than ``LOG_SPAN`` — else ``("category", [0, 1, ...])``."""
    numbers = [number(v) if (m := _GRID.match(v)) is None else float(int(m.group(1)) * int(m.group(2)))
               for v in values]
    if len(values) < 2 or any(n is None for n in numbers) or len(set(numbers)) < len(numbers):
        return "category", [float(i) for i in range(len(values))]
    positive = all(n > 0 for n in numbers)  # type: ignore[operator]
    scale = "log" if positive and max(numbers) / min(numbers) > LOG_SPAN else "linear"  # type: ignore[type-var,operator]
    return scale, [float(n) for n in numbers]  # type: ignore[arg-type]


def x_label(key: str, values: list[str]) -> str:
    """The x axis's words, with its unit: ``offered load (requests/s)``, ``PEs per stage (grid)``, a
    quantity's unit when its values carry one (``sram (bytes)``)."""
    if key in _X_LABELS:
        return _X_LABELS[key]
    if key.endswith(".grid"):
        return "PEs per stage (grid)"
    words = short(key).replace("_", " ")
    for dimension, unit in _QUANTITY_UNITS:
        try:
            if values and all(_GRID.match(v) is None for v in values):
                for v in values:
                    if v != BASE:
                        parse_quantity(v, dimension)  # type: ignore[arg-type]
                return f"{words} ({unit})"
        except (WsesimError, ValueError):  # not a quantity of this dimension: try the next
            continue
    return words


def logged(label: str) -> str:
    """An axis's words said to be on a log scale: ``time to first token (ms, log)``."""
    return f"{label[:-1]}, log)" if label.endswith(")") else f"{label} (log)"


def y_log(values: list[float]) -> bool:
    """Whether served values (all positive) span more than ``LOG_SPAN``."""
    return len(values) > 1 and min(values) > 0 and max(values) / min(values) > LOG_SPAN


def _mapping_runs(points: list[dict[str, Any]], x_values: list[str]) -> list[str]:
    """A series' mappings, each with the x values it served ("9 × 250², 1 wafer: 1–4"), in x order."""
    runs: list[tuple[str, list[str]]] = []
    for p in points:
        if not p["mapping"]:
            continue
        if runs and runs[-1][0] == p["mapping"]:
            runs[-1][1].append(p["x"])
        else:
            runs.append((p["mapping"], [p["x"]]))
    return [f"{m}: {xs[0]}" + (f"–{xs[-1]}" if len(xs) > 1 else "") for m, xs in runs]


def is_serving(header: list[str]) -> bool:
    """Whether a results CSV is a serving sweep's (its figures are these, not the training ones)."""
    return "tokens_per_s_per_request" in header and "throughput_tokens_per_s" not in header


def check_serving_rows(rows: list[dict[str, str]]) -> None:
    """Raise ``ValueError`` for a row that was served but whose figures do not read as numbers."""
    for row in rows:
        if row.get("status") == "ok":
            for metric, _, _ in METRICS:
                if metric in REQUIRED or metric in row:
                    float(row[metric])


def value(row: dict[str, str], key: str) -> str:
    """A row's value of a swept key: as the point set it, else the base's as its unit-named column holds
    it (``base:KEY``, from ``figures.with_base_values``: ``hardware.pe.sram`` -> ``49152 B``), else what
    its result column says (the grid ``auto`` chose, the base's batch), else ``BASE``."""
    column = key.rsplit(".", 1)[-1]
    result = row.get(column, "") if column in _RESULT else ""
    return row.get(f"set:{key}") or row.get(f"base:{key}") or result or BASE


def mapping_text(row: dict[str, str]) -> str:
    """A served row's mapping in a few characters: stages × grid of PEs per stage (a square as its side),
    and the systems: ``9 × 250², 1 wafer`` (on GPUs ``1 × 1x8, 1 8-GPU node``); "" for a row not served."""
    if row.get("status") != "ok" or not row.get("grid"):
        return ""
    grid = row["grid"]
    if (m := _GRID.match(grid)) and m.group(1) == m.group(2):
        grid = f"{m.group(1)}²"
    systems, system = row.get("systems", ""), row.get("system") or "wafer"
    return f"{row.get('stages', '')} × {grid}, {systems} {system}{'' if systems == '1' else 's'}"


def _order(text: str) -> tuple[int, float]:
    """A value's place on its axis: numbers (quantities too: ``1 MiB``) first by size, then grids by their
    PEs, then the rest (in the order they came)."""
    if (n := number(text)) is not None:
        return 0, n
    if m := _GRID.match(text):
        return 1, float(int(m.group(1)) * int(m.group(2)))
    return 2, 0.0


def _values(rows: list[dict[str, str]], key: str) -> list[str]:
    seen = list(dict.fromkeys(value(r, key) for r in rows))
    ranked = [v for v in seen if _order(v)[0] < 2]
    return sorted(ranked, key=_order) + [v for v in seen if _order(v)[0] == 2]


HELD = ("model", "hardware", "prompt_len", "output_len", "batch", "kv_layout")
"""The result columns a title names when every row has one value of it (the frontier's: the first four)."""


def constant(rows: list[dict[str, str]], varying: list[str],
             columns: tuple[str, ...] = HELD) -> dict[str, str]:
    """What holds for every row of ``columns``, unless a varying key sets it."""
    out: dict[str, str] = {}
    moved = {k.rsplit(".", 1)[-1] for k in varying}
    for column in columns:
        values = {r.get(column, "") for r in rows} - {""}
        if len(values) == 1 and column not in moved:
            out[column] = values.pop()
    return out


def _title(x: str, constant: dict[str, str]) -> str:
    head = f"{constant['model']} on {constant['hardware']}" if {"model", "hardware"} <= set(constant) else ""
    names = {"prompt_len": "prompt", "output_len": "output", "kv_layout": "KV cache"}
    rest = [f"{names.get(k, k)} {v}" for k, v in constant.items()
            if not (head and k in ("model", "hardware"))]
    return f"Serving vs {short(x)}\n{', '.join(filter(None, [head, *rest]))}"


def plan_serving(header: list[str], rows: list[dict[str, str]]) -> list[ServingPlan]:
    """Every serving figure of a results CSV (see the module docstring); with no key varying, one figure
    against the first swept key (its one point)."""
    keys = swept_keys(header)
    rows = with_base_values(header, rows)
    varying = [k for k in keys if len(_values(rows, k)) > 1]
    held = constant(rows, varying)
    mappings = {mapping_text(r) for r in rows} - {""}
    mapping = mappings.pop() if len(mappings) == 1 else ""
    plans = []
    for x in varying or keys[:1]:
        others = [k for k in varying if k != x]
        x_values = _values(rows, x)
        combos = list(dict.fromkeys(tuple(value(row, k) for k in others) for row in rows))
        order = {k: _values(rows, k) for k in others}
        combos.sort(key=lambda c: [order[k].index(v) for k, v in zip(others, c, strict=True)])
        panels = []
        for metric, y_label, scale in (m for m in METRICS if m[0] in header):
            series = [ServingSeries(", ".join(f"{short(k)} {v}" for k, v in zip(others, c, strict=True)),
                                    dict(zip(others, c, strict=True)), i) for i, c in enumerate(combos)]
            for row in rows:
                s = series[combos.index(tuple(value(row, k) for k in others))]
                ok = row.get("status") == "ok" and row.get(metric, "") != ""
                point = row.get("point", "")
                s.points.append({"x": value(row, x), "x_index": x_values.index(value(row, x)),
                                 "y": float(row[metric]) if ok else None, "status": row.get("status", ""),
                                 "reason": "" if ok else row.get("reason", ""), "mapping": mapping_text(row),
                                 "point": int(point) if str(point).isdigit() else point, "row": row})
            for s in series:
                s.points.sort(key=lambda p: p["x_index"])
                s.mappings = [] if mapping else _mapping_runs(s.points, x_values)
            served = [p["y"] for s in series for p in s.points if p["y"] is not None]
            panels.append(ServingPanel(metric, y_label, scale, series, y_log(served)))
        shared: list[str] = []
        if len({tuple(s.mappings) for s in panels[0].series}) == 1 and len(panels[0].series) > 1:
            shared = panels[0].series[0].mappings  # the same at each x for every series: said once
            for panel in panels:
                for s in panel.series:
                    s.mappings = []
        title = _title(x, held) + (f", mapping {mapping}" if mapping else "")
        x_scale, x_positions = x_axis(x, x_values)
        plans.append(ServingPlan("serving_vs_" + slug(short(x)), x, x_label(x, x_values), x_values, title,
                                 held, others, panels, mapping, x_scale, x_positions, shared))
    return plans
