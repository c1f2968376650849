"""``wsesim kernel``: simulate one kernel (GEMM, GEMV, a collective) on a grid of PEs (docs/model.md §10), or
on a GPU preset (``kind: gpu``: GEMMs in tiles, attention, NCCL's collectives; ``kernel_gpu``, §13).

Several values per flag, separated by commas (``--grid 420x420,720x720 --algorithm chain,tree``), make a
sweep: one row per combination, as a table (or ``{"runs": [...]}`` with ``--json``). ``--png DIR`` draws
each run's link map (the busiest outgoing link per PE, and each direction) as a wafer picture. Bad input
is a ``ConfigError``: one line naming the flag (or the folder), exit code 2.
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config.errors import ConfigError
from ..config.fields import parse_shape
from ..config.loader import load_hardware
from ..experiments.machine import _duration, _size, refuse_work
from ..kernels.kinds import DEFAULT_ALGORITHM, GPU_ONLY, MATMULS, KernelKind, algorithms
from ..output.files import command_folder, prepare_dir
from ..output.run_folder import flat, write_records
from ..sim.cost.software import reduce_beside_compute
from .common import check_output_folder, format_table, parse_overrides, parse_pe_grid, show
from .kernel_gpu import gpu_human, gpu_runs, gpu_table, positive_count, split_list

MAX_RUNS = 10_000  # combinations of the comma-lists, as a sweep's points

# What one run costs (seconds, bytes), per unit of its size, measured on the 2-core machine: a collective
# per wavelet per PE, growing with the grid's PEs up to a ceiling (chain allreduce, the costliest: 4x4
# 10^7 wavelets 12.8 s, 2.1 GB; 32x32 10^6 49 s, 7.9 GB; the whole WSE-2 10^5 9.7 s, 1.6 GB; a ring costs
# about a third).
COLLECTIVE_PER_PE = (50e-9, 8.0)
COLLECTIVE_CEILING = (100e-6, 16e3)
# A matmul per unit of the one size its algorithm's arrays follow (issue 40: the largest dimension,
# whichever it was, refused 1x1x10^9, which takes 50 MB): SUMMA's panel steps, at most K (1x10^7x1 on
# 4x4: 4.0 s, 0.9 GB; M and N 10^7: 0.6 s, 50 MB); Cannon's and MeshGEMM's skew over the grid's PEs
# (4096x4096: 8.3 s, 1.3 GB); the weight streams' N (stream 10^8: 2.2 s, 0.8 GB; stream-dw 8.2 s,
# 3.7 GB); a GEMV's N (10^7: 1.3 s, 0.11 GB).
MATMUL_UNITS: dict[tuple[str, str], tuple[str, tuple[float, float]]] = {
    ("gemm", "summa"): ("k", (0.5e-6, 100.0)),
    ("gemm", "cannon"): ("pes", (0.6e-6, 90.0)),
    ("gemm", "meshgemm"): ("pes", (0.6e-6, 90.0)),
    ("gemm", "stream"): ("n", (30e-9, 10.0)),
    ("gemm", "stream-dw"): ("n", (0.1e-6, 40.0)),
    ("gemv", "pipeline"): ("n", (0.15e-6, 14.0)),
    ("gemv", "meshgemv"): ("n", (0.15e-6, 14.0)),
}


def _runs(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The hardware and every run of the comma-lists' product, in order (its kind's ``runs``)."""
    hw = load_hardware(args.hardware, parse_overrides(args.set))
    return hw, VIEWS[hw.kind].runs(args, hw)


def _wafer_runs(args: argparse.Namespace, hw: Any) -> list[Any]:
    """Every run of the comma-lists' product on a wafer, in order."""
    # local: the kernel layer's registry and schedules, not loaded at every command's start
    from ..kernels import run_kernel

    if args.kind in GPU_ONLY:
        raise ConfigError(f"{args.kind} is a GPU kernel and {hw.name} a wafer (kind: hardware): ask a GPU "
                          "preset (--hardware h100, h200 or b200)", path="kind")
    kind = KernelKind(args.kind)
    grids = [parse_pe_grid(g, "--grid", "420x420") for g in split_list(args.grid)]
    grids = grids or [(hw.mesh.rows, hw.mesh.cols)]
    shapes: list[tuple[int, int, int] | None] = [parse_shape(s, path="--shape")
                                                         for s in split_list(args.shape)] or [None]
    if kind in MATMULS and shapes == [None]:
        example = "1x" if kind == KernelKind.GEMV else "4096x"
        raise ConfigError(f"{kind} needs a shape, e.g. --shape {example}4096x4096", path="--shape")
    dtypes = split_list(args.dtype) or ["fp16"]
    algorithms = split_list(args.algorithm) or [DEFAULT_ALGORITHM[kind]]
    wavelets = [positive_count(w, "--wavelets") for w in split_list(args.wavelets) or ["1"]]
    combos = list(itertools.islice(itertools.product(grids, shapes, dtypes, algorithms, wavelets),
                                   MAX_RUNS + 1))
    if len(combos) > MAX_RUNS:
        sizes = {"--grid": len(grids), "--shape": len(shapes), "--dtype": len(dtypes),
                 "--algorithm": len(algorithms), "--wavelets": len(wavelets)}
        longest = max(sizes, key=lambda flag: sizes[flag])
        raise ConfigError(f"expected at most {MAX_RUNS:,} runs (the product of the comma-lists), got "
                          f"{math.prod(sizes.values()):,} ({' × '.join(f'{n:,}' for n in sizes.values())}): "
                          "split them into several commands", path=longest)
    check_kernel_work(kind, combos)
    out = []
    for (rows, cols), shape, dtype, algorithm, b in combos:
        try:
            r = run_kernel(hw, kind, rows, cols, dtype=dtype, algorithm=algorithm, shape=shape, wavelets=b)
        except ConfigError as e:
            if e.source is None and e.path in ("grid", "shape", "dtype", "algorithm", "wavelets"):
                raise ConfigError(e.message, path=f"--{e.path}") from None
            raise
        out.append(r)
    return out


def kernel_work(kind: KernelKind, grid: tuple[int, int], shape: tuple[int, int, int] | None,
                wavelets: int, algorithm: str = "") -> tuple[float, float]:
    """One run's (seconds, bytes), an upper bound from its sizes alone (the constants above); an algorithm
    not in ``MATMUL_UNITS`` (refused when it runs) is costed as the dearest of its kind."""
    if kind in MATMULS:
        m, k, n = shape or (1, 1, 1)
        size = {"k": k, "n": n, "pes": grid[0] * grid[1] if grid[0] == grid[1] else 1}
        mine = [(what, name) for what, name in MATMUL_UNITS if what == str(kind)]
        if (str(kind), str(algorithm)) in MATMUL_UNITS:
            mine = [(str(kind), str(algorithm))]
        costs = [(size[MATMUL_UNITS[key][0]], MATMUL_UNITS[key][1]) for key in mine]
        return max(tuple(units * p for p in per) for units, per in costs)  # type: ignore[return-value]
    pes = grid[0] * grid[1]
    return tuple(wavelets * min(per * pes, top)  # type: ignore[return-value]
                 for per, top in zip(COLLECTIVE_PER_PE, COLLECTIVE_CEILING, strict=True))


def check_kernel_work(kind: KernelKind, combos: list[Any]) -> None:
    """Refuse, before any runs, the runs that cannot finish here: one line with the estimate, the
    largest run, and the limit (``WSESIM_MAX_RUN_S``, this machine's memory or ``WSESIM_MAX_MEMORY``)."""
    # local: keeps the estimate and the models it reads (~20 modules) out of every command's start
    from ..experiments.estimate import BASE_BYTES

    costs = [kernel_work(kind, grid, shape, b, str(a)) for grid, shape, _, a, b in combos]
    seconds, nbytes = sum(c[0] for c in costs), BASE_BYTES + max(c[1] for c in costs)

    def describe() -> str:
        (rows, cols), shape, _, algorithm, b = combos[max(range(len(costs)), key=lambda i: costs[i])]
        size = (f"shape {'x'.join(map(str, shape))}" if kind in MATMULS and shape
                else f"{b:,} wavelets per PE")
        runs = f"{len(combos):,} run{'s' if len(combos) > 1 else ''}"
        return (f"up to {_duration(seconds)} and {_size(nbytes)} for {runs} (the largest {kind} {algorithm} "
                f"on {rows}x{cols} PEs, {size})")

    refuse_work("this kernel", seconds, nbytes, describe,
                lambda *_: f"use a smaller {'--shape' if kind in MATMULS else '--wavelets'} or grid")


def _human(r: dict[str, Any]) -> str:
    g, s, cp, ln, ins = r["grid"], r["shape"], r["critical_path"], r["links"], r["instructions"]
    what = (f"{s['m']} x {s['k']} x {s['n']} {r['dtype']}" if r["kind"] in MATMULS
            else f"{s['k']:,} {r['dtype']} values per PE")
    lines = [
        f"{r['hardware']} {r['kind']} ({r['algorithm']}) on {g['rows']} x {g['cols']} PEs, {what}",
        f"{r['cycles']:,.0f} cycles = {r['seconds'] * 1e6:,.3f} us"
        + (f"; {r['flops_per_s'] / 1e12:,.2f} TFLOP/s, {100 * r['efficiency']:.1f} % of the grid's peak "
           f"({r['flops_per_cycle_per_pe']:.3f} FLOP/cycle/PE)" if r["flops"] else ""),
        f"critical path: instruction issue {cp['instruction_issue']:,.0f}, compute {cp['compute']:,.0f}, "
        f"communication {cp['communication']:,.0f}, waiting {cp['waiting']:,.0f} cycles",
        *([f"instructions: {ins['dsd_ops']:,.0f} DSD operations on the critical PE, "
           f"{ins['elements_per_op']:,.1f} elements each on average, one issue "
           f"({ins['issue_cycles_per_op']:,.0f} cycles) each; microthreads ({ins['microthreads']}) hide "
           f"{ins['microthread_saved_cycles']:,.0f} cycles"] if ins["dsd_ops"] else []),
        f"SRAM per PE: {r['sram']['peak_bytes_per_pe']:,.0f} B of "
        f"{r['sram']['usable_bytes_per_pe']:,.0f} B usable",
        f"links: busiest {ln['max_wavelets']:,.0f} wavelets, {ln['links_used']:,} links used, "
        f"{ln['wavelet_hops']:,.0f} wavelet-hops ({ln['mean_wavelets']:,.1f} per link used); "
        f"colours {r['colours']['used']} of {r['colours']['available']} at the busiest router",
    ]
    lines += [f"note: {n}" for n in r["notes"]]
    if not r["feasible"]:
        lines.append(f"INFEASIBLE: {r['reason']} (cycles as if it fitted)")
    return "\n".join(lines)


def _production(r: Any) -> str:
    """For a GEMV, what it takes under ``inference.software: production`` (docs/model.md §11.11): its row
    allreduce begun on the first of its output chunks while the PE computes the rest; its launch and any
    fused epilogue are the serving program's (``wsesim infer``), not the kernel's."""
    if r.kind != KernelKind.GEMV:
        return ""

    stream = r.overhead + r.compute
    chunks = min(r.machine.microthreads, r.machine.wavelets(r.shape[0] * -(-r.shape[2] // r.rows)))
    cycles = reduce_beside_compute(stream, r.cycles - stream, chunks)
    return (f"\nsoftware: research as above; production {cycles:,.0f} cycles, the row's allreduce begun on "
            f"the first of {chunks} output chunks while the PE computes the rest (inference.software)")


def _table(runs: list[dict[str, Any]]) -> str:
    """A sweep's runs, one line each: a GEMM's or GEMV's shape and efficiency, a collective's wavelets per PE
    (its efficiency n/a: it computes next to nothing), the DSD operations the critical PE issues and the
    cycles its microthreads hide (docs/model.md §10.1); a run that does not fit is "no [n]", its reason the
    n-th line under the table (each reason once)."""
    reasons = list(dict.fromkeys(r["reason"] for r in runs if not r["feasible"]))
    rows = [(f"{r['grid']['rows']}x{r['grid']['cols']}",
             f"{r['shape']['m']}x{r['shape']['k']}x{r['shape']['n']}" if r["wavelets"] is None
             else f"{r['wavelets']:,} wavelet{'' if r['wavelets'] == 1 else 's'}",
             r["dtype"], r["algorithm"], f"{r['cycles']:,.0f}", f"{r['seconds'] * 1e6:,.3f}",
             f"{100 * r['efficiency']:.1f}" if r["flops"] else "n/a",
             f"{r['instructions']['dsd_ops']:,.0f}", f"{r['instructions']['microthread_saved_cycles']:,.0f}",
             f"{r['sram']['peak_bytes_per_pe']:,.0f}",
             "yes" if r["feasible"] else f"no [{reasons.index(r['reason']) + 1}]") for r in runs]
    what = "shape" if all(r["wavelets"] is None for r in runs) else "size per PE"
    table = format_table(rows, ("grid", what, "dtype", "algorithm", "cycles", "us", "eff %", "DSD ops",
                                "microthreads hide", "SRAM B", "fits"))
    return "\n".join([table, *(f"[{i}] {reason} (cycles as if it fitted)"
                               for i, reason in enumerate(reasons, 1))])


def _cmd_kernel(args: argparse.Namespace) -> int:
    for folder in (args.png, args.out):
        if folder:
            check_output_folder(folder)
    hw, results = _runs(args)
    written = []
    if args.png:
        # local: keeps matplotlib out of every command's start
        from ..output.kernel_figures import write_kernel_figures

        with command_folder(prepare_dir(args.png), "kernel"):
            written = write_kernel_figures(results, args.png)
    runs = [r.to_dict() for r in results]
    for run, path in zip(runs, written, strict=False):
        run["png"] = str(path)
    if args.out:
        written += _write_out(args, hw, runs)
    view = VIEWS[hw.kind]
    return show(args.json, runs[0] if len(runs) == 1 else {"runs": runs},
                lambda: view.human(runs[0], results[0]) if len(runs) == 1 else view.table(runs), written)


@dataclass(frozen=True)
class KernelView:
    """What ``wsesim kernel`` does differently on a kind of hardware: ``runs(args, hw)`` every run of the
    flags, ``human(run, result)`` one run in words, ``table(runs)`` several, ``flags`` the flags only this
    kind reads (kept in ``--out``'s manifest). The command's half of ``experiments.hardware_kinds``."""

    runs: Callable[[argparse.Namespace, Any], list[Any]]
    human: Callable[[dict[str, Any], Any], str]
    table: Callable[[list[dict[str, Any]]], str]
    flags: tuple[str, ...] = ()


VIEWS = {
    "hardware": KernelView(_wafer_runs, lambda run, result: _human(run) + _production(result), _table),
    "gpu": KernelView(gpu_runs, lambda run, result: gpu_human(run), gpu_table,
                      ("experts", "heads", "causal", "cuda_graphs")),
}
"""Each kind of hardware's view, by its ``kind:`` key."""

KERNELS_CSV = "kernels.csv"


def _write_out(args: argparse.Namespace, hw: Any, runs: list[dict[str, Any]]) -> list[Any]:
    """``--out DIR``: ``DIR/kernels.csv``, one row per run (every field of ``--json``, nested ones flattened:
    ``critical_path_compute``, ``links_max_wavelets``), and ``DIR/manifest.json`` (the flags as given, the
    hardware resolved)."""

    flags = {name: getattr(args, name) for name in ("kind", "hardware", "grid", "shape", "dtype", "algorithm",
                                                    "wavelets")}
    flags |= {name: getattr(args, name) for name in VIEWS[hw.kind].flags}  # the flags only its kind reads
    return write_records(args.out, "kernel", getattr(args, "argv", None),
                         {KERNELS_CSV: [flat({k: v for k, v in r.items() if k != "png"}) for r in runs]},
                         overrides={**flags, "set": list(args.set or [])},
                         hardware=hw.model_dump(mode="json"))


def _algorithm_help() -> str:
    """Each kind's algorithms, its default marked where it has a choice: "gemm: summa (default), …"."""
    def named(kind: KernelKind) -> str:
        choices = algorithms(kind)
        return ", ".join(f"{a} (default)" if a == DEFAULT_ALGORITHM[kind] and len(choices) > 1 else a
                         for a in choices)

    return "; ".join(f"{kind}: {named(kind)}" for kind in KernelKind)


def register(sub: Any, commands: dict[str, Any]) -> None:
    p = sub.add_parser("kernel", help="simulate a GEMM, GEMV or collective on a grid of PEs or on GPUs",
                       description=__doc__.split("\n\n", 1)[0])
    p.add_argument("kind", choices=[*(k.value for k in KernelKind), *GPU_ONLY],
                   help=f"the kernel ({', '.join(GPU_ONLY)}: on a GPU preset only)")
    p.add_argument("--hardware", default="wse2", metavar="NAME|FILE",
                   help="a hardware preset or file (default wse2)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a hardware key (repeatable)")
    p.add_argument("--grid", metavar="PxQ[,...]",
                   help="rows x columns of PEs (default: the whole mesh); on a GPU, nodes x GPUs a node")
    p.add_argument("--shape", metavar="MxKxN[,...]", help="GEMM M x K x N; GEMV 1 x K x N")
    p.add_argument("--dtype", metavar="fp16|fp32[,...]",
                   help="data type (default fp16; on a GPU bf16, and fp16, fp8, tf32, fp32)")
    p.add_argument("--algorithm", metavar="NAME[,...]", help=_algorithm_help())
    p.add_argument("--wavelets", metavar="B[,...]", help="collectives: 32-bit wavelets per PE (default 1); "
                   "on a GPU, values of --dtype per GPU (collectives and elementwise)")
    p.add_argument("--experts", metavar="E[,...]",
                   help="GPU grouped-gemm: experts, each with M tokens (default 1)")
    p.add_argument("--heads", metavar="H[/KV]", help="GPU attention: query heads and the KV heads they share")
    p.add_argument("--causal", action=argparse.BooleanOptionalAction, default=True,
                   help="GPU attention: causal mask (default) or not")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="GPU: replayed from a CUDA graph, no launch cost (runtime.kernel_launch)")
    p.add_argument("--json", action="store_true", help="print one JSON object (a top-level cycles key)")
    p.add_argument("--png", metavar="DIR",
                   help="draw each run's link map (wavelets per link) as a wafer picture in DIR")
    p.add_argument("--out", metavar="DIR",
                   help=f"write DIR/{KERNELS_CSV} (one row per run, every field of --json) and "
                        "DIR/manifest.json")
    commands["kernel"] = _cmd_kernel
