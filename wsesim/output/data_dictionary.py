"""The data dictionary: every column of the CSV files wsesim writes and every key of a run's
``result.json``, with its unit, its meaning and where it is defined — docs/outputs.md, and what
``wsesim schema --outputs [FILE]`` prints.

Made from the tables beside the code that writes each file (``analysis.result_fields``,
``analysis.serving_fields``, ``experiments.table.SWEEP_FIELDS``, ``kernels.result.KERNEL_FIELDS``,
``fabric.traffic.FABRIC_FIELDS``), in the order the files hold them; tests/output/test_data_dictionary.py
checks those tables against the code's fields and columns, and docs/outputs.md against ``markdown()``
(regenerate it with ``wsesim schema --outputs > docs/outputs.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..analysis import result_fields as training
from ..analysis import serving_fields as serving
from ..analysis.results import STEP_PHASES
from ..experiments.table import RESULT_COLUMNS, SERVING_COLUMNS, SWEEP_FIELDS, result_columns
from ..fabric.traffic import FABRIC_FIELDS, HOTTEST_FIELDS
from ..kernels.gpu.device import GPU_KERNEL_FIELDS
from ..kernels.result import KERNEL_FIELDS

__all__ = ["FILES", "Entry", "OutputFile", "markdown", "output_files", "to_json"]

FILES = ("results.csv", "result.json", "requests.csv", "ops.csv", "kernels.csv", "fabric.csv",
         "hottest_links.csv")
"""The files the dictionary describes, as ``wsesim schema --outputs FILE`` names them."""

_RESULTS, _SERVING = "wsesim/analysis/results.py", "wsesim/analysis/serving.py"
_LAYOUTS = "wsesim/experiments/serving_layouts.py"
_FABRIC_COMMAND = {"hardware", "pattern", "routing", "seconds", "mesh_pe_rows", "mesh_pe_cols",
                   "mesh_granularity", "mesh_rows", "mesh_cols"}


@dataclass(frozen=True)
class Entry:
    """One column or key: its name (``a.b`` inside a nested block, ``a[].b`` in a list of records, ``<x>``
    a family of names), unit ("" for a name or text), meaning, the module that defines it, and the
    docs/model.md section that says more ("" when none)."""

    name: str
    unit: str
    meaning: str
    module: str
    section: str = ""


@dataclass(frozen=True)
class OutputFile:
    """One file as one kind of run writes it: its name, which run (``variant``), the command that writes
    it, a sentence on its rows, and its entries in order."""

    name: str
    variant: str
    command: str
    rows: str
    entries: tuple[Entry, ...]


def _entry(name: str, doc: tuple[str, ...], module: str) -> Entry:
    return Entry(name, doc[0], doc[1], module, doc[2] if len(doc) > 2 else "")


def _table(table: Mapping[str, tuple[str, ...]], module: str, prefix: str = "") -> list[Entry]:
    return [_entry(f"{prefix}{name}", doc, module) for name, doc in table.items()]


def _sweep_columns(serving_sweep: bool) -> list[Entry]:
    """A sweep's columns in the order ``experiments.table`` writes them, ``set:<KEY>`` and the swept keys'
    value columns after the first four."""
    table = "wsesim/experiments/table.py"
    head = [_entry(c, SWEEP_FIELDS[c], table) for c in RESULT_COLUMNS[:4]]
    head += [_entry(c, SWEEP_FIELDS[c], table) for c in ("set:<KEY>", "<swept key>")]
    if serving_sweep:
        return head + [_entry(c, serving.SERVE_RESULT_FIELDS[c], _SERVING) for c in SERVING_COLUMNS]
    phases = {f"phase_{p}_cycles": p for p in STEP_PHASES}
    for column in result_columns([], speedup=True)[4:]:
        if column in SWEEP_FIELDS:
            head.append(_entry(column, SWEEP_FIELDS[column], table))
        elif column in phases:
            head.append(_entry(column, training.PHASE_FIELDS[phases[column]], _RESULTS))
        else:
            head.append(_entry(column, training.RUN_RESULT_FIELDS[column], _RESULTS))
    return head


_TRAINING_NESTED: dict[str, tuple[str, Mapping[str, tuple[str, ...]], str]] = {
    "phases": ("phases.", {p: training.PHASE_FIELDS[p] for p in STEP_PHASES}, _RESULTS),
    "gpu": ("gpu.", training.GPU_TRAINING_FIELDS, "wsesim/experiments/gpu_training.py"),
}
"""The nested blocks of a training result, as ``_SERVING_NESTED``'s."""
_SERVING_NESTED: dict[str, tuple[str, Mapping[str, tuple[str, ...]], str]] = {
    "decode_breakdown": ("decode_breakdown.", serving.BREAKDOWN_FIELDS, "wsesim/sim/cost/costing.py"),
    "prefill_breakdown": ("prefill_breakdown.", {k: v for k, v in serving.BREAKDOWN_FIELDS.items()
                                                 if k != "waiting"}, "wsesim/sim/cost/costing.py"),
    "per_stage": ("per_stage[].", serving.PER_STAGE_FIELDS, _SERVING),
    "moe": ("moe.", serving.MOE_FIELDS, _SERVING),
    "energy_by_part_j": ("energy_by_part_j.", serving.ENERGY_PART_FIELDS, "wsesim/model/energy.py"),
    "energy_events": ("energy_events.", serving.ENERGY_EVENT_FIELDS, "wsesim/model/energy.py"),
    "speculative": ("speculative.", serving.SPECULATIVE_FIELDS, _LAYOUTS),
    "split_prefill": ("split_prefill.", serving.SPLIT_PREFILL_FIELDS, _LAYOUTS),
    "gpu": ("gpu.", serving.GPU_FIELDS, "wsesim/experiments/gpu_inference.py"),
}
"""The nested blocks of a serving result: the prefix of their keys, their table, the module that makes
them."""


def _json(fields: Mapping[str, tuple[str, ...]], module: str,
          nested: Mapping[str, tuple[str, Mapping[str, tuple[str, ...]], str]]) -> list[Entry]:
    """A result.json's keys: each field but ``wall_s`` (never written there), a nested block's keys after
    its own."""
    out = []
    for name, doc in fields.items():
        if name != "wall_s":
            out.append(_entry(name, doc, module))
            if name in nested:
                prefix, table, made_in = nested[name]
                out += _table(table, made_in, prefix)
    return out


def output_files() -> list[OutputFile]:
    """Every file the dictionary describes, in ``FILES`` order, a training and a serving one where both
    write it."""
    fabric = [_entry(n, d, "wsesim/cli/fabric.py" if n in _FABRIC_COMMAND else "wsesim/fabric/traffic.py")
              for n, d in FABRIC_FIELDS.items()]
    return [
        OutputFile("results.csv", "a training sweep", "`wsesim sweep SWEEP.yaml --out DIR`",
                   "one row per point; what only a simulated step measures is empty on an infeasible row",
                   tuple(_sweep_columns(False))),
        OutputFile("results.csv", "a serving sweep", "`wsesim sweep` over a `kind: inference` base, "
                   "`wsesim infer --vary KEY=... --out DIR`",
                   "one row per point: the `ServeResult` fields of `SERVING_COLUMNS`; what only a served run "
                   "measures is empty on an infeasible row", tuple(_sweep_columns(True))),
        OutputFile("result.json", "a training run",
                   "`wsesim run --out DIR` (and `run --json`, with `wall_s`)",
                   "one JSON object: `RunResult.to_dict()`",
                   tuple(_json(training.RUN_RESULT_FIELDS, _RESULTS, _TRAINING_NESTED))),
        OutputFile("result.json", "a serving run",
                   "`wsesim infer --out DIR` (and `infer --json`, with `wall_s`)",
                   "one JSON object: `ServeResult.to_dict()`; a feature's block that is off is left out",
                   tuple(_json(serving.SERVE_RESULT_FIELDS, _SERVING, _SERVING_NESTED))),
        OutputFile("requests.csv", "a serving run", "`wsesim infer --out DIR`",
                   "one row per request, in arrival order",
                   tuple(_table(serving.REQUEST_FIELDS, "wsesim/analysis/requests.py"))),
        OutputFile("ops.csv", "a training run", "`wsesim run --out DIR`",
                   "one row per op of the step, by start; an empty cell where a value does not apply",
                   tuple(_table(training.OPS_FIELDS, "wsesim/analysis/ops.py"))),
        OutputFile("ops.csv", "a serving run", "`wsesim infer --out DIR`",
                   "one row per op of one decode step, stage by stage, each stage's hand-off last",
                   tuple(_table(serving.DECODE_OPS_FIELDS, "wsesim/analysis/serving_ops.py"))),
        OutputFile("kernels.csv", "a kernel run", "`wsesim kernel KIND --out DIR`",
                   "one row per run (a comma-list's every combination)",
                   tuple(_table(KERNEL_FIELDS, "wsesim/kernels/result.py"))),
        OutputFile("kernels.csv", "a GPU kernel run", "`wsesim kernel KIND --hardware h100 --out DIR`",
                   "one row per run (a comma-list's every combination) on a `kind: gpu` preset",
                   tuple(_table(GPU_KERNEL_FIELDS, "wsesim/kernels/gpu/device.py"))),
        OutputFile("fabric.csv", "a fabric run", "`wsesim fabric HARDWARE --out DIR`",
                   "the run as one row", tuple(fabric)),
        OutputFile("hottest_links.csv", "a fabric run", "`wsesim fabric HARDWARE --out DIR`",
                   "one row per link of the busiest, busiest first",
                   tuple(_table(HOTTEST_FIELDS, "wsesim/cli/fabric.py"))),
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|") if text else "–"


def markdown(names: Iterable[str] | None = None) -> str:
    """The dictionary as Markdown: docs/outputs.md when ``names`` is None, else the files named."""
    chosen = set(FILES if names is None else names)
    files = [f for f in output_files() if f.name in chosen]
    lines = ["# What each output column means", "",
             "Generated by `wsesim schema --outputs` from the descriptions beside the code that writes each "
             "file (`wsesim/analysis/result_fields.py`, `wsesim/analysis/serving_fields.py`, "
             "`SWEEP_FIELDS` in `wsesim/experiments/table.py`, `KERNEL_FIELDS` in "
             "`wsesim/kernels/result.py` (a GPU's `GPU_KERNEL_FIELDS` in `wsesim/kernels/gpu/device.py`), "
             "`FABRIC_FIELDS` in `wsesim/fabric/traffic.py`); a test fails when "
             "a field has no description or this file differs from what the code gives. Regenerate it with "
             "`wsesim schema --outputs > docs/outputs.md`.", "",
             "Simulated time is in clock cycles (a GPU kernel's in seconds); seconds are cycles at the "
             "hardware's clock. A name `a.b` is "
             "key `b` of the object `a`, `a[].b` key `b` of each record of the list `a`, and `<x>` stands "
             "for a family of names. *Defined in* is the module that makes the value; *model.md* the "
             "section of docs/model.md that says more.", ""] if names is None else []
    for f in files:
        lines += [f"## `{f.name}` of {f.variant}", "",
                  f"Written by {f.command}: {f.rows}.", "",
                  "| name | unit | meaning | defined in | model.md |", "|---|---|---|---|---|"]
        lines += [f"| `{e.name}` | {_cell(e.unit)} | {_cell(e.meaning)} | `{e.module}` | {_cell(e.section)} |"
                  for e in f.entries]
        lines.append("")
    return "\n".join(lines)


def to_json(names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The dictionary as plain data: one object per file, its entries as objects."""
    chosen = set(FILES if names is None else names)
    return [{**{k: v for k, v in asdict(f).items() if k != "entries"},
             "entries": [asdict(e) for e in f.entries]} for f in output_files() if f.name in chosen]
