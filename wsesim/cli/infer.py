"""``wsesim infer``: serve a model on one wafer or a pipeline of wafers and show where the time goes."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any, get_args

from ..config.errors import ConfigError
from ..config.inference import load_inference, read_inference
from ..config.overrides import parse_grid_pairs
from ..config.specs import Engine
from ..experiments.runner import run
from ..experiments.runs import Options
from ..output.files import check_folder_owner, command_folder, prepare_dir
from ..output.manifest import command_line, write_manifest
from ..output.run_folder import run_files, write_trace
from ..output.sweep_folder import SweepJob
from ..sim.programs.builders.software import SOFTWARE_STACKS
from .common import (
    add_experiment_arguments,
    add_json_argument,
    check_outputs,
    cwd_paths,
    cwd_value,
    defer,
    format_table,
    parse_overrides,
    print_json,
    show,
    significant,
    warn_beyond_context,
)
from .infer_gpu import gpu_text
from .progress import Progress
from .sweep import Progress as SweepProgress
from .sweep import died_exit, row_text, run_job, serving_summary_rows

OBJECTIVES = ("tpot", "ttft", "throughput")
"""``--objective``'s choices: ``experiments.inference.OBJECTIVES``'s names (a test keeps them equal; the CLI
does not import the serving code to build its parser)."""


def _energy_rows(r: Any) -> list[tuple[str, str]]:
    """A serving result's energy lines (docs/model.md §12); n/a with no energy section or no price."""
    if r.joules_per_token is None:
        rows = [("energy per token", "n/a (the hardware has no energy section)")]
    else:
        parts = r.energy_by_part_j
        wafers = f" on {r.systems} systems" if r.systems > 1 else ""
        share = (f"{100 * parts['static'] / r.energy_j:.0f} % of it the static floor" if r.energy_j
                 else "no event it counted costs energy, nor the floor")
        rows = [("energy per token", f"{significant(r.joules_per_token)} J ({r.power_w / 1e3:,.2f} kW "
                                     f"mean{wafers}; {share})"),
                ("tokens/s per kW", "n/a (no power drawn)" if r.tokens_per_s_per_kw is None
                 else f"{r.tokens_per_s_per_kw:,.2f}")]
    price = ("n/a (no inference.economics.price_per_system_hour)" if r.usd_per_million_tokens is None
             else significant(r.usd_per_million_tokens, 4))
    return [*rows, ("$ per million tokens", price)]


def format_serving(r: Any) -> str:
    """The human view of a ``ServeResult``: a load's, one request's, or a batch's without batching."""
    if r.gpu:  # a node's GPUs, not a wafer's PEs (docs/model.md §13.7)
        return gpu_text(r, format_serving)
    # one request's figures, or a batch served at once without batching; else a load's
    batched = not (r.arrival == "together" and (r.requests == 1 or (r.batching == "none"
                                                                      and r.requests == r.batch)))
    head = _serving_head(r, batched)
    if not r.feasible:
        return f"{head}\ninfeasible: {r.infeasible_reason}"
    rows = [("time to first token",
             f"{r.ttft_s * 1e3:,.2f} ms ({r.prefill_tokens_per_s:,.0f} prompt tokens/s)"),
            # one output token is the first: no decode step to time
            ("time per output token", f"{r.tpot_s * 1e6:,.1f} us" if r.output_len > 1
             else "n/a (one output token: no decode step)"),
            *_spread_rows(r),
            ("tokens/s per request", f"{r.tokens_per_s_per_request:,.1f}" if r.output_len > 1 else "n/a"),
            ("tokens/s, all requests", f"{r.tokens_per_s:,.1f} (end to end, prefill included)"),
            *_energy_rows(r),
            ("longest output that fits", f"{r.max_output_len:,} tokens at this batch"),
            ("bottleneck", r.bottleneck)]
    if batched:
        rows[0:6] = _load_rows(r)
    rows[5:5] = _layout_rows(r)  # after tokens/s per request
    out = [head, format_table(rows, ("", ""), left=(0, 1)).split("\n", 2)[2], "", *_serving_tables(r)]
    out += [f"warning: {w}" for w in r.warnings]
    return "\n".join([*out, f"({r.events:,} iterations in {r.wall_s:.2f} s)"])


def _serving_head(r: Any, batched: bool) -> str:
    """A serving result's first lines: what was served, its mapping, software and experts."""
    if batched:
        policy = (f"continuous batching of up to {r.batch} at once" if r.batching == "continuous" else
                  f"no batching (one prompt or decode token an iteration), up to {r.batch} in flight")
        head = (f"{r.model} on {r.hardware}: {r.requests:,} requests arriving {r.arrival}, {policy} (mapped "
                f"for prompt {r.prompt_len:,} + output {r.output_len:,})\n")
    else:
        head = (f"{r.model} on {r.hardware}: prompt {r.prompt_len:,} tokens, output {r.output_len:,}, "
                f"{r.batch} request{'s' if r.batch > 1 else ''} at once\n")
    if r.feasible or r.refused:  # every request refused: the mapping fits, the requests do not
        allowed = f" of {r.systems_allowed} allowed" if r.systems_allowed else ""
        head += (f"mapping: {r.stages} stage{'s' if r.stages > 1 else ''} of {r.grid} PEs on {r.systems} "
                 f"wafer{'s' if r.systems > 1 else ''}{allowed}, layers per stage {r.layers_per_stage}, "
                 f"KV cache {r.kv_layout}")
    else:
        head += f"mapping: none that fits (tried {r.grid} PEs per stage, KV cache {r.kv_layout})"
    if r.feasible:  # which code the kernels are (docs/model.md §11.11)
        head += (f"\nsoftware: {r.software}, {r.decode_launches:,} kernels launched a decode token ("
                 f"{SOFTWARE_STACKS[r.software]})")
    if r.moe:  # how the experts are placed and routed, when asked for
        m = r.moe
        seed = f" (seed {m['seed']})" if m["routing"] != "balanced" else ""
        grids = f"{m['expert_grids']} grid{'s' if m['expert_grids'] > 1 else ''}"
        head += (f"\nexperts: each MoE stage over {grids}, {m['experts_per_grid']} experts a grid, "
                 f"{m['grids']} grids in all; routing {m['routing']}{seed}")
    return head


def _serving_tables(r: Any) -> list[str]:
    """Where a serving result's time goes: the decode step, the prefill, one layer's ops and each
    stage, as tables with blank lines between."""
    total = sum(r.decode_breakdown.values()) or 1.0
    parts = [(k, f"{v:,.0f}", f"{100 * v / total:.1f} %") for k, v in r.decode_breakdown.items()]
    whole = sum(r.prefill_breakdown.values()) or 1.0
    prefill = [(k, f"{v:,.0f}", f"{100 * v / whole:.1f} %") for k, v in r.prefill_breakdown.items()]
    layer = sorted(r.layer_by_op.items(), key=lambda kv: -kv[1])
    ops = [(k, f"{v:,.0f}", f"{100 * v / (r.layer_decode_cycles or 1):.1f} %") for k, v in layer]
    stages = [(s["stage"], s["wafer"], f"{s['layers'][0]}-{s['layers'][1]}", f"{s['prefill_cycles']:,.0f}",
               f"{s['decode_cycles']:,.0f}", f"{100 * s['busy']:.0f} %",
               f"{s['sram_bytes_per_pe']['total']:,.0f} / {s['sram_bytes_per_pe']['usable']:,.0f}")
              for s in r.per_stage]
    columns = ("stage", "wafer", "layers", "prefill cycles", "decode cycles", "busy", "SRAM per PE (B)")
    if r.moe:  # each stage's grids, and with sampled routing how its tokens used them
        columns += ("grids", "expert load", "tokens on each grid")
        stages = [(*row, s["grids"], f"{s['expert_load']:.2f}" if "expert_load" in s else "",
                   " / ".join(f"{100 * u:.0f} %" for u in s.get("expert_grid_use", ())))
                  for row, s in zip(stages, r.per_stage, strict=True)]
    return [format_table(parts, ("decode step (cycles per token)", "cycles", "share")), "",
            format_table(prefill, ("prefill (cycles, every stage)", "cycles", "share")), "",
            format_table(ops, ("one layer's decode, by op", "cycles", "share")), "",
            format_table(stages, columns)]


def _layout_rows(r: Any) -> list[tuple[str, str]]:
    """The rows of speculative decoding or split prefill (docs/model.md §11.9, §11.10), none when off."""
    sp, split = getattr(r, "speculative", {}), getattr(r, "split_prefill", {})
    if sp:
        wafers = f"{sp['systems']} wafer{'s' if sp['systems'] > 1 else ''}"
        return [("speculative decoding", f"draft {sp['draft']} on {wafers} of its own ({sp['stages']} stage"
                                         f"{'s' if sp['stages'] > 1 else ''} of {sp['grid']} PEs)"),
                ("  drafted, accepted", f"K = {sp['tokens']}, acceptance {sp['acceptance']:g}: "
                                        f"{sp['expected_tokens_per_verify']:.3f} tokens per verify pass, "
                                        f"{sp['rounds']:,} passes"),
                *([("  without it", f"{sp['tokens_per_s_per_request_without']:,.1f} tokens/s per request "
                                    f"({sp['speedup']:.2f}x with it)")] if "speedup" in sp else [])]
    if split:
        return [("split prefill", f"{split['placement']} ({split['stages']} stage"
                                  f"{'s' if split['stages'] > 1 else ''} of {split['grid']} PEs)"),
                ("  KV cache hand-off", f"{split['kv_bytes'] / 1e6:,.2f} MB in "
                                        f"{split['kv_handoff_s'] * 1e3:,.3f} ms for a {r.prompt_len:,}-token "
                                        "prompt on idle links"),
                *([("  without it", f"{split['tokens_per_s_per_request_without']:,.1f} tokens/s per request, "
                                    f"TTFT {split['ttft_s_without'] * 1e3:,.2f} ms")]
                  if "ttft_s_without" in split else [])]
    return []


def _spread_rows(r: Any) -> list[tuple[str, str]]:
    """Inter-token latency over every gap between two outputs of a request, and each request's end to end
    (arrival to last token): mean, p50, p99."""
    itl = (f"mean {r.itl_s * 1e6:,.1f} us, p50 {r.itl_p50_s * 1e6:,.1f}, p99 {r.itl_p99_s * 1e6:,.1f}"
           if r.itl_s else "n/a (one output token: no gap)")
    return [("inter-token latency", itl),
            ("end to end per request", f"mean {r.e2e_mean_s * 1e3:,.2f} ms, p50 {r.e2e_p50_s * 1e3:,.2f}, "
                                       f"p99 {r.e2e_p99_s * 1e3:,.2f}")]


def _load_rows(r: Any) -> list[tuple[str, str]]:
    """The rows a continuously batched run prints in place of the one-request figures."""
    rows = [("time to first token", f"mean {r.ttft_s * 1e3:,.2f} ms, p50 {r.ttft_p50_s * 1e3:,.2f}, p99 "
                                    f"{r.ttft_p99_s * 1e3:,.2f} (queueing {r.queueing_s * 1e3:,.2f} mean)"),
            ("time per output token", f"mean {r.tpot_s * 1e6:,.1f} us, p50 {r.tpot_p50_s * 1e6:,.1f}, "
                                      f"p99 {r.tpot_p99_s * 1e6:,.1f}" if r.tpot_s else "n/a"),
            *_spread_rows(r),
            ("tokens/s per request", f"{r.tokens_per_s_per_request:,.1f}" if r.tpot_s else "n/a"),
            ("tokens/s, all requests",
             f"{r.tokens_per_s:,.1f} ({r.tokens_per_s_per_system:,.1f} per system)"),
            ("batch", f"{r.mean_batch:,.1f} decode tokens per iteration (mean), at most {r.largest_batch} "
                      "in flight"),
            ("prompt tokens/s", f"{r.prompt_tokens_per_s:,.0f} (prefill under load, all requests)"),
            ("capacity", f"{r.capacity_requests_per_s:,.3g} requests/s (the lower of the busiest stage's "
                         "and admission's bounds)")]
    if r.warmup:
        rows.append(("warm-up", f"the first {r.warmup:,} requests left out of the figures above"))
    if r.refused:
        requests = f"{r.refused:,} request{'s' if r.refused != 1 else ''}"
        rows.append(("refused", f"{requests} whose KV cache fits no stage even alone"))
    if r.kv_block:
        swapped = f", the I/O {r.swap_s * 1e3:,.2f} ms swapping to MemoryX" if r.preemption == "swap" else ""
        rows.append(("KV blocks", f"{r.kv_blocks:,} of {r.kv_block:,} tokens; {r.preemptions:,} "
                                  f"preemption{'s' if r.preemptions != 1 else ''} ({r.preemption}{swapped})"))
    if r.slo_ttft_s:
        rows.append(("goodput", f"{r.goodput_tokens_per_s:,.1f} tokens/s, {r.goodput_requests_per_s:,.2f} "
                                f"requests/s ({100 * r.slo_attainment:.1f} % meet TTFT <= "
                                f"{r.slo_ttft_s * 1e3:g} ms and TPOT <= {r.slo_tpot_s * 1e3:g} ms)"))
    return rows


def _cmd_infer(args: argparse.Namespace) -> int:
    # local: keeps the engine (SimPy) out of every command's start
    from ..experiments.inference import search_mapping

    overrides = _overrides(args)
    loaded = _load(args, overrides)
    if args.vary:
        return _vary(args, overrides)
    _check_one_run(args, loaded, overrides)
    candidates: list[Any] = []
    objective = args.objective or "tpot"
    s, inf = loaded.spec, loaded.spec.inference  # the time so far on stderr, on a terminal only (issue 40)
    n = inf.request_count  # None: a whole trace, its rows not yet read
    requests = "the trace's requests" if n is None else f"{n:,} request{'s' if n != 1 else ''}"
    with Progress(None, f"infer: {s.model.name} on {s.hardware.name}, {requests}"
                        + (", searching the grids" if args.search else "")):
        if args.search:
            served, candidates = search_mapping(s, objective=objective, spans=bool(args.trace))
        else:
            served = run(s, Options(objective=objective, spans=bool(args.trace)))
    r = served.result
    return show(args.json, r.to_dict(), lambda: (_search_text(candidates, r, objective) if candidates else "")
                + format_serving(r), _write(args, loaded, served, candidates))


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``--set``'s overrides, with ``--engine`` as ``simulation.engine`` (the executor is the experiment's
    key, as a training run's); both naming different executors is refused: neither silently wins."""
    overrides = parse_overrides(args.set)
    if args.engine:
        given = overrides.get("simulation.engine", args.engine)
        if given != args.engine:
            raise ConfigError(f"expected one executor, got --engine {args.engine} and --set "
                              f"simulation.engine={given}", source="--engine")
        overrides["simulation.engine"] = args.engine
    return overrides


def _load(args: argparse.Namespace, overrides: dict[str, Any]) -> Any:
    """The experiment with ``overrides``, and with ``--vary``'s first values: the base as its first point
    (a load's rate may come from --vary alone); a hardware or model --vary names stays the file's here, so
    that an error in one is --vary's (its sweep's points say it)."""
    vary = parse_grid_pairs(args.vary, "--vary")
    first = {k: cwd_value(k, v[0]) for k, v in vary.items() if k not in ("hardware", "model")}
    try:
        return load_inference(args.experiment, hardware=args.hardware, model=args.model,
                              overrides={**overrides, **first})
    except ConfigError as e:  # a key --vary gave is --vary's error, though it came in as an override
        if e.source != "--set" or not e.path or not any(e.path == k or e.path.startswith(k + ".")
                                                         for k in first):
            raise
        raise ConfigError(e.message, source="--vary", path=e.path) from None


def _check_one_run(args: argparse.Namespace, loaded: Any, overrides: dict[str, Any]) -> None:
    """What one serving run (no ``--vary``) refuses before it is served: the flags only a sweep reads,
    outputs it cannot write, and ``--objective`` or ``--search`` beside a grid already set."""
    warn_beyond_context(loaded.spec)
    for flag, given in (("--resume", args.resume), ("--workers", args.workers != 1)):
        if given:  # they shape a --vary sweep; without one they would change nothing
            raise ConfigError(f"expected {flag} only with --vary (one serving run has no points to "
                              "resume or share out)", source=flag)
    check_outputs("infer", args.trace, args.out)
    if args.out:
        check_folder_owner(args.out, "infer")  # before serving; again under the lock
    if args.objective and not args.search and loaded.spec.inference.grid != "auto":
        raise ConfigError("expected --objective with --search or inference.grid: auto (it chooses the "
                          f"mapping), got grid {loaded.spec.inference.grid}", source="--objective")
    if args.search and loaded.spec.inference.grid != "auto":  # it tries every grid: one set would be lost
        where = "--set inference.grid" if "inference.grid" in overrides else (args.experiment or "the file")
        raise ConfigError(f"expected inference.grid: auto with --search (it tries every grid that tiles the "
                          f"wafer), got grid {loaded.spec.inference.grid} from {where}: leave out one or the "
                          "other", source="--search")


def _write(args: argparse.Namespace, loaded: Any, served: Any, candidates: list[Any]) -> list[Path]:
    """``--out``'s folder (with its manifest) and ``--trace``'s file; returns the paths written."""
    result = served.result
    written: list[Path] = []
    held = contextlib.ExitStack()
    if args.out:
        out = held.enter_context(command_folder(prepare_dir(args.out), "infer"))
        written += run_files(out, served, loaded.spec, candidates=candidates)
        written.append(write_manifest(out, "infer", getattr(args, "argv", None), written, loaded=loaded,
                                      overrides={"experiment_file": args.experiment,
                                                 "set": list(args.set or [])}, wall_s=result.wall_s))
    if args.trace:
        traced = write_trace(served, args.trace, loaded)  # gzip-compressed for a name ending in .gz
        if traced is not None:
            written.append(traced)
        else:
            sys.stderr.write(f"wsesim: no trace: nothing was served ({result.infeasible_reason})\n")
    held.close()
    return written


def _search_text(candidates: list[Any], best: Any, objective: str) -> str:
    """The candidates a search served (the best marked) and what it kept the best of, a blank line after."""
    # local: keeps the engine (SimPy) out of every command's start
    from ..experiments.inference import OBJECTIVES

    rows = [("*" if c is best else "", c.grid, c.stages, c.systems,
             f"{c.tokens_per_s_per_request:,.1f}" if c.feasible else "—",
             f"{c.tokens_per_s:,.1f}" if c.feasible else "—",
             f"{c.ttft_s * 1e3:,.2f}" if c.feasible else c.infeasible_reason[:60])
            for c in candidates]
    head = ("best", "grid", "stages", "wafers", "tokens/s per request", "tokens/s", "TTFT ms (or why not)")
    if any(c.moe for c in candidates):  # which G each candidate spreads its experts over
        rows = [(*row[:2], c.moe.get("expert_grids", 1), *row[2:])
                for row, c in zip(rows, candidates, strict=True)]
        head = (*head[:2], "expert grids", *head[2:])
    fits = sum(c.feasible for c in candidates)
    return (f"{format_table(rows, head)}\nsearch: {fits} of {len(candidates)} mappings fit; kept "
            f"(--objective {objective}) {OBJECTIVES[objective][0]}\n\n")


def _vary(args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    """``--vary``: a sweep whose base is this experiment (its ``--hardware``, ``--model`` and ``--set``
    applied) and whose grid is the ``--vary`` keys, as ``wsesim sweep`` runs it: with ``--out DIR`` into
    that folder (its lock, ``--resume``, results.csv streamed, the figures, the manifest), without it in
    memory, nothing written. Prints the sweep's table (or ``--json``: its rows)."""
    # local: keeps the engine (SimPy) out of every command's start
    from ..experiments.estimate import check_sweep
    from ..experiments.resume import override_keys, table_columns
    from ..experiments.sweep import name_problem, run_sweep, sweep_from_data

    refused = [flag for flag, given in (("--search", args.search), ("--objective", args.objective),
                                        ("--trace", args.trace)) if given]
    if refused:
        raise ConfigError(f"expected no {refused[0]} with --vary (a sweep serves each point once)",
                          source="--vary")
    if args.workers < 1:
        raise ConfigError(f"expected a positive number of worker processes, got {args.workers}",
                          source="--workers")
    if args.resume and not args.out:
        raise ConfigError("expected --out DIR with --resume (the folder whose results.csv to resume)",
                          source="--resume")
    path, data, _ = read_inference(args.experiment, hardware=args.hardware, model=args.model)
    name = data.get("name") if isinstance(data.get("name"), str) and not name_problem(data["name"]) else ""
    grid = parse_grid_pairs(args.vary, "--vary")
    sweep = sweep_from_data({"kind": "sweep", "name": name or path.stem, "base": data}, source=str(path),
                            base_dir=path.parent, overrides=overrides, grid=grid, grid_flag="--vary",
                            paths=cwd_paths(grid))
    defer(*sweep.warnings)
    check_sweep(len(sweep.points), sum(p.cost for p in sweep.points), max(p.nbytes for p in sweep.points),
                args.workers)
    progress = SweepProgress()
    if args.out:
        job = SweepJob(sweep, sweep.spec.name, Path(args.out), command_line(getattr(args, "argv", None)),
                       getattr(args, "argv", None), resume=bool(args.resume), workers=args.workers, plot=True,
                       base_overrides=overrides)
        return run_job(job, progress, as_json=args.json)
    keys = override_keys(sweep)
    total = len(sweep.points)
    rows = run_sweep(sweep, workers=args.workers, on_row=lambda row, rows: progress(
        f"[{len(rows):>{len(str(total))}}/{total}] {row_text(row, keys)}\n"))
    if args.json:
        columns = table_columns(sweep)
        print_json([{c: r.get(c, "") for c in columns} for r in rows])
        return died_exit(rows, resumable=False)
    print(format_table(*serving_summary_rows(rows, keys)))
    return died_exit(rows, resumable=False)


def register(sub: Any, commands: dict[str, Any]) -> None:
    p = sub.add_parser("infer",
                       help="serve a model: time to first token, tokens/s per request, the bottleneck")
    add_experiment_arguments(p, "INFERENCE.yaml",
                             "a kind: inference file (default: the shipped LLaMA3-8B on WSE-2 example)",
                             "--set inference.grid=420x420 --set inference.scheduler.batch=8")
    p.add_argument("--search", action="store_true",
                   help="try the grids that tile the wafer (rectangles) and keep the fastest mapping "
                        "that fits (like tune)")
    p.add_argument("--objective", choices=OBJECTIVES,
                   help="with --search: what the best mapping is best at: tpot (default: the highest "
                        "tokens/s per request), ttft (the shortest time to first token) or throughput (the "
                        "highest tokens/s of all requests)")
    p.add_argument("--engine", choices=get_args(Engine),
                   help="fast (default) or the plain-SimPy reference executor: sets simulation.engine "
                        "(with --vary, every point's; --vary simulation.engine=fast,reference runs both)")
    p.add_argument("--vary", action="append", metavar="KEY=v1,v2,...",
                   help="serve every combination (repeatable), e.g. --vary inference.scheduler.batch=1,2,4,8 "
                        "--vary inference.grid=250x250,375x375: a sweep with this experiment as its base, as "
                        "wsesim sweep runs it; with --out, into that folder (results.csv, figures, manifest)")
    p.add_argument("--workers", type=int, default=1, help="with --vary: local worker processes (default 1)")
    p.add_argument("--resume", action="store_true",
                   help="with --vary --out: serve only the points missing from DIR/results.csv")
    add_json_argument(p)
    p.add_argument("--out", metavar="DIR",
                   help="write DIR/result.json, DIR/requests.csv (each request's times), DIR/ops.csv (one "
                        "decode step, op by op), candidates.json "
                        "with --search, and DIR/manifest.json; "
                        "with --vary, the sweep's folder: DIR/results.csv, the figures, figures.json and "
                        "manifest.json")
    p.add_argument("--trace", metavar="FILE.json[.gz]",
                   help="write a Chrome/Perfetto trace: each stage's requests (gzip-compressed if it ends in "
                        ".gz)")
    commands["infer"] = _cmd_infer
