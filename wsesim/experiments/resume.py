"""What a sweep's results folder keeps across runs, and its columns (pure: rows in, rows out; the folder
itself is ``output.sweep_folder``'s).

``resumable_rows`` is what ``--resume`` may keep of an earlier CSV, and refuses to drop finished rows;
``kept_rows`` those rows as this version writes them; ``table_columns`` the CSV's columns, a training
sweep's or a serving sweep's. A sweep here is ``experiments.sweep.Sweep`` (not imported: that module
imports this one).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..config.errors import ConfigError
from .table import (
    MEASURED_COLUMNS,
    RETIRED_COLUMNS,
    SERVING_MEASURED,
    STATUS_ERROR,
    STATUS_OK,
    TUNED,
    WORKER_DIED,
    _cell,
    result_columns,
    swept_columns,
    swept_values,
)


def pairs_g1_with_tuned(points: Iterable[Any]) -> bool:
    """Whether a sweep runs some settings both at G=1 and tuned (its CSV then has a ``speedup`` column)."""
    tiles = {str(p.overrides.get("training.tiles")) for p in points}
    return {"1", TUNED} <= tiles


def resumable_rows(sweep: Any, rows: list[dict[str, str]], source: str) -> dict[str, dict[str, str]]:
    """The finished rows --resume keeps, by point key. A row of a point still in the sweep (the same
    settings as written) whose inputs changed since (the base experiment, or a preset or file it or the
    point names, edited) is stale: left out, so that the point runs again. Any other row must be a point of
    ``sweep``: a row whose point was removed would be dropped, so that is a ``ConfigError`` saying how to
    start afresh instead. The row of a point whose worker was killed (``WORKER_DIED``) is not kept."""
    keys = {p.key for p in sweep.points}
    settings = {_settings_text(p.overrides) for p in sweep.points}
    stale = [r for r in rows if r.get("point_key", "") not in keys and _settings_text(
        {k[4:]: v for k, v in r.items() if k.startswith("set:") and v != ""}) not in settings]
    if stale:
        n = len(stale)
        raise ConfigError(f"--resume would drop {n} finished row{'s' if n > 1 else ''} of points no "
                          "longer in this sweep (points removed or changed, or the base experiment or a "
                          "preset it uses edited); keep them: restore the sweep file, or start afresh with "
                          "another --out (or without --resume, which replaces this file)", source=source)
    # a point whose worker was killed under it did not fail: it runs again
    return {r["point_key"]: r for r in rows if r.get("point_key", "") in keys
            and not (r.get("status") == STATUS_ERROR and str(r.get("reason", "")).startswith(WORKER_DIED))}


def _settings_text(overrides: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """A point's settings as its row's ``set:`` cells hold them (text), to match a row to its point."""
    return tuple(sorted((k, str(_cell(v))) for k, v in overrides.items()))


def override_keys(sweep: Any) -> list[str]:
    return list(dict.fromkeys(k for p in sweep.points for k in p.overrides))


def table_columns(sweep: Any, extra: Iterable[str] = ()) -> list[str]:
    """The columns of ``sweep``'s CSV (``result_columns``), a training sweep's with ``speedup`` where it
    pairs G=1 with tuned, or a serving sweep's; ``extra``: an older file's header."""
    return result_columns(override_keys(sweep), extra, serving=sweep.serving,
                          speedup=not sweep.serving and pairs_g1_with_tuned(sweep.points))


def kept_rows(sweep: Any, done: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The finished rows --resume keeps, as this version writes them: renumbered (the file may have moved a
    point), the swept value columns an older file lacks filled in, an infeasible row's measured cells
    emptied, retired columns dropped."""
    keys = override_keys(sweep)
    columns = [c for c, _ in swept_columns(keys, serving=sweep.serving).values()]
    measured = SERVING_MEASURED if sweep.serving else MEASURED_COLUMNS
    out = []
    for p in sweep.points:
        if (r := done.get(p.key)) is None:
            continue
        row = {k: v for k, v in r.items() if k not in RETIRED_COLUMNS} | {"point": p.index}
        if any(c not in row for c in columns):
            row.update(swept_values(sweep.load_point(p).spec, keys))
        if row.get("status") != STATUS_OK:
            row.update({c: "" for c in measured if c in row})
        out.append(row)
    return out
