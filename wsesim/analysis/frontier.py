"""The throughput–interactivity frontier of a serving sweep over a load, planned from its results CSV
(pure: rows in, plans and table rows out; ``output.serving_figures`` draws the plan, ``wsesim compare``
prints the table). docs/model.md §13.9.

When a sweep varies a load (``LOADS``: the offered rate, or the batch of requests arriving together),
each combination of the other varying keys (a hardware, a model) is one curve through its loads, as GPU
serving studies draw it: tokens/s per user (1 / the mean time per output token) on x, and on y, one
panel each, tokens/s per system, tokens/s per kW of the run's simulated mean power and the dollars per
million tokens (``PANELS``; a panel whose figure no served row has — no energy section, no price given —
is not drawn, and the plan says so). A system is what the rows' ``system`` column says (a wafer, an
8-GPU node); per kW puts systems of any size on one scale. A row that was not served cannot be placed on
these axes: the plan lists it (``left_out``, with its reason) and the figure names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .figures import number, short, swept_keys, with_base_values
from .serving_plans import HELD, constant, value, x_label, y_log

__all__ = ["LOADS", "NOT_GIVEN", "PANELS", "FrontierPanel", "LoadSeries", "ThroughputLatencyPlan",
           "kw_per_system", "load_key", "plan_throughput_latency", "side_by_side"]

# the two keys wsesim names a load by (docs/model.md §11.7)
RATE, BATCH = "inference.load.rate", "inference.scheduler.batch"
LOADS = {RATE: "{}/s", BATCH: "b={}"}
"""The swept keys that are a load, in the order one is chosen when several vary (the others then make
series), each with how a point's label writes its value."""
PANELS = (("tokens_per_s_per_system", "tokens/s per system"),
          ("tokens_per_s_per_kw", "tokens/s per kW of mean power"),
          ("usd_per_million_tokens", "$ per million tokens (lower is better)"))
"""The frontier's y axes: the CSV column and its words."""
NOT_GIVEN = {"tokens_per_s_per_kw": "the hardware has no energy section",
             "usd_per_million_tokens": "no inference.economics.price_per_system_hour given"}
"""Why a row has no figure for a panel."""
PER_USER = "tokens_per_s_per_request"


@dataclass
class LoadSeries:
    label: str
    fixed: dict[str, str]
    colour: int
    system: str = ""  # what one system is on this curve ("wafer", "8-GPU node"; "" when its rows differ)
    points: list[dict[str, Any]] = field(default_factory=list)  # load, point, and each PANELS column and
    #                                                             PER_USER (None: n/a on that row)


@dataclass
class FrontierPanel:
    metric: str
    y_label: str
    y_log: bool = False
    missing: list[str] = field(default_factory=list)  # served points without this figure ("h200 b=8")


@dataclass
class ThroughputLatencyPlan:
    stem: str
    title: str
    load: str  # the swept key the points are loads of
    constant: dict[str, str]
    series_keys: list[str]
    series: list[LoadSeries]
    left_out: list[dict[str, Any]]  # rows not served: point, load, series, status, reason
    panels: list[FrontierPanel] = field(default_factory=list)
    x_log: bool = False  # tokens/s per user span more than ``LOG_SPAN``
    turns_back: list[dict[str, Any]] = field(default_factory=list)  # label, load: where a series' tokens/s
    #   per user rises again with the offered rate (the curve doubles back: past what it serves)
    not_drawn: list[str] = field(default_factory=list)  # the PANELS no served row has a figure for

    def point_label(self, load: str) -> str:
        return LOADS[self.load].format(load)


def load_key(keys: list[str], rows: list[dict[str, str]]) -> str | None:
    """The first of ``LOADS`` that the rows vary, or None."""
    return next((k for k in LOADS if k in keys and len({value(r, k) for r in rows}) > 1), None)


def _served(row: dict[str, str]) -> bool:
    return row.get("status") == "ok" and row.get("tokens_per_s_per_system", "") != "" \
        and float(row.get(PER_USER) or 0) > 0


def _sort_key(text: str) -> float:
    return number(text) or 0.0


def plan_throughput_latency(header: list[str], rows: list[dict[str, str]]) -> ThroughputLatencyPlan | None:
    """The frontier figure of a sweep that varies a load (None otherwise, or for a CSV without per-system
    tokens/s)."""
    keys = swept_keys(header)
    rows = with_base_values(header, rows)
    load = load_key(keys, rows)
    if load is None or "tokens_per_s_per_system" not in header:
        return None
    varying = [k for k in keys if len({value(r, k) for r in rows}) > 1]
    others = [k for k in varying if k != load]
    combos = list(dict.fromkeys(tuple(value(row, k) for k in others) for row in rows))
    series = [LoadSeries(", ".join(f"{short(k)} {v}" for k, v in zip(others, c, strict=True)),
                         dict(zip(others, c, strict=True)), i) for i, c in enumerate(combos)]
    metrics = [m for m, _ in PANELS if m in header]
    left_out, systems = [], {}
    for row in rows:
        s = series[combos.index(tuple(value(row, k) for k in others))]
        at, point = value(row, load), row.get("point", "")
        point = int(point) if str(point).isdigit() else point
        if not _served(row):
            left_out.append({"point": point, "load": at, "series": s.label, "status": row.get("status", ""),
                             "reason": row.get("reason", "") or "no decode step (one output token)"})
            continue
        systems.setdefault(s.label, set()).add(row.get("system", ""))  # "": a CSV older than the column
        s.points.append({"load": at, "point": point, PER_USER: float(row[PER_USER]),
                         **{m: number(row.get(m, "")) for m in metrics}})
    turns = []
    for s in series:
        s.points.sort(key=lambda p: _sort_key(p["load"]))
        found = systems.get(s.label, set())
        s.system = found.pop() if len(found) == 1 else ""
        users = [p[PER_USER] for p in s.points]
        back = next((i for i in range(1, len(users)) if users[i] > users[i - 1]), None)
        if back is not None and load == RATE:  # more load, faster per user: queueing sets them
            turns.append({"label": s.label, "load": s.points[back - 1]["load"]})
    plan = ThroughputLatencyPlan("throughput_vs_latency", "", load, constant(rows, varying, HELD[:4]), others,
                                 series, left_out, turns_back=turns)
    drawn = [(s, p) for s in series for p in s.points]
    plan.x_log = y_log([p[PER_USER] for _, p in drawn])
    for metric, words in PANELS:
        if metric not in metrics:
            continue
        have = [p[metric] for _, p in drawn if p[metric] is not None]
        if not have and metric != PANELS[0][0]:
            plan.not_drawn.append(metric)
            continue
        missing = [f"{s.label} {plan.point_label(p['load'])}".strip() for s, p in drawn if p[metric] is None]
        plan.panels.append(FrontierPanel(metric, words, y_log(have), missing))
    plan.title = _title(plan)
    return plan


def _title(plan: ThroughputLatencyPlan) -> str:
    c = plan.constant
    head = " on ".join(c[k] for k in ("model", "hardware") if k in c)
    both = {"prompt_len", "output_len"} <= set(c)
    lengths = f"prompt {c['prompt_len']} + output {c['output_len']}" if both else ""
    return (f"Tokens/s per system against tokens/s per user\n{', '.join(filter(None, [head, lengths]))}"
            f"{'; ' if head or lengths else ''}each point one {x_label(plan.load, [])}")


def kw_per_system(row: dict[str, Any]) -> float | None:
    """A served row's mean power per system in kW (its ``power_w`` over its ``systems``); None: n/a."""
    watts, systems = number(str(row.get("power_w", ""))), number(str(row.get("systems", "")))
    return watts / systems / 1e3 if watts is not None and systems else None


def side_by_side(header: list[str], rows: list[dict[str, str]]) -> dict[str, Any]:
    """A serving sweep's rows as ``wsesim compare DIR`` prints them: grouped by the load (``load_key``;
    none: one group), within a load each combination of the other varying keys, with what one system is,
    the systems, the mean kW per system and the frontier's figures (None: n/a)."""
    keys = swept_keys(header)
    rows = with_base_values(header, rows)
    load = load_key(keys, rows)
    others = [k for k in keys if k != load and len({value(r, k) for r in rows}) > 1]
    loads = sorted(dict.fromkeys(value(r, load) for r in rows), key=_sort_key) if load else [""]
    table = []
    for at in loads:
        for row in (r for r in rows if not load or value(r, load) == at):
            ok = _served(row)
            table.append({"load": at, **{k: value(row, k) for k in others},
                          "system": row.get("system", ""), "systems": row.get("systems", ""),
                          "status": row.get("status", ""), "reason": row.get("reason", ""),
                          "kw_per_system": kw_per_system(row) if ok else None,
                          PER_USER: number(row.get(PER_USER, "")) if ok else None,
                          **{m: number(row.get(m, "")) if ok else None for m, _ in PANELS}})
    systems = dict.fromkeys((r.get("hardware", ""), r.get("system", "")) for r in rows if r.get("hardware"))
    held = constant(rows, [*others, *([load] if load else [])], HELD[:4])
    return {"load": load, "keys": others, "constant": held,
            "systems": [{"hardware": h, "system": s} for h, s in systems], "rows": table}
