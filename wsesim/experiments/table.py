"""A sweep's results as a CSV table (pure: text in, text out; the CLI writes the file).

Columns (``result_columns``): the point, its status and reason, one ``set:KEY`` per swept key as written,
one column per swept key that is not already a result column with its value as a number in the unit its
name says (``hardware.io.bandwidth`` -> ``io_bandwidth_bits_per_s``; ``swept_columns``), the result's
fields and phases, and ``speedup`` (tuned over G=1 at the same settings) where the sweep pairs the two.
What only a simulated step measures (``MEASURED_COLUMNS``: throughput, MFU, step, phases, ...) is empty,
not 0, on an infeasible row. The host's wall-clock time is no column: the file is a function of the
sweep alone, the same bytes locally and on Dask.

A sweep over a serving experiment (``kind: inference``) has its own (``serving=True``): the point, status
and reason, the swept keys, then ``SERVING_COLUMNS`` — the model, the hardware, the mapping (grid,
stages, systems) and the serving figures; what only a served run measures (``SERVING_MEASURED``)
is empty on an infeasible row.

``csv_text`` is the whole CSV (sorted by point), ``csv_line`` one row of it, for appending as points
finish; ``read_results`` ignores an incomplete last line (a row cut short by a crash is not done).
"""

from __future__ import annotations

import csv
import io
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..analysis.results import STEP_PHASES, WALL_CLOCK_FIELDS, RunResult
from ..config.inference import InferenceExperimentSpec
from ..config.inference_load import GROUPS
from ..config.specs import ExperimentSpec
from ..config.yaml_strict import read_bounded

TUNED = "tuned"
STATUS_OK, STATUS_INFEASIBLE, STATUS_ERROR = "ok", "infeasible", "error"
WORKER_DIED = "the worker process running this point died"
"""How the row of a point whose worker was killed begins its reason: not the point's own failure, so
``--resume`` runs it again."""

RETIRED_COLUMNS = ("infeasible_reason", *WALL_CLOCK_FIELDS)
"""Never written, and dropped from an older file on --resume: ``reason`` says why a point is infeasible,
and the wall-clock time is the host's, not a result (it differs run to run)."""
RESULT_COLUMNS = ["point", "point_key", "status", "reason", "tuned"] + [
    f for f in RunResult.__dataclass_fields__ if f not in ("phases", "gpu", *RETIRED_COLUMNS)] + [
    f"phase_{p}_cycles" for p in STEP_PHASES]
# what an infeasible result still knows
_KNOWN_UNRUN = {"tokens_per_step", "peak_sram_bytes_per_pe", "sram_capacity_bytes_per_pe",
                "binding_memory_phase", "expert_region_load", "micro_batches", "systems"}
_FIELDS = list(RunResult.__dataclass_fields__)
MEASURED_COLUMNS = tuple(c for c in RESULT_COLUMNS if c.startswith("phase_") or (
    c in _FIELDS[_FIELDS.index("infeasible_reason") + 1:] and c not in _KNOWN_UNRUN))
"""Columns only a simulated step fills: empty on an infeasible (or failed) row."""
SPEEDUP = "speedup"

SERVING_COLUMNS = ("model", "hardware", "feasible", "grid", "stages", "systems", "system", "layers_per_stage",
                   "kv_layout", "batch", "prompt_len", "output_len", "ttft_s", "tpot_s",
                   "tokens_per_s_per_request", "tokens_per_s", "end_to_end_s", "prefill_tokens_per_s",
                   "decode_step_cycles", "max_output_len", "bottleneck", "arrival", "batching", "requests",
                   "refused", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "itl_s", "itl_p50_s",
                   "itl_p99_s", "e2e_mean_s", "e2e_p50_s", "e2e_p99_s", "queueing_s",
                   "tokens_per_s_per_system", "mean_batch", "largest_batch", "slo_attainment",
                   "goodput_requests_per_s", "goodput_tokens_per_s", "kv_block", "kv_blocks", "preemption",
                   "preemptions", "swap_s", "power_w", "joules_per_token", "tokens_per_s_per_kw",
                   "usd_per_million_tokens")
"""The fields of a ``ServeResult`` a serving sweep's CSV keeps, after the swept keys: what was served,
the mapping it was served on (a grid of PEs per stage, stages, wafers) and its figures, energy and cost
included (empty where n/a). The host's wall-clock time is no column (the file is a function of the
sweep)."""
SERVING_MEASURED = tuple(c for c in SERVING_COLUMNS if c not in (
    "model", "hardware", "feasible", "grid", "stages", "systems", "system", "layers_per_stage", "kv_layout",
    "batch", "prompt_len", "output_len", "max_output_len", "arrival", "batching", "requests", "kv_block",
    "preemption"))
"""Columns only a served run fills: empty on an infeasible (or failed) row."""

SWEEP_FIELDS: dict[str, tuple[str, ...]] = {
    "point": ("", "the point's index in the sweep's grid, from 0 (the rows are sorted by it)"),
    "point_key": ("", "the point's identity for --resume: 16 hex digits of a SHA-256 of the resolved base "
                  "experiment, the point's overrides and what any preset or file they name resolves to; "
                  "editing the base, or a file a point names, changes it"),
    "status": ("", f"{STATUS_OK}, {STATUS_INFEASIBLE} (does not fit: a result) or {STATUS_ERROR} (it "
               "failed, or its worker died)"),
    "reason": ("", "why the point is infeasible or failed (empty when ok)"),
    "set:<KEY>": ("", "the value the point sets KEY to, as the sweep wrote it (empty: the base's)"),
    "<swept key>": ("as named", "a swept key that is not a result column, as a number in the unit its name "
                    "says (`hardware.io.bandwidth` -> `io_bandwidth_bits_per_s`, `hardware.pe.sram` -> "
                    "`pe_sram_bytes`)"),
    "tuned": ("bool", "training: whether the point's G was tuned (`training.tiles: tuned`)", "§5.4"),
    SPEEDUP: ("ratio", "training: a tuned row's throughput over the G=1 row's at the same other settings "
              "(only when the sweep pairs the two; empty elsewhere)", "§5.4"),
}
"""The columns a sweep's ``results.csv`` has besides the result's fields (``RunResult``'s with
``phase_<name>_cycles``, or ``SERVING_COLUMNS`` of ``ServeResult``): (unit, meaning[, docs/model.md
section]), as ``analysis.result_fields``'s tables; ``<...>`` stands for a family of columns."""


def swept_columns(keys: Iterable[str], *, serving: bool = False) -> dict[str, tuple[str, float]]:
    """For each swept key that names one value and is not already a result column: its column and the
    factor from the spec's unit to the column's. The name is the key below its section with the unit of
    the spec's field (``hardware.pe.sram`` -> ``pe_sram_bytes``; a bandwidth in bits per second, as the
    presets write it: ``hardware.io.bandwidth`` -> ``io_bandwidth_bits_per_s``). ``serving``: the keys of
    a serving experiment, against the serving sweep's columns."""
    taken = SERVING_COLUMNS if serving else RESULT_COLUMNS
    out: dict[str, tuple[str, float]] = {}
    for key in keys:
        classes: list[Any] = [InferenceExperimentSpec if serving else ExperimentSpec]
        names: list[str] = []
        for part in key.split("."):
            found = [(n, f) for c in classes for n, f in c.model_fields.items() if part in (n, f.alias)]
            if not found:
                break
            name, field = found[0]
            names.append(name)
            classes = _sections(field.annotation, grouped=serving and len(names) == 2 and name in GROUPS)
        else:
            if classes:  # a whole section (``hardware: wse3``): its name is a result column
                continue
            if serving and len(names) > 2 and names[1] in GROUPS:  # a serving group's key by its own name
                names = [names[0], *names[2:]]
            column, factor = "_".join(names[1:] or names), 1.0
            if column.endswith("_bytes_per_s"):
                column, factor = column.removesuffix("_bytes_per_s") + "_bits_per_s", 8.0
            if column not in taken:
                out[key] = (column, factor)
    return out


def _sections(annotation: Any, grouped: bool) -> list[Any]:
    """The spec classes a key's path goes on into: a section's, a load's every arrival's, and with
    ``grouped`` a serving group's that may be left out (``inference.economics``); none for a value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    args = getattr(annotation, "__args__", ())
    models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
    return models if models and (grouped or len(models) == len(args)) else []


def swept_values(spec: Any, keys: Iterable[str]) -> dict[str, Any]:
    """The ``swept_columns`` cells of a validated experiment spec (training's or serving's)."""
    out: dict[str, Any] = {}
    for key, (column, factor) in swept_columns(keys, serving=spec.kind == "inference").items():
        value: Any = spec
        for part in key.split("."):
            fields = type(value).model_fields
            value = getattr(value, next(n for n, f in fields.items() if part in (n, f.alias)))
        out[column] = value * factor if isinstance(value, float) else value
    return out


def result_columns(override_keys: list[str], extra: Iterable[str] = (), *, speedup: bool = False,
                   serving: bool = False) -> list[str]:
    """A sweep's CSV columns: the point, its status and reason, one ``set:KEY`` per override key and the
    ``swept_columns`` after them, then the result's (a ``serving`` sweep's ``SERVING_COLUMNS``; with
    ``speedup``, that column after the throughput, where a training sweep pairs G=1 with tuned), then any
    ``extra`` columns (kept from an older file on --resume) not already there nor retired."""
    fixed = list(SERVING_COLUMNS) if serving else RESULT_COLUMNS[4:]
    if speedup:
        at = fixed.index("throughput_tokens_per_s") + 1
        fixed = [*fixed[:at], SPEEDUP, *fixed[at:]]
    columns = (RESULT_COLUMNS[:4] + [f"set:{k}" for k in override_keys]
               + [c for c, _ in swept_columns(override_keys, serving=serving).values()] + fixed)
    return columns + [c for c in dict.fromkeys(extra) if c and c not in columns and c not in RETIRED_COLUMNS]


def failure(e: BaseException) -> str:
    """A failed point's reason: the exception, and where it was raised (``ValueError: … (engine.py:12)``)."""
    last = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    where = f" ({Path(last.filename).name}:{last.lineno})" if last else ""
    return f"{type(e).__name__}: {e}{where}".replace("\n", " ")


def add_speedups(rows: list[dict[str, Any]], keys: list[str]) -> None:
    """Set ``speedup`` on every row: on a tuned row, its throughput over the G=1 row's at the same other
    settings (when both ran); empty elsewhere. Rows from a CSV (strings) and from workers alike."""
    others = [k for k in keys if k != "training.tiles"]

    def settings(row: dict[str, Any]) -> tuple[str, ...]:
        return tuple(str(row.get(f"set:{k}", "")) for k in others)

    g1 = {settings(r): r for r in rows if str(r.get("set:training.tiles")) == "1"}
    for row in rows:
        row[SPEEDUP] = ""
        base = g1.get(settings(row)) if str(row.get("set:training.tiles")) == TUNED else None
        if base is not None and row.get("status") == STATUS_OK and base.get("status") == STATUS_OK:
            row[SPEEDUP] = float(row["throughput_tokens_per_s"]) / float(base["throughput_tokens_per_s"])


def csv_text(rows: Iterable[dict[str, Any]], override_keys: list[str], *,
             columns: list[str] | None = None) -> str:
    """The CSV of ``rows`` sorted by point: ``result_columns`` (with ``speedup`` when a row has it), or
    exactly ``columns`` (a serving sweep's: ``resume.table_columns(sweep)``)."""
    rows = list(rows)
    columns = columns or result_columns(override_keys, speedup=any(SPEEDUP in r for r in rows))
    return csv_line(columns, columns) + "".join(
        csv_line(row, columns) for row in sorted(rows, key=lambda r: int(r["point"])))


def csv_line(row: dict[str, Any] | list[str], columns: list[str]) -> str:
    """One CSV line (with its newline): ``row``'s cells in ``columns`` order (a list: the header)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(row if isinstance(row, list) else [_cell(row.get(c, "")) for c in columns])
    return buf.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return repr(float(value))  # a numpy float's repr is "np.float64(…)" since NumPy 2
    return value


MAX_CSV_BYTES = 2**30
"""The largest results CSV read (10,000 points of a few KiB each is some 50 MB)."""
CSV_FIELD_LIMIT = 2**31 - 1


def allow_long_fields() -> None:
    """Let the csv module read a cell of any size wsesim may write (a long reason, a mapping's text): its
    default limit of 128 KiB once made a sweep unable to read back its own CSV."""
    if csv.field_size_limit() < CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)


def read_results(path: str | Path) -> list[dict[str, str]]:
    """The rows of a results CSV (strings, as written): see ``read_results_table``."""
    return read_results_table(path)[1]


def read_results_table(path: str | Path) -> tuple[list[str], list[dict[str, str]]]:
    """(header, rows) of a results CSV. Only complete rows count: a last line without its newline (cut
    short by a crash while it was appended) and a row with the wrong number of cells are left out."""
    data = read_bounded(path, limit=MAX_CSV_BYTES, what="a results CSV")  # not a FIFO, not /dev/zero
    text = data[: data.rfind(b"\n") + 1].decode("utf-8", errors="replace")
    allow_long_fields()
    lines = list(csv.reader(io.StringIO(text, newline="")))
    if not lines:
        return [], []
    header = lines[0]
    return header, [dict(zip(header, cells, strict=True)) for cells in lines[1:] if len(cells) == len(header)]
