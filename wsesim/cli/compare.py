"""``wsesim compare A B``: two runs or two sweeps side by side (wsesim.analysis.compare).

A and B are each a run's ``result.json`` (from ``run --out``, or a serving run's from ``infer --out``), a
file of ``run --json`` or ``infer --json`` output, a run's output folder (``result.json`` +
``manifest.json``), a sweep's ``results.csv`` or a sweep's folder (``results.csv`` + ``manifest.json``:
training, or serving from ``infer --vary --out``), or tune's ``candidates.csv`` or its folder. A file's
folder's ``manifest.json`` is read when it is of the same kind: it gives the resolved configuration whose
differences are listed. Both sides must be of one kind (two training runs, two serving runs, two sweeps,
two candidate tables).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError
from ..output.manifest import read_manifest
from .common import EXIT_OK, add_json_argument, count_of, format_table, print_json

HEADLINE = ("throughput_tokens_per_s", "cluster_throughput_tokens_per_s", "step_time_s", "mfu")
SERVING_HEADLINE = ("tokens_per_s_per_request", "tokens_per_s", "ttft_s", "itl_p99_s", "e2e_p99_s")
"""A serving sweep's columns in the table: tokens/s per request with both sides, the others' ratios (an
older sweep's CSV without ITL or end to end: ``-``)."""
_KINDS = {"run": "a training run", "served": "a serving run", "sweep": "a sweep",
          "candidates": "tune's candidates"}


def _fail(message: str, source: str) -> Any:
    return ConfigError(message, source=source)


def read_side(text: str) -> tuple[str, Any, dict[str, Any] | None]:
    """(kind, data, manifest) from a path as typed: ("run" or "served", a result dict, its manifest), or
    ("sweep" or "candidates", (columns, rows), its manifest)."""
    path = Path(text)
    if path.is_dir():
        found = [path / n for n in ("results.csv", "result.json", "candidates.csv") if (path / n).is_file()]
        if not found:
            raise _fail("expected a run's folder (result.json), a sweep's (results.csv) or tune's "
                        "(candidates.csv), found none of them", text)
        path = found[0]
    elif not path.is_file():
        raise _fail("no such file or folder", text)
    if path.suffix == ".csv":
        # local: keeps the engine (SimPy, numpy) out of every command's start
        from ..analysis.compare import is_candidates
        from ..experiments.table import read_results_table

        try:
            columns, rows = read_results_table(path)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise _fail(f"expected a sweep's results.csv, got an unreadable file ({e})", str(path)) from None
        if is_candidates(columns):  # tune --out's candidates.csv
            return "candidates", (columns, rows), read_manifest(path.parent, "tune")
        if "status" not in columns:
            raise _fail("expected a sweep's results.csv (a status column) or tune's candidates.csv (best, "
                        f"tiles, batch_per_tile), got the columns {', '.join(columns[:6])}", str(path))
        return "sweep", (columns, rows), read_manifest(path.parent, "sweep")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise _fail(f"expected a run's result.json or a results.csv, got a file that is not JSON ({e})",
                    str(path)) from None
    if isinstance(data, dict) and "feasible" in data and "tokens_per_s_per_request" in data:
        return "served", data, read_manifest(path.parent, "infer")
    if not isinstance(data, dict) or "feasible" not in data or "throughput_tokens_per_s" not in data:
        got = f"a JSON {type(data).__name__}" + (f" with keys {', '.join(list(data)[:5])}"
                                                 if isinstance(data, dict) else "")
        raise _fail(f"expected a run's result (wsesim run or infer, --out or --json), got {got}", str(path))
    return "run", data, read_manifest(path.parent, "run")


def _num(value: float | None) -> str:
    """One way for every number of a table: thousands separated and whole from 1,000 on (8,657 beside
    11,392, never "8657"), four significant digits below."""
    if value is None:
        return "-"
    if abs(value) >= 1e3 or value.is_integer():
        return f"{value:,.0f}"
    return f"{value:.4g}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}x"


def _shown(value: Any) -> str:
    """A configuration value as text: a float to 12 significant digits, its shortest spelling (0.23 pJ is
    2.3e-13 J, not the unit conversion's 2.3000000000000003e-13), anything else as it is."""
    if isinstance(value, float):
        value = float(f"{value:.12g}")
    text = "-" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def format_comparison(data: dict[str, Any], a: str, b: str) -> str:
    """The human view: configuration differences, then the metrics (a sweep's: per matched row)."""
    out = [f"A: {a}", f"B: {b}", ""]
    if data["config"]:
        out += [format_table([(d["key"], _shown(d["a"]), _shown(d["b"])) for d in data["config"]],
                             ("configuration", "A", "B")), ""]
    else:
        out += ["configuration: the same (or no manifest to compare)", ""]
    if data["kind"] == "runs":
        if data["fields"]:
            out += [format_table([(d["field"], _shown(d["a"]), _shown(d["b"])) for d in data["fields"]],
                                 ("field", "A", "B")), ""]
        out.append(format_table([(m["metric"], _num(m["a"]), _num(m["b"]), _ratio(m["ratio"]))
                                 for m in data["metrics"]], ("metric", "A", "B", "B/A")))
        return "\n".join(out)
    keys = data["match_by"]
    for side in ("a", "b"):
        if data[f"swept_only_in_{side}"]:
            for c in data[f"swept_only_in_{side}"]:
                other = "B" if side == "a" else "A"
                how = (f"matched with {other}'s {c.removeprefix('set:').rsplit('.', 1)[-1]} column"
                       if c in keys else "not matched on")
                out.append(f"swept only in {side.upper()} ({how}): {c.removeprefix('set:')}")
    if data.get("serving"):
        return "\n".join([*out, *_serving_rows(data)])
    # a cluster's throughput is the cluster's: the headline is it wherever a row ran on more than one system
    cluster = any((m["a"] or 0) > 1 or (m["b"] or 0) > 1 for row in data["rows"] for m in row["metrics"]
                  if m["metric"] == "systems")
    rows = _matched(data, (HEADLINE[1] if cluster else HEADLINE[0], *HEADLINE[2:]))
    what = "cluster tokens/s" if cluster else "tokens/s"
    header = [k.removeprefix("set:") for k in keys] + ["status A/B", f"{what} A", f"{what} B", "B/A",
                                                       "step time B/A", "MFU B/A"]
    out.append(format_table(rows, header) if rows else "no rows match (see only in A / only in B)")
    out += _only_in(data)
    out.append("(--json has every metric of every row"
               + (", each system's throughput too)" if cluster else ")"))
    return "\n".join(out)


def _serving_rows(data: dict[str, Any]) -> list[str]:
    """Two serving sweeps' matched rows: tokens/s per request on both sides, then the ratios of tokens/s
    in all, of the time to first token and of the 99th percentiles of inter-token latency and of end to
    end."""
    rows = _matched(data, SERVING_HEADLINE)
    header = [k.removeprefix("set:") for k in data["match_by"]] + ["status A/B", "tokens/s per request A",
                                                       "tokens/s per request B", "B/A", "tokens/s B/A",
                                                       "TTFT B/A", "ITL p99 B/A", "e2e p99 B/A"]
    out = [format_table(rows, header) if rows else "no rows match (see only in A / only in B)"]
    return [*out, *_only_in(data), "(--json has every metric of every row)"]


def _matched(data: dict[str, Any], metrics: tuple[str, ...]) -> list[list[str]]:
    """Each matched row's cells: its keys, its status on both sides, the first of ``metrics`` on both sides
    with its ratio, then the others' ratios (``-`` where a side has none)."""
    none, rows = {"a": None, "b": None, "ratio": None}, []
    for row in data["rows"]:
        by = {m["metric"]: m for m in row["metrics"]}
        first = by.get(metrics[0], none)
        rows.append([*(str(row["key"][k]) for k in data["match_by"]), "/".join(str(s) for s in row["status"]),
                     _num(first["a"]), _num(first["b"]), _ratio(first["ratio"]),
                     *(_ratio(by.get(m, none)["ratio"]) for m in metrics[1:])])
    return rows


def _only_in(data: dict[str, Any]) -> list[str]:
    """The rows only one side has, by their keys."""
    def shown(row: dict[str, Any]) -> str:
        return ", ".join(f"{k.removeprefix('set:')}={v}" for k, v in row.items())

    return [f"only in {side.upper()}: " + "; ".join(shown(r) for r in data[f"only_in_{side}"])
            for side in ("a", "b") if data[f"only_in_{side}"]]


def format_side_by_side(data: dict[str, Any], source: str) -> str:
    """One serving sweep's rows side by side (``analysis.frontier.side_by_side``): a table per load, each
    row a hardware (or whatever else varies) with its systems, their mean kW and the frontier's figures;
    above it what one system is on each hardware and how per kW and $ are counted."""
    c = data["constant"]
    what = ", ".join(filter(None, [" on ".join(c[k] for k in ("model", "hardware") if k in c),
                                   f"prompt {c['prompt_len']} + output {c['output_len']} tokens"
                                   if {"prompt_len", "output_len"} <= set(c) else ""]))
    on: dict[str, list[str]] = {}
    for s in data["systems"]:
        on.setdefault(s["system"] or "not recorded (a CSV older than its system column)", []).append(
            s["hardware"])
    systems = "; ".join(f"{system} on {', '.join(hardware)}" for system, hardware in on.items())
    out = [f"{source}: {what}" if what else source, f"one system: {systems}",
           "per kW: of each run's simulated mean power (all its systems, their static floor included); "
           "$: at inference.economics.price_per_system_hour"]
    # local: analysis.figures loads the results' modules, which compare's other tables do not need
    from ..analysis.figures import short

    load = data["load"]
    head = [*([short(load)] if load else []), *(short(k) for k in data["keys"]),
            "systems", "kW per system", "tokens/s per user", "tokens/s per system", "tokens/s per kW",
            "$ per M tokens", "status"]
    rows = []
    for r in data["rows"]:
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['reason'][:70]}"
        rows.append([*([r["load"]] if load else []), *(r[k] for k in data["keys"]),
                     count_of(r["systems"], r["system"] or "system"), _num(r["kw_per_system"]),
                     *(_num(r[m]) for m in ("tokens_per_s_per_request", "tokens_per_s_per_system",
                                            "tokens_per_s_per_kw", "usd_per_million_tokens")), status])
    left = (*range(len(head) - 7), len(head) - 7, len(head) - 1)
    return "\n".join([*out, format_table(rows, head, left=left),
                      "(-: n/a, or not served; --json has every row)"])


def _one_sweep(source: str) -> dict[str, Any]:
    """``wsesim compare DIR``: one serving sweep's rows side by side, or a one-line refusal."""
    # local: keeps the engine (SimPy, numpy) out of every command's start
    from ..analysis.frontier import side_by_side

    kind, data, _ = read_side(source)
    if kind != "sweep" or SERVING_HEADLINE[0] not in data[0]:
        raise _fail(f"expected a serving sweep's folder or results.csv (infer --vary --out) to set its rows "
                    f"side by side, or two runs or sweeps to compare, got {_KINDS[kind]} alone"
                    + (" (a training sweep)" if kind == "sweep" else ""), source)
    return side_by_side(*data)


def _cmd_compare(args: argparse.Namespace) -> int:
    # local: keeps the engine (SimPy, numpy) out of every command's start
    from ..analysis.compare import compare_runs, compare_sweeps

    if args.b is None:
        table = _one_sweep(args.a)
        if args.json:
            print_json({"a": args.a, **table})
        else:
            print(format_side_by_side(table, args.a))
        return EXIT_OK
    kind_a, a, manifest_a = read_side(args.a)
    kind_b, b, manifest_b = read_side(args.b)
    if kind_a != kind_b:
        raise _fail(f"expected two of one kind (two training runs, two serving runs, two sweeps or two of "
                    f"tune's candidates), got {_KINDS[kind_a]} ({args.a}) and {_KINDS[kind_b]}", args.b)
    if kind_a in ("run", "served"):
        data = compare_runs(a, b, manifest_a, manifest_b)
    else:
        serving = [SERVING_HEADLINE[0] in side[0] for side in (a, b)]
        if serving[0] != serving[1]:
            what = ["a serving sweep (tokens/s per request, TTFT)", "a training sweep (step time, MFU)"]
            raise _fail(f"expected two sweeps of one kind, got {what[not serving[0]]} ({args.a}) and "
                        f"{what[not serving[1]]}: they measure different things", args.b)
        try:
            data = compare_sweeps(a[0], a[1], b[0], b[1], manifest_a, manifest_b)
        except ValueError as e:
            raise _fail(f"expected two sweeps over a shared key, got {e}", args.b) from None
        data["serving"] = serving[0]
    if args.json:
        print_json({"a": args.a, "b": args.b, **data})
    else:
        print(format_comparison(data, args.a, args.b))
    return EXIT_OK


def register(sub: Any, commands: dict[str, Any]) -> None:
    p = sub.add_parser("compare", help="two runs or two sweeps side by side: configuration differences and "
                                       "each metric with its ratio B/A")
    p.add_argument("a", metavar="A", help="a run's result.json or folder (run or infer), a run --json or "
                                          "infer --json file, a sweep's results.csv or folder (sweep or "
                                          "infer --vary), or tune's candidates.csv or folder")
    p.add_argument("b", metavar="B", nargs="?",
                   help="the same kind as A; without B, A is one serving sweep (infer --vary --out) whose "
                        "rows are set side by side: each hardware at each load, per system, per kW and $")
    add_json_argument(p, 'print {"config": [...], "metrics": [...]} (two sweeps: "rows", each with its '
                         'metrics)')
    commands["compare"] = _cmd_compare
