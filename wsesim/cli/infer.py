"""``wsesim infer``: serve a model on one wafer or a pipeline of wafers and show where the time goes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..sim.engines import ENGINES
from .common import (
    EXIT_OK,
    add_experiment_arguments,
    add_json_argument,
    check_output_folder,
    format_table,
    parse_overrides,
)


def format_serving(r: Any) -> str:
    """The human view of a ``ServeResult``."""
    head = (f"{r.model} on {r.hardware}: prompt {r.prompt_len:,} tokens, output {r.output_len:,}, "
            f"{r.batch} request{'s' if r.batch > 1 else ''} at once\n")
    if r.feasible:
        head += (f"mapping: {r.stages} stage{'s' if r.stages > 1 else ''} of {r.grid} PEs on {r.systems} "
                 f"wafer{'s' if r.systems > 1 else ''}, layers per stage {r.layers_per_stage}, KV cache {r.kv_layout}")
    else:
        head += f"mapping: none that fits (tried {r.grid} PEs per stage, KV cache {r.kv_layout})"
    if not r.feasible:
        return f"{head}\ninfeasible: {r.infeasible_reason}"
    rows = [("time to first token", f"{r.ttft_s * 1e3:,.2f} ms ({r.prefill_tokens_per_s:,.0f} prompt tokens/s)"),
            ("time per output token", f"{r.tpot_s * 1e6:,.1f} us"),
            ("tokens/s per request", f"{r.tokens_per_s_per_request:,.1f}"),
            ("tokens/s, all requests", f"{r.tokens_per_s:,.1f} (end to end, prefill included)"),
            ("longest output that fits", f"{r.max_output_len:,} tokens at this batch"),
            ("bottleneck", r.bottleneck)]
    total = sum(r.decode_breakdown.values()) or 1.0
    parts = [(k, f"{v:,.0f}", f"{100 * v / total:.1f} %") for k, v in r.decode_breakdown.items()]
    layer = sorted(r.layer_by_op.items(), key=lambda kv: -kv[1])
    ops = [(k, f"{v:,.0f}", f"{100 * v / (r.layer_decode_cycles or 1):.1f} %") for k, v in layer]
    stages = [(s["stage"], s["wafer"], f"{s['layers'][0]}-{s['layers'][1]}", f"{s['prefill_cycles']:,.0f}",
               f"{s['decode_cycles']:,.0f}", f"{100 * s['busy']:.0f} %",
               f"{s['sram_bytes_per_pe']['total']:,.0f} / {s['sram_bytes_per_pe']['usable']:,.0f}")
              for s in r.per_stage]
    out = [head, format_table(rows, ("", "")).split("\n", 2)[2], "",
           format_table(parts, ("decode step (cycles per token)", "cycles", "share")), "",
           format_table(ops, ("one layer's decode, by op", "cycles", "share")), "",
           format_table(stages, ("stage", "wafer", "layers", "prefill cycles", "decode cycles", "busy",
                                 "SRAM per PE (B)"))]
    out += [f"warning: {w}" for w in r.warnings]
    return "\n".join([*out, f"({r.events:,} stage visits in {r.wall_s:.2f} s)"])


def _cmd_infer(args: argparse.Namespace) -> int:
    from ..config.inference import load_inference
    from ..experiments.inference import run_inference, search_mapping
    from ..output.files import atomic_write_bytes, atomic_write_text, prepare_dir
    from ..output.manifest import manifest, resolved

    overrides = parse_overrides(args.set)
    loaded = load_inference(args.experiment, hardware=args.hardware, model=args.model, overrides=overrides)
    if args.vary:
        return _sweep(args, overrides)
    for folder in (args.out, str(Path(args.trace).parent) if args.trace else None):
        if folder:
            check_output_folder(folder)
    candidates: list[Any] = []
    if args.search:
        run, candidates = search_mapping(loaded.spec)
    else:
        run = run_inference(loaded.spec, engine=args.engine)
    result = run.result
    written: list[Path] = []
    if args.out:
        out = prepare_dir(args.out)
        data = {k: v for k, v in result.to_dict().items() if k != "wall_s"}
        atomic_write_text(out / "result.json", json.dumps(data, indent=2) + "\n")
        written.append(out / "result.json")
        if candidates:
            atomic_write_text(out / "candidates.json", json.dumps(
                [{k: v for k, v in c.to_dict().items() if k not in ("wall_s", "per_stage")} for c in candidates],
                indent=2) + "\n")
            written.append(out / "candidates.json")
        from ..output.manifest import write_manifest

        written.append(write_manifest(out, manifest(
            "infer", getattr(args, "argv", None), overrides={"experiment_file": args.experiment,
                                                             "set": list(args.set or [])},
            sources=loaded.sources, **resolved(loaded.spec), files=[p.name for p in written], wall_s=result.wall_s)))
    if args.trace and run.trace is not None:
        from ..analysis.chrome_trace import chrome_trace

        prepare_dir(str(Path(args.trace).parent))
        trace = chrome_trace(run.trace, clock_hz=loaded.spec.hardware.clock_hz)
        atomic_write_bytes(args.trace, json.dumps(trace).encode())
        written.append(Path(args.trace))
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        if candidates:
            rows = [(c.grid, c.stages, c.systems, f"{c.tokens_per_s_per_request:,.1f}" if c.feasible else "—",
                     f"{c.ttft_s * 1e3:,.2f}" if c.feasible else c.infeasible_reason[:60]) for c in candidates]
            print(format_table(rows, ("grid", "stages", "wafers", "tokens/s per request", "TTFT ms (or why not)")))
            print()
        print(format_serving(result))
        for path in written:
            print(f"wrote {path}")
    return EXIT_OK


def _parse_vary(texts: list[str]) -> dict[str, list[Any]]:
    """``--vary inference.batch=1,2,4`` -> {"inference.batch": [1, 2, 4]} (each value read as ``--set`` reads it)."""
    from ..config.errors import ConfigError, shown_repr
    from ..config.loader import parse_override

    vary: dict[str, list[Any]] = {}
    for text in texts:
        key, _, values = text.partition("=")
        if not key or not values or key in vary:
            raise ConfigError(f"expected KEY=v1,v2,... once per key, got {shown_repr(text)}", source="--vary")
        vary[key] = [parse_override(f"{key}={v}")[1] for v in values.split(",")]
    return vary


def _sweep(args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    """``--vary``: every combination served, a table (and with ``--out``: results.csv, figures, manifest)."""
    import csv
    import io

    from ..config.inference import load_inference
    from ..experiments.inference import serving_sweep
    from ..output.files import atomic_write_text, prepare_dir

    vary = _parse_vary(args.vary)
    if args.out:
        check_output_folder(args.out)

    def load(point: dict[str, Any]) -> Any:
        return load_inference(args.experiment, hardware=args.hardware, model=args.model,
                              overrides={**overrides, **point})

    def progress(done: int, total: int) -> None:
        if sys.stderr is not None and sys.stderr.isatty():
            sys.stderr.write(f"\r{done}/{total} points")
            sys.stderr.flush()

    rows = serving_sweep(load, vary, progress)
    if sys.stderr is not None and sys.stderr.isatty():
        sys.stderr.write("\n")
    written: list[Path] = []
    if args.out:
        out = prepare_dir(args.out)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(out / "results.csv", buf.getvalue())
        written.append(out / "results.csv")
        from ..output.manifest import manifest, resolved, write_manifest
        from ..output.plotting import plot_serving

        written += plot_serving(rows, list(vary), out)
        base = load({})
        written.append(write_manifest(out, manifest(
            "infer", getattr(args, "argv", None), overrides={"experiment_file": args.experiment,
                                                             "set": list(args.set or []), "vary": list(args.vary)},
            sources=base.sources, **resolved(base.spec), files=[p.name for p in written])))
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return EXIT_OK
    table = [(*(str(r[k]) for k in vary), f"{r['tokens_per_s_per_request']:,.1f}" if r["feasible"] else "—",
              f"{r['tokens_per_s']:,.1f}" if r["feasible"] else "—",
              f"{r['ttft_s'] * 1e3:,.2f}" if r["feasible"] else str(r["infeasible_reason"])[:70]) for r in rows]
    print(format_table(table, (*(k.split(".")[-1] for k in vary), "tokens/s per request", "tokens/s",
                               "TTFT ms (or why not)")))
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK


def register(sub: Any, commands: dict[str, Any]) -> None:
    p = sub.add_parser("infer", help="serve a model: time to first token, tokens/s per request, the bottleneck")
    add_experiment_arguments(p, "INFERENCE.yaml",
                             "a kind: inference file (default: the shipped LLaMA3-8B on WSE-2 example)",
                             "--set inference.grid=420x420 --set inference.batch=8")
    p.add_argument("--search", action="store_true",
                   help="try every square grid and keep the fastest mapping that fits (like tune)")
    p.add_argument("--engine", choices=tuple(ENGINES), default="fast",
                   help="fast (default) or the plain-SimPy reference executor")
    p.add_argument("--vary", action="append", metavar="KEY=v1,v2,...",
                   help="serve every combination (repeatable), e.g. --vary inference.batch=1,2,4,8 "
                        "--vary inference.grid=250x250,375x375; with --out: results.csv and figures")
    add_json_argument(p)
    p.add_argument("--out", metavar="DIR", help="write DIR/result.json (and candidates.json with --search) and "
                                                "DIR/manifest.json; with --vary, DIR/results.csv and the figures")
    p.add_argument("--trace", metavar="FILE.json", help="write a Chrome/Perfetto trace: each stage's requests")
    commands["infer"] = _cmd_infer
