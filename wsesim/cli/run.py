"""``wsesim run``: simulate one training step and show or save the result."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

from ..config.units import format_bytes
from ..experiments.runner import run
from ..output.files import command_folder, prepare_dir
from ..output.manifest import write_manifest
from ..output.run_folder import run_files, write_trace
from .common import (
    EXIT_OK,
    add_experiment_arguments,
    add_json_argument,
    check_names,
    check_output_files,
    check_outputs,
    format_duration,
    format_table,
    load_from_args,
    say,
    significant,
)
from .progress import Progress

WAFER_PICTURES = ("wafer_busy.png", "wafer_sram.png", "wafer_links.png", "wafer_placement.png", "gantt.png")


def energy_rows(r: Any) -> list[tuple[str, str]]:
    """A training result's energy lines (docs/model.md §12): per step on every system, per token."""
    if r.energy_per_step_j is None:
        return [("energy per step", "n/a (the hardware has no energy section)")]
    systems = f", {r.systems} systems" if r.systems > 1 else ""
    return [("energy per step",
             f"{r.energy_per_step_j:,.1f} J ({r.power_w / 1e3:,.2f} kW mean per system{systems}; "
             + (f"{100 * r.energy_static_j / r.energy_per_step_j:.0f} % of it the static floor)"
                if r.energy_per_step_j else "no event it counted costs energy, nor the floor)")),
            ("energy per token", f"{significant(r.joules_per_token, 4)} J")]


def _gpu_rows(g: dict[str, Any]) -> list[tuple[str, str]]:
    """A GPU node's step (docs/model.md §13.8): its parallelism and one GPU's HBM, in place of the
    wafer's I/O and SRAM lines."""
    n, plural = g["experts_per_gpu"], "s" if g["experts_per_gpu"] > 1 else ""
    experts = f", expert parallel ({n} expert{plural} a GPU)" if g["expert_parallel"] > 1 else ""
    parts = ", ".join(f"{k} {format_bytes(v, binary=False)}" for k, v in g["hbm_by_part_bytes"].items())
    tp = g.get("tensor_parallel", 1)
    groups = f"{g['data_parallel']} data-parallel group{'s' if g['data_parallel'] > 1 else ''}"
    layout = f"{groups} of {tp} tensor-parallel GPUs" if tp > 1 else "data parallel"
    return [("node", f"{g['gpus']} GPUs, {layout}{experts}"),
            ("HBM per GPU", f"{format_bytes(g['hbm_bytes_per_gpu'], binary=False)} of "
                            f"{format_bytes(g['hbm_capacity_bytes'], binary=False)} ({parts})")]


def format_result(r: Any) -> str:
    """The human view of a ``RunResult``: a header, the key figures, and where the step's time goes."""
    shape = f"E={r.experts} top_k={r.top_k}" if r.experts else "dense"  # a dense model has no experts to show
    batch = (f"B={r.batch_per_tile} G={r.tiles} (global batch {r.global_batch})" if r.batch_per_tile
             else f"G={r.tiles}, no batch that fits")  # never "B=0 ... (global batch 0)"
    head = f"{r.model} on {r.hardware}: {shape} seq_len={r.seq_len} {batch}"
    if r.micro_batches > 1 or r.systems > 1:  # gradient accumulation, a cluster (docs/model.md §2.4, §9)
        head += (f"\n{r.micro_batches} micro-batch{'es' if r.micro_batches > 1 else ''} of G·B per step "
                 f"on each of {r.systems} system{'s' if r.systems > 1 else ''}")
    if not r.feasible:  # a result, not an error: exit 0, as sweep, tune and infer treat one
        return f"{head}\ninfeasible: {r.infeasible_reason}"
    rows: list[tuple[str, str]] = [
        ("throughput", f"{r.throughput_tokens_per_s:,.0f} tokens/s"),
        ("step time", f"{format_duration(r.step_time_s)} ({r.step_cycles:,.0f} cycles)"),
        ("tokens per step", f"{r.tokens_per_step:,}"),
        ("MFU", f"{100 * r.mfu:.1f} %"),
        *(_gpu_rows(r.gpu) if r.gpu else [
            ("I/O in / out", f"{format_bytes(r.io_bytes_in, binary=False)} / "
                             f"{format_bytes(r.io_bytes_out, binary=False)} "
                             f"(inbound link busy {100 * r.io_in_utilisation:.0f} % of the step)"),
            ("peak SRAM per PE", f"{r.peak_sram_bytes_per_pe:,} of {r.sram_capacity_bytes_per_pe:,} B "
                                 f"({r.binding_memory_phase})")]),
    ]
    rows += energy_rows(r)
    if r.experts:
        rows.append(("expert load imbalance", f"{r.expert_load_imbalance:.3f} (busiest / mean)"))
    if r.systems > 1:  # which figures are the cluster's and which each system's, said on each line
        rows[0] = ("throughput per system", rows[0][1])
        rows[2] = ("tokens per step per system", rows[2][1])
        rows[3] = ("MFU per system", rows[3][1])
        rows[4] = ("I/O in / out per system", rows[4][1])
        rows[0:0] = [("cluster throughput",
                      f"{r.cluster_throughput_tokens_per_s:,.0f} tokens/s ({r.systems} systems)"),
                     ("cluster tokens per step", f"{r.systems * r.tokens_per_step:,}"),
                     ("scaling efficiency",
                      f"{100 * r.scaling_efficiency:.1f} % of {r.systems} × one system alone "
                      f"(the reduce tree alone: {100 * r.tree_efficiency:.2f} %)")]
    phase_rows = [(name, f"{cycles:,.0f}", f"{100 * cycles / r.step_cycles:.1f} %")
                  for name, cycles in r.phases.items() if cycles > 0]
    return "\n".join([head, format_table(rows, ("", "")).split("\n", 2)[2],
                      "", format_table(phase_rows, ("phase", "cycles", "share of step")),
                      f"({r.events:,} {'kernels a GPU' if r.gpu else 'events'} in {r.wall_s:.2f} s)"])


def _cmd_run(args: argparse.Namespace) -> int:
    loaded = _checked(args)
    with contextlib.ExitStack() as held:  # each folder locked, and refused if another command's
        for folder in dict.fromkeys(f for f in (args.out, args.png) if f):
            held.enter_context(command_folder(prepare_dir(folder), "run"))
        s = loaded.spec  # the time so far on stderr while it runs, on a terminal only (cli/progress.py)
        with Progress(None, f"run: {s.model.name} on {s.hardware.name}, one training step"
                            + (f" on {s.cluster.systems} systems" if s.cluster.systems > 1 else "")):
            done = run(s)
        written = _write(args, loaded, done)
        if args.json:
            sys.stdout.write(done.result.to_json())
        else:
            print(format_result(done.result))
            for path in written:
                print(f"wrote {path}")
        return EXIT_OK


def _checked(args: argparse.Namespace) -> Any:
    """The experiment loaded and everything ``run`` will write checked, before the step runs: bad input
    writes nothing, and wafer maps that cannot be drawn here are refused with the step."""
    loaded = load_from_args(args, gpu=not (args.trace or args.out or args.png))  # a GPU's step has no spans
    for name in (args.trace, args.out, args.png):
        if name:
            check_names(name)
    if args.out or args.png:  # the wafer maps cost per PE of the wafer: refused before the step is run
        # local: keeps the estimate and the models it reads (~20 modules) out of every command's start
        from ..experiments.estimate import check_work

        check_work(loaded.spec, wafer_maps=True)
    check_outputs("run", args.trace, args.out, args.png)  # before any folder is made: bad input writes none
    if args.out:
        check_output_files(args.out, ["result.json", "wafer.json", "manifest.json"])
    if args.png:
        check_output_files(args.png, [*WAFER_PICTURES, "manifest.json"])
    return loaded


def _write(args: argparse.Namespace, loaded: Any, done: Any) -> list[Any]:
    """What ``--out``, ``--png`` and ``--trace`` ask for, from the run ``done``, each folder with its
    manifest; returns the paths written."""
    out = prepare_dir(args.out) if args.out else None
    png = prepare_dir(args.png) if args.png else None
    result, written, maps = done.result, [], None
    if result.feasible and (out is not None or png is not None):
        # local: keeps the wafer maps' modules out of every command's start
        from ..analysis.wafer import wafer_maps

        maps = wafer_maps(done)
    if out is not None:  # result.json (without the host's seconds), ops.csv, wafer.json
        written += run_files(out, done, loaded.spec, maps)
    if png is not None and maps is not None:
        written += _pictures(maps, png)
    if args.trace:  # its folder made only now: an infeasible run leaves no empty folder
        traced = write_trace(done, args.trace)  # gzip for .gz, no timestamp: the same bytes
        if traced is not None:
            written.append(args.trace)
        else:
            say("wsesim: no trace: the configuration is infeasible\n")
    for folder in dict.fromkeys(f for f in (out, png) if f is not None):
        mine = [Path(p) for p in written if Path(p).parent == folder]
        written.append(write_manifest(folder, "run", getattr(args, "argv", None), mine, loaded=loaded,
                                      overrides=given(args), wall_s=result.wall_s))
    return written


def _pictures(maps: Any, png: Path) -> list[Any]:
    """The wafer pictures; those of experts a dense model does not have are not drawn, and said so."""
    # local: keeps matplotlib out of every command's start
    from ..output.plotting import plot_wafer
    from ..output.wafer_figures import left_out

    written = plot_wafer(maps, png)
    skipped = left_out(maps)
    if skipped:
        sys.stderr.write(f"wsesim: left out {', '.join(f'{stem}.png' for stem in skipped)}: "
                         f"{'; '.join(dict.fromkeys(skipped.values()))}\n")
    return written


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The experiment and overrides as the command line gave them (for a manifest)."""
    return {"experiment_file": args.experiment, "hardware_ref": args.hardware, "model_ref": args.model,
            "set": list(args.set or [])}


def register(sub: Any, commands: dict[str, Any]) -> None:
    p = sub.add_parser("run", help="simulate one training step", description=(
        "Simulate one training step of an experiment (EXPERIMENT.yaml, or the shipped Qwen3-30B-A3B on "
        "WSE-2): throughput, step time, MFU, peak SRAM and where the time goes.\n\n"
        "Keys often set (--set KEY=VALUE; all in the README's configuration reference): training.seq_len; "
        "training.tiles (BTA's G) and training.batch_per_tile (B, or auto: the largest that fits); "
        "training.global_batch (sequences per step over all systems, instead of B: the fewest "
        "micro-batches that fit) and training.micro_batches; simulation.moe_mapping (regions, in_place); "
        "simulation.compute (constant, kernel); cluster.systems with cluster.interconnect (N wafers in "
        "data parallel behind SwarmX). --model takes a preset name, a model YAML file or a Hugging Face "
        "config.json."))
    add_experiment_arguments(p)
    add_json_argument(p)
    p.add_argument("--out", metavar="DIR",
                   help="write DIR/result.json, DIR/ops.csv (one row per op of the step), DIR/wafer.json "
                        "(for wsesim plot --wafer) and DIR/manifest.json")
    p.add_argument("--trace", metavar="FILE.json[.gz]",
                   help="write a Chrome/Perfetto trace of the simulated step (gzip-compressed if it ends in "
                        ".gz)")
    p.add_argument("--png", metavar="DIR",
                   help="draw the wafer pictures (busy, SRAM, links, placement, Gantt) into DIR")
    commands["run"] = _cmd_run
