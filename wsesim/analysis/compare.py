"""Two runs or two sweeps side by side: what differs in their configuration, and each metric with its
ratio (B / A). Pure functions over data already read (the CLI, ``wsesim compare``, reads the files).

* configuration: the manifests' resolved ``hardware``, ``model`` and ``experiment`` as dotted keys
  (``hardware.pe.sram_bytes``), only those that differ (a key one side lacks is ``None`` there);
* a run: every numeric field of the two results (``phases`` as ``phase_<name>_cycles``; a serving run's
  ``decode_breakdown`` as ``decode_<part>_cycles``, ``prefill_breakdown`` as ``prefill_<part>_cycles``, its
  ops as ``decode_op_<op>_cycles``; booleans and the host's wall-clock seconds are no metrics), and the
  text fields that differ (``hardware``, ``routing``, a serving run's ``layers_per_stage`` as ``11+11+10``…);
* two sweeps (or two of tune's ``candidates.csv``): rows matched by the values of the swept columns both
  CSVs have (``set:KEY``, and ``tuned``) — candidates, which have none, by their (G, B, micro-batches,
  systems) — and of a column swept on one side only against the other side's result column of its name
  (``set:model`` against ``model``); never by position (two sweeps that share no key are refused); per
  matched row the numeric columns, each with its ratio; rows without a partner are listed once each by
  their own swept keys, and so are swept columns only one side has.

A ratio is ``None`` where it has no meaning (a side empty or not a number, A zero).
"""

from __future__ import annotations

import math
from typing import Any

from .results import WALL_CLOCK_FIELDS

CONFIG_PARTS = ("hardware", "model", "experiment")
_NOT_METRICS = {"point", "point_key", "seed", *WALL_CLOCK_FIELDS}


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as dotted keys -> leaf values (a list is a leaf)."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key in sorted(data, key=str):
        out.update(flatten(data[key], f"{prefix}.{key}" if prefix else str(key)))
    return out


def config_diff(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The resolved-configuration keys whose values differ between two manifests (``[]`` when either
    has none: nothing to compare)."""
    if not a or not b:
        return []
    fa = flatten({part: a.get(part) for part in CONFIG_PARTS if part in a})
    fb = flatten({part: b.get(part) for part in CONFIG_PARTS if part in b})
    return [{"key": k, "a": fa.get(k), "b": fb.get(k)} for k in sorted(set(fa) | set(fb))
            if fa.get(k) != fb.get(k)]


def number(value: Any) -> float | None:
    """A metric's value as a float, or ``None`` (a boolean, text, an empty CSV cell, NaN)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    try:
        out = float(str(value))
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def ratio(a: float | None, b: float | None) -> float | None:
    """B / A, or ``None`` when either is missing or A is zero."""
    if a is None or b is None or a == 0:
        return None
    return b / a


_CYCLE_MAPS = {"phases": "phase_{}_cycles", "decode_breakdown": "decode_{}_cycles",
               "prefill_breakdown": "prefill_{}_cycles", "decode_by_op": "decode_op_{}_cycles"}
"""A result's mappings of cycles, each flattened to one field per entry (a training run's ``phases``, a
serving run's decode and prefill by part and by op)."""


def result_fields(result: dict[str, Any]) -> dict[str, Any]:
    """A result's fields with its mappings of cycles flattened (``_CYCLE_MAPS``) and a list of numbers as
    text (``layers_per_stage``: ``11+11+10``); other nested values (a serving run's stages and one layer's
    ops, its warnings) are left out: what they add up to is already a field."""
    out: dict[str, Any] = {}
    for key, value in result.items():
        if key in _CYCLE_MAPS:
            out.update({_CYCLE_MAPS[key].format(name): cycles for name, cycles in (value or {}).items()})
        elif isinstance(value, list):
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
                out[key] = "+".join(str(v) for v in value)
        elif not isinstance(value, dict):
            out[key] = value
    return out


def metric_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Each field numeric on either side, in A's order then B's: ``{metric, a, b, ratio}``."""
    rows = []
    for key in dict.fromkeys([*a, *b]):
        if key in _NOT_METRICS or key.startswith("set:"):
            continue
        na, nb = number(a.get(key)), number(b.get(key))
        if na is None and nb is None:
            continue
        rows.append({"metric": key, "a": na, "b": nb, "ratio": ratio(na, nb)})
    return rows


def text_diff(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Fields that are no number on either side and differ (``hardware``, ``model``, ``routing``…)."""
    keys = [k for k in dict.fromkeys([*a, *b]) if k not in _NOT_METRICS
            and number(a.get(k)) is None and number(b.get(k)) is None]
    return [{"field": k, "a": a.get(k), "b": b.get(k)} for k in keys if a.get(k) != b.get(k)]


def compare_runs(a: dict[str, Any], b: dict[str, Any], manifest_a: dict[str, Any] | None = None,
                 manifest_b: dict[str, Any] | None = None) -> dict[str, Any]:
    """Two results (``RunResult.to_dict()`` as saved) with their manifests, if any."""
    fa, fb = result_fields(a), result_fields(b)
    return {"kind": "runs", "config": config_diff(manifest_a, manifest_b), "fields": text_diff(fa, fb),
            "metrics": metric_rows(fa, fb)}


CANDIDATE_KEYS = ("tiles", "micro_batches", "systems")
"""What a row of tune's candidates is matched by (its ``candidates.csv`` has no swept columns): each side's
best candidate at each G (``best_per_tiles``), whatever B it took, is compared with the other's."""


def best_per_tiles(columns: list[str], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tune's candidates reduced to one row per ``CANDIDATE_KEYS`` value: the feasible one with the highest
    throughput (the first when none is feasible), in the order the G first came."""
    keys = [c for c in CANDIDATE_KEYS if c in columns]
    best: dict[tuple[str, ...], dict[str, Any]] = {}
    for row in rows:
        k = tuple(str(row.get(c, "")) for c in keys)
        mine = (str(row.get("feasible")) == "True", number(row.get("throughput_tokens_per_s")) or 0.0)
        held = best.get(k)
        if held is None or mine > (str(held.get("feasible")) == "True",
                                   number(held.get("throughput_tokens_per_s")) or 0.0):
            best[k] = row
    return list(best.values())


def _status(row: dict[str, Any]) -> str:
    """A row's status: a sweep's ``status``, a candidate's from ``feasible`` (ok or infeasible)."""
    return str(row.get("status") or {"True": "ok", "False": "infeasible"}.get(str(row.get("feasible")), ""))


def is_candidates(columns: list[str]) -> bool:
    """Whether a table is tune's ``candidates.csv`` (every (G, B) tried, the best marked)."""
    return {"best", "tiles", "batch_per_tile"} <= set(columns)


def sweep_match_keys(columns_a: list[str], columns_b: list[str]) -> list[str]:
    """The columns that identify a point in both sweeps: the ``set:`` columns they share, and ``tuned``;
    for two tables of tune's candidates, the ``CANDIDATE_KEYS`` both have."""
    shared = [c for c in columns_a if c in columns_b and c.startswith("set:")]
    if not shared and is_candidates(columns_a) and is_candidates(columns_b):
        return [c for c in CANDIDATE_KEYS if c in columns_a and c in columns_b]
    return [*shared, "tuned"] if shared and "tuned" in columns_a and "tuned" in columns_b else shared


def counterpart(swept: str, other_columns: list[str]) -> str | None:
    """The result column of the other sweep that holds its fixed value of a key only one side swept
    (``set:model`` -> ``model``, ``set:hardware`` -> ``hardware``, ``set:inference.load.rate`` -> ``rate``),
    or ``None`` when it has no such column: then the key cannot be matched on."""
    name = swept.removeprefix("set:").rsplit(".", 1)[-1]
    return name if name in other_columns else None


def _cell(value: Any) -> str:
    """A cell as matched: a number by its value (``1`` and ``1.0`` are one rate), other text as it is."""
    n = number(value)
    return repr(n) if n is not None else str(value if value is not None else "")


def compare_sweeps(columns_a: list[str], rows_a: list[dict[str, Any]], columns_b: list[str],
                   rows_b: list[dict[str, Any]], manifest_a: dict[str, Any] | None = None,
                   manifest_b: dict[str, Any] | None = None) -> dict[str, Any]:
    """Two sweeps' results.csv rows, matched by the values of ``sweep_match_keys``; a key swept on one side
    only (A's ``model`` against B's ``hardware``) is matched against the other side's result column of that
    name (``counterpart``: B's ``model``), so that A's LLaMA3-8B row at a rate meets B's row of A's hardware
    at that rate and no other. A row is matched only with the one row of the other side that has its
    values; every other row is listed once, by its own swept keys, under ``only_in_a`` or ``only_in_b``.
    Two tables of tune's candidates: each side's best per G (``best_per_tiles``).

    Raises ``ValueError`` when the sweeps share no key to match by (a row's number means nothing across
    two sweeps)."""
    keys = sweep_match_keys(columns_a, columns_b)
    swept_a, swept_b = ([c for c in cols if c.startswith("set:")] for cols in (columns_a, columns_b))
    if not keys:
        raise ValueError("the two sweeps share no swept key to match their rows by (A sweeps "
                         f"{_names(swept_a)}, B sweeps {_names(swept_b)})")
    if is_candidates(columns_a) and is_candidates(columns_b):
        rows_a, rows_b = best_per_tiles(columns_a, rows_a), best_per_tiles(columns_b, rows_b)
    one_sided = [(c, c, counterpart(c, columns_b)) for c in swept_a if c not in swept_b]
    one_sided += [(c, counterpart(c, columns_a), c) for c in swept_b if c not in swept_a]
    matched_on = [c for c, in_a, in_b in one_sided if in_a and in_b]
    pairs = [*((k, k) for k in keys), *((in_a, in_b) for _, in_a, in_b in one_sided if in_a and in_b)]

    def groups(rows: list[dict[str, Any]], side: int) -> dict[tuple[str, ...], list[dict[str, Any]]]:
        out: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in rows:
            out.setdefault(tuple(_cell(row.get(pair[side])) for pair in pairs), []).append(row)
        return out

    def own(row: dict[str, Any], swept: list[str]) -> dict[str, Any]:
        return {c: row.get(c, "") for c in [*keys, *(s for s in swept if s not in keys)]}

    in_a, in_b = groups(rows_a, 0), groups(rows_b, 1)
    matched, only_a, only_b = [], [], []
    for k, group in in_a.items():
        others = in_b.get(k, [])
        if len(group) == 1 and len(others) == 1:
            row, other = group[0], others[0]
            key = {c: row.get(c, "") for c in keys}
            key.update({c: row.get(c, "") for c in matched_on if c in swept_a})
            key.update({c: other.get(c, "") for c in matched_on if c in swept_b})
            matched.append({"key": key, "status": [_status(row), _status(other)],
                            "metrics": metric_rows(row, other)})
        else:
            only_a += [own(row, swept_a) for row in group]
            only_b += [own(row, swept_b) for row in others]
    only_b += [own(row, swept_b) for k, group in in_b.items() if k not in in_a for row in group]
    return {"kind": "sweeps", "config": config_diff(manifest_a, manifest_b), "match_by": [*keys, *matched_on],
            "swept_only_in_a": [c for c in swept_a if c not in swept_b],
            "swept_only_in_b": [c for c in swept_b if c not in swept_a],
            "rows": matched, "only_in_a": only_a, "only_in_b": only_b}


def _names(swept: list[str]) -> str:
    return ", ".join(c.removeprefix("set:") for c in swept) or "nothing"
