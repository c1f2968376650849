"""What the sweep figures show, planned from a results CSV (pure: rows in, plans out; ``output.plotting``
draws them and ``wsesim plot`` writes each plan to ``figures.json``).

A *view* is throughput against one swept key (its x axis): every numeric swept key that varies, but
``training.tiles``; the first varying key if none is numeric. In a view every other swept key that varies
gets a role, so no series is merged with another and none is dropped:

* ``colour`` — G=1 against tuned (``training.tiles``) when it varies, else the key with the fewest values;
* ``marker`` — the next key with at most ``MAX_MARKERS`` values (marker and line style);
* ``facet`` — the next with at most ``MAX_FACETS`` values (one panel each, side by side);
* ``figure`` — every key left: one figure per combination of their values (``<view>-<key>=<value>``).

So every row of the CSV is one point of one series in each view: a row that ran is drawn at its
throughput, an infeasible or failed one is marked (``y`` None), never left out. A title says only what
is constant over its figure's rows. ``plan_phases`` is the phase breakdown: one bar per row, phases too
thin to see in every run grouped as "other".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..config.errors import WsesimError
from ..config.inference_load import GROUPS
from ..config.units import parse_quantity
from .figure_text import label, with_settings, y_unit
from .results import STEP_PHASES

TILES = "training.tiles"
TUNED = "tuned"
MAX_MARKERS = 6
MAX_FACETS = 4
THIN_SHARE = 0.02  # a phase under 2 % of the step in every run is grouped as "other"
_NAMES = {"model.experts": "number of experts", "model.top_k": "top_k (experts per token)",
          "training.seq_len": "sequence length (tokens)",
          "hardware.io.bandwidth": "I/O bandwidth per direction"}
_CHECKED = {"experts": int, "top_k": int, "tiles": int, "batch_per_tile": int, "seq_len": int,
            "tokens_per_step": int, "throughput_tokens_per_s": float, "step_time_s": float,
            "step_cycles": float}


@dataclass
class Series:
    label: str
    # every swept key this series holds at one value (its colour, marker, facet, figure)
    fixed: dict[str, str]
    colour: int  # index of its colour key's value (0 when there is none)
    marker: int
    # x, x_index, y (None: not run), status, point, row
    points: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Panel:
    facet: dict[str, str]
    series: list[Series]
    speedup: list[dict[str, Any]] = field(default_factory=list)  # x_index, marker, value, label (tuned / G=1)


@dataclass
class FigurePlan:
    stem: str
    view: str  # the x axis's swept key
    x_label: str
    x_values: list[str]
    title: str
    constant: dict[str, str]  # what the title says
    roles: dict[str, str]  # swept key -> x | colour | marker | facet | figure
    colour_values: list[str]
    marker_values: list[str]
    panels: list[Panel]
    # the column drawn (the cluster's when a row ran on several systems)
    metric: str = "throughput_tokens_per_s"
    y_label: str = "throughput (thousand tokens/s)"
    y_scale: float = 1e3  # tokens/s per unit of the y axis (thousand, or million past a million)
    y_log: bool = False  # a log y: the x axis is the number of systems, equally spaced when it doubles
    x_labels: list[str] = field(default_factory=list)  # the ticks: a file's name, not its path
    categorical: bool = False  # x values that are no numbers (models, mappings): points, not lines

    def __post_init__(self) -> None:
        self.x_labels = self.x_labels or [label(self.view, v) for v in self.x_values]

    @property
    def has_speedup(self) -> bool:
        return any(p.speedup for p in self.panels)


def swept_keys(header: list[str]) -> list[str]:
    return [c.removeprefix("set:") for c in header if c.startswith("set:")]


def short(key: str) -> str:
    """A key without its section: ``hardware.io.bandwidth`` -> ``io.bandwidth``, ``model.experts`` ->
    ``experts``; a serving key without its group too (``inference.scheduler.batch`` -> ``batch``: a figure
    is named for what varies, ``serving_vs_batch``)."""
    section, _, rest = key.partition(".")
    group, _, leaf = rest.partition(".")
    return leaf if section == "inference" and group in GROUPS and leaf else rest or key


NOT_SET = "not set"
_RESOLVED = ("training.global_batch", "training.batch_per_tile", "training.micro_batches")
"""Swept keys whose result column is what a run resolved (``global_batch`` = systems · N · G · B when
unset), not what the point set: a point that leaves one unset has the value ``NOT_SET``, never the number
it resolved to, so the points that leave it to each run stay one series."""


def value(row: dict[str, str], key: str) -> str:
    """A row's value of a swept key: as the sweep set it, else the base's (``with_base_values``, else the
    result column of that name), or ``NOT_SET`` for a key whose result column a run resolves
    (``_RESOLVED``)."""
    if key in _RESOLVED:
        return row.get(f"set:{key}") or NOT_SET
    return row.get(f"set:{key}") or row.get(f"base:{key}") or row.get(key.rsplit(".", 1)[-1], "") or ""


_UNIT_COLUMNS = (("_bits_per_s", 1 / 8, "B/s"), ("_bytes_per_s", 1.0, "B/s"), ("_bytes", 1.0, "B"),
                 ("_hz", 1.0, "Hz"))


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def with_base_values(header: list[str], rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows, each that leaves a swept quantity to the base experiment (a sweep of ``points``, one key
    each) given ``base:KEY``: the value its unit-named column holds (``io_bandwidth_bits_per_s``), written
    as a point that set the same value wrote it (``1.2 Tbit/s``), else in the key's unit. So the base's
    value is one more point on the key's axis, not a series of its own with an empty label."""
    out = []
    for row in rows:
        extra = {}
        for key in swept_keys(header):
            if row.get(f"set:{key}") or key in _RESOLVED or key.rsplit(".", 1)[-1] in row:
                continue
            stem = "_".join(key.split(".")[1:]) or key
            found = next(((n * f, u) for s, f, u in _UNIT_COLUMNS
                          if (n := _float(row.get(stem + s))) is not None), None)
            if found is None:
                continue
            same = [r[f"set:{key}"] for r in rows
                    if r.get(f"set:{key}") and number(r[f"set:{key}"]) == found[0]]
            extra[f"base:{key}"] = same[0] if same else f"{found[0]:g} {found[1]}"
        out.append({**row, **extra} if extra else row)
    return out


def metric(rows: list[dict[str, str]]) -> tuple[str, str]:
    """The column a throughput figure draws and its axis label: the cluster's throughput when any row ran
    on more than one system (each system's share would hide what N systems give), else the one system's."""
    if any((r.get("systems") or "1").isdigit() and int(r.get("systems") or 1) > 1 for r in rows):
        return "cluster_throughput_tokens_per_s", "cluster throughput (thousand tokens/s)"
    return "throughput_tokens_per_s", "throughput (thousand tokens/s)"


def number(text: str) -> float | None:
    """A swept value as a number (``"1.2 Tbit/s"`` in bytes per second), or None (``tuned``, ``in_place``)."""
    try:
        return float(text)
    except ValueError:
        pass
    for dimension in ("size", "bandwidth", "frequency", "time", "cycles"):
        try:
            return parse_quantity(text, dimension)  # type: ignore[arg-type]
        except (WsesimError, ValueError):
            continue
    return None


def check_rows(rows: list[dict[str, str]]) -> None:
    """Raise ``ValueError`` for a row that ran but whose figures do not read as numbers."""
    for row in rows:
        if row.get("status") == "ok":
            for column, kind in _CHECKED.items():
                if column in row:
                    kind(row[column])


def _values(rows: list[dict[str, str]], key: str) -> list[str]:
    """A key's distinct values: numbers in order, then the rest (``tuned``) in the order they came."""
    seen = list(dict.fromkeys(value(r, key) for r in rows))
    numeric = sorted((v for v in seen if number(v) is not None), key=lambda v: number(v) or 0.0)
    return numeric + [v for v in seen if number(v) is None]


def describe(key: str, v: str, row: dict[str, str] | None = None, leaf: bool = False) -> str:
    """A key's value in words, for a series' label (of a ``row``: the G and B it ran with) or, with
    ``leaf``, a legend's entry (the key named by its last word)."""
    if v == NOT_SET and key == "training.global_batch":
        return "global_batch not set (each system its own batch)"
    if key == TILES:
        if row is not None:  # a run: the G and B it ran with
            return (f"{'tuned: ' if v == TUNED else ''}G={row.get('tiles', '?')}, "
                    f"B={row.get('batch_per_tile', '?')}")
        return {TUNED: "BTA, G tuned", "1": "G = 1 (no BTA)"}.get(v, f"G = {v}")
    return f"{key.rsplit('.', 1)[-1] if leaf else short(key)} {label(key, v)}"


def _constant(rows: list[dict[str, str]], keys: list[str]) -> dict[str, str]:
    """What one value holds for all of ``rows``: the model, hardware, sequence length and G (unless swept),
    and every swept key in ``keys`` that does not vary over them."""
    out: dict[str, str] = {}
    for column in ("model", "hardware", "seq_len", "tiles"):
        values = {r.get(column, "") for r in rows} - {""}
        if len(values) == 1 and not any(k.rsplit(".", 1)[-1] == column
                                        for k in keys if len(_values(rows, k)) > 1):
            out[column] = values.pop()
    for key in keys:
        values = _values(rows, key)
        if len(values) == 1 and values[0] and key.rsplit(".", 1)[-1] not in out:
            out[key] = values[0]
    return out


def _title(what: str, constant: dict[str, str]) -> str:
    head = f"{constant['model']} on {constant['hardware']}" if {"model", "hardware"} <= set(constant) else ""
    rest = [f"G = {v}" if k == "tiles" else f"{k} {v}" if k in ("model", "hardware", "seq_len")
            else describe(k, v) for k, v in constant.items() if not (head and k in ("model", "hardware"))]
    return f"{what}\n{', '.join(filter(None, [head, *rest]))}"


def crossed(rows: list[dict[str, str]], key: str, x: str) -> bool:
    """Whether every value of ``key`` comes with more than one value of ``x`` (a grid's key, as a mapping
    swept over the whole sweep), rather than some with one x only (bta-paper's top_k beside experts: top_k
    1, 2 and 4 only at 128 experts). A facet or a figure per value of a key that is not crossed holds a
    lone x: such keys are markers first."""
    xs: dict[str, set[str]] = {}
    for row in rows:
        xs.setdefault(value(row, key), set()).add(value(row, x))
    return all(len(v) > 1 for v in xs.values())


def _roles(x: str, varying: list[str], counts: dict[str, int], keys: list[str],
           rows: list[dict[str, str]]) -> dict[str, str]:
    others = sorted((k for k in varying if k != x), key=lambda k: (k != TILES, counts[k], keys.index(k)))
    roles = {x: "x"}
    if others:
        roles[others.pop(0)] = "colour"
    grid = {k: crossed(rows, k, x) for k in others}
    for role, limit, first in (("marker", MAX_MARKERS, False), ("facet", MAX_FACETS, True)):
        # a marker is best a key with lone points, a facet (and a figure) a key crossed with x
        fits = [k for k in others if counts[k] <= limit]
        pick = next((k for k in fits if grid[k] == first), fits[0] if fits else None)
        if pick is not None:
            roles[pick] = role
            others.remove(pick)
    roles.update(dict.fromkeys(others, "figure"))
    return roles


def plan_figures(header: list[str], rows: list[dict[str, str]],
                 settings: dict[str, Any] | None = None) -> list[FigurePlan]:
    """Every throughput figure of a results CSV (see the module docstring); [] when no key but G varies.
    ``settings``: the sweep's ``--set`` overrides, said in every title (``with_settings``)."""
    keys = swept_keys(header)
    rows = with_base_values(header, rows)
    counts = {k: len(_values(rows, k)) for k in keys}
    varying = [k for k in keys if counts[k] > 1]
    views = [k for k in varying if k != TILES and all(number(v) is not None for v in _values(rows, k))]
    views = views or [k for k in varying if k != TILES][:1]
    plans = []
    for x in views:
        roles = _roles(x, varying, counts, keys, rows)
        by_role = {role: next((k for k, r in roles.items() if r == role), None)
                   for role in ("colour", "marker", "facet")}
        split = [k for k, r in roles.items() if r == "figure"]
        groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
        for row in rows:
            groups.setdefault(tuple(value(row, k) for k in split), []).append(row)
        order = {k: _values(rows, k) for k in split}
        for fixed in sorted(groups, key=lambda f: [order[k].index(v) for k, v in zip(split, f, strict=True)]):
            plans.append(_plan_view(x, roles, by_role, dict(zip(split, fixed, strict=True)), groups[fixed],
                                    keys, rows, settings))
    return plans


def _plan_view(x: str, roles: dict[str, str], by_role: dict[str, str | None], fixed: dict[str, str],
               rows: list[dict[str, str]], keys: list[str], all_rows: list[dict[str, str]],
               settings: dict[str, Any] | None = None) -> FigurePlan:
    colour, marker, facet = by_role["colour"], by_role["marker"], by_role["facet"]
    x_values = _values(rows, x)
    colours = _values(all_rows, colour) if colour else [""]
    # the value with the most rows gets the plain line
    markers = _values(all_rows, marker) if marker else [""]
    markers.sort(key=lambda v: -sum(value(r, marker) == v for r in all_rows) if marker else 0)
    facets = _values(rows, facet) if facet else [""]
    column, y_label = metric(all_rows)
    panels = []
    for f in facets:
        in_panel = [r for r in rows if not facet or value(r, facet) == f]
        series: dict[tuple[int, int], Series] = {}
        for row in in_panel:
            c = colours.index(value(row, colour)) if colour else 0
            m = markers.index(value(row, marker)) if marker else 0
            if (c, m) not in series:
                held = {k: value(row, k) for k in (colour, marker, facet) if k} | fixed
                label = ", ".join(describe(k, held[k]) for k in (colour, marker) if k) or "throughput"
                series[(c, m)] = Series(label, held, c, m)
            ok = row.get("status") == "ok"
            series[(c, m)].points.append({
                "x": value(row, x), "x_index": x_values.index(value(row, x)),
                "y": float(row[column]) if ok else None, "status": row.get("status", ""),
                "point": int(row["point"]) if str(row.get("point", "")).isdigit() else row.get("point"),
                "row": row})
        for s in series.values():
            s.points.sort(key=lambda p: p["x_index"])
        panel = Panel({facet: f} if facet else {}, [series[k] for k in sorted(series)])
        if colour == TILES and {"1", TUNED} <= set(colours):
            panel.speedup = _speedups(panel, colours.index("1"), colours.index(TUNED))
        panels.append(panel)
    constant = with_settings(_constant(rows, [k for k in keys if roles.get(k) in (None, "figure")]), settings)
    stem = "throughput_vs_" + slug(short(x))
    if fixed:
        stem += "-" + "-".join(f"{slug(short(k))}={slug(v)}" for k, v in fixed.items())
    what = "Cluster throughput" if column.startswith("cluster") else "Throughput"
    scale, y_label = y_unit(all_rows, column, y_label)
    return FigurePlan(stem, x, _NAMES.get(x, short(x)), x_values, _title(f"{what} vs {short(x)}", constant),
                      constant, roles, colours, markers, panels, column, y_label, scale,
                      x == SYSTEMS and _geometric(x_values),
                      categorical=any(number(v) is None for v in x_values))


SYSTEMS = "cluster.systems"


def _geometric(values: list[str]) -> bool:
    """Whether numeric ``values`` (at least three, positive) grow by one constant factor (1, 2, 4, …): then
    equally spaced x is a log x, and the y axis is drawn on a log scale to match."""
    numbers = [number(v) for v in values]
    if len(numbers) < 3 or any(n is None or n <= 0 for n in numbers):
        return False
    ratios = [b / a for a, b in zip(numbers, numbers[1:], strict=False)]  # type: ignore[operator]
    return all(abs(r / ratios[0] - 1) < 1e-9 for r in ratios) and ratios[0] > 1


def _speedups(panel: Panel, g1: int, tuned: int) -> list[dict[str, Any]]:
    out = []
    by = {(s.colour, s.marker): {p["x_index"]: p for p in s.points} for s in panel.series}
    for (c, m), points in sorted(by.items()):
        if c != tuned:
            continue
        base = by.get((g1, m), {})
        for i, p in sorted(points.items()):
            b = base.get(i)
            if p["y"] is not None and b is not None and b["y"]:
                out.append({"x_index": i, "marker": m, "value": p["y"] / b["y"],
                            "label": f"{p['y'] / b['y']:.2f}x"})
    return out


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", text).strip("_") or "_"


# ------------------------------------------------------------------------------------------------- phases


@dataclass
class PhasesPlan:
    title: str
    phases: list[str]  # the phases drawn, in step order ("other" last when some are grouped)
    other: list[str]  # the thin phases grouped as "other"
    bars: list[dict[str, Any]]  # label, point, status, us_per_token {phase: µs} ({} when not run), row


def plan_phases(header: list[str], rows: list[dict[str, str]],
                settings: dict[str, Any] | None = None) -> PhasesPlan:
    """Where each run's step goes per token (µs), one bar per row in CSV order; each bar is labelled with
    the swept keys that vary (the title holds the rest, and the sweep's ``settings``)."""
    keys = swept_keys(header)
    rows = with_base_values(header, rows)
    varying = [k for k in keys if len(_values(rows, k)) > 1]
    bars, shares = [], []
    for row in rows:
        label = ", ".join(describe(k, value(row, k), row if row.get("status") == "ok" else None)
                          if k == TILES else describe(k, value(row, k))
                          for k in varying) or f"point {row.get('point')}"
        per_token: dict[str, float] = {}
        if row.get("status") == "ok":
            cycles = float(row["step_cycles"])
            scale = 1e6 * float(row["step_time_s"]) / cycles / float(row["tokens_per_step"])
            per_token = {p: scale * float(row.get(f"phase_{p}_cycles") or 0) for p in STEP_PHASES}
            shares.append({p: float(row.get(f"phase_{p}_cycles") or 0) / cycles for p in STEP_PHASES})
        bars.append({"label": label, "point": row.get("point"), "status": row.get("status", ""),
                     "us_per_token": per_token, "row": row})
    present = [p for p in STEP_PHASES if any(s[p] > 0 for s in shares)]
    thin = [p for p in present if all(s[p] < THIN_SHARE for s in shares)]
    if len(thin) < 2:  # grouping one phase hides it for nothing
        thin = []
    for bar in bars:
        if bar["us_per_token"] and thin:
            bar["us_per_token"]["other"] = sum(bar["us_per_token"][p] for p in thin)
        bar["us_per_token"] = {p: v for p, v in bar["us_per_token"].items()
                               if p not in thin and (p in present or p == "other")}
    phases = [p for p in present if p not in thin] + (["other"] if thin else [])
    constant = with_settings(_constant(rows, [k for k in keys if k not in varying]), settings)
    return PhasesPlan(_title("Where the step goes, per token", constant), phases, thin, bars)
