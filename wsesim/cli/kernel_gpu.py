"""``wsesim kernel`` on a GPU preset (``kind: gpu``, docs/model.md §13): the same flags read as a GPU
reads them — ``--grid NODESxGPUS`` (a collective's; the compute kernels run on 1x1), ``--shape`` a
GEMM's MxKxN, a grouped GEMM's tokens-per-expert x K x N (``--experts``), attention's BATCHxSEQxHEAD_DIM
and decode attention's BATCHxCONTEXTxHEAD_DIM (``--heads H/KV``), ``--wavelets`` an element-wise
kernel's or a collective's values of ``--dtype`` per GPU, ``--cuda-graphs`` no launch cost."""

from __future__ import annotations

import argparse
import itertools
import re
from typing import Any

from ..config.errors import ConfigError, shown
from ..config.fields import parse_grid, parse_shape
from .common import format_table

_COUNT = re.compile(r"[0-9]{1,15}", re.ASCII)  # ASCII digits only: "²" and "٣" are no numbers here
_HEADS = re.compile(r"([0-9]{1,6})(?:/([0-9]{1,6}))?", re.ASCII)
MAX_GPU_RUNS = 10_000
SHAPED = ("gemm", "gemv", "grouped-gemm", "attention", "decode-attention")
_EXAMPLE = {"gemm": "8192x8192x8192", "gemv": "1x8192x8192", "grouped-gemm": "16x2048x768",
            "attention": "1x8192x128", "decode-attention": "64x4096x128"}


def split_list(text: str | None) -> list[str]:
    """A flag's comma-list (``--grid 420x420,720x720``), blanks dropped; [] for a flag not given."""
    return [t.strip() for t in (text or "").split(",") if t.strip()]


def positive_count(text: str, flag: str) -> int:
    """A count given to ``flag``: a positive integer of at most 15 ASCII digits (never "²" or "٣")."""
    if not _COUNT.fullmatch(text) or int(text) <= 0:
        raise ConfigError(f'expected a positive integer of ASCII digits (at most 15), got "{shown(text)}"',
                          path=flag)
    return int(text)


def _heads(text: str | None) -> tuple[int, int]:
    """``--heads 64/8`` -> (64, 8): query heads, and the KV heads they share (absent: as many)."""
    m = _HEADS.fullmatch((text or "1").strip())
    if not m or int(m.group(1)) <= 0 or (m.group(2) is not None and int(m.group(2)) <= 0):
        raise ConfigError(f'expected H or H/KV heads like "64/8", got "{shown(text or "")}"', path="--heads")
    return int(m.group(1)), int(m.group(2) or 0)


def _grid(text: str) -> tuple[int, int]:
    """``--grid 2x8`` on a GPU: nodes x GPUs a node (``config.fields.parse_grid``; an error is the flag's)."""
    try:
        return parse_grid(text, path="--grid")
    except ConfigError:
        raise ConfigError(f'expected NODESxGPUS like "2x8", got "{shown(text)}"', path="--grid") from None


def gpu_runs(args: argparse.Namespace, hw: Any) -> list[Any]:
    """Every run of the comma-lists' product on the GPU ``hw``, in order (``kernels.gpu.run_gpu_kernel``)."""
    # local: the kernel layer, not loaded at every command's start
    from ..kernels.gpu.registry import COMPUTE_KINDS, gpu_algorithm, run_gpu_kernel

    kind = args.kind
    if args.png:
        raise ConfigError(f"{hw.name} is a GPU: it has no mesh links to draw (--png is a wafer's)",
                          path="--png")
    gpu_algorithm(kind, None)  # a kind only a wafer runs: refused before anything else
    default = "1x1" if kind in COMPUTE_KINDS else f"1x{hw.node.gpus}"
    grids = [_grid(g) for g in split_list(args.grid) or [default]]
    shapes: list[Any] = [parse_shape(s, path="--shape") for s in split_list(args.shape)] or [None]
    if kind in SHAPED and shapes == [None]:
        raise ConfigError(f"{kind} needs a shape, e.g. --shape {_EXAMPLE[kind]}", path="--shape")
    dtypes = split_list(args.dtype) or ["bf16"]
    algorithms = split_list(args.algorithm) or [""]
    values = [positive_count(w, "--wavelets") for w in split_list(args.wavelets) or ["1"]]
    experts = [positive_count(e, "--experts") for e in split_list(args.experts) or ["1"]]
    heads, kv_heads = _heads(args.heads)
    combos = list(itertools.islice(itertools.product(grids, shapes, dtypes, algorithms, values, experts),
                                   MAX_GPU_RUNS + 1))
    if len(combos) > MAX_GPU_RUNS:
        raise ConfigError(f"expected at most {MAX_GPU_RUNS:,} runs (the product of the comma-lists): split "
                          "them into several commands", path="--shape")
    out = []
    for (nodes, gpus), shape, dtype, algorithm, n, e in combos:
        try:
            out.append(run_gpu_kernel(hw, kind, nodes, gpus, dtype=dtype, algorithm=algorithm, shape=shape,
                                      values=n, experts=e, heads=heads, kv_heads=kv_heads,
                                      causal=args.causal, graphs=args.cuda_graphs))
        except ConfigError as err:
            if err.source is None and err.path in ("grid", "shape", "dtype", "algorithm", "heads"):
                raise ConfigError(err.message, path=f"--{err.path}") from None
            raise
    return out


def _what(r: dict[str, Any]) -> str:
    s, kind = r["shape"], r["kind"]
    if kind in ("gemm", "gemv"):
        return f"{s['m']} x {s['k']} x {s['n']} {r['dtype']}"
    if kind == "grouped-gemm":
        return f"{s['experts']} experts of {s['m']} tokens, {s['k']} x {s['n']} weights, {r['dtype']}"
    if kind in ("attention", "decode-attention"):
        length = "seq" if kind == "attention" else "context"
        return (f"batch {s['batch']}, {length} {s[length]:,}, {s['heads']} heads ({s['kv_heads']} KV) of "
                f"{s['head_dim']}, {r['dtype']}")
    return f"{s['values']:,} {r['dtype']} values per GPU"


def gpu_human(r: dict[str, Any]) -> str:
    """One GPU run, as ``wsesim kernel`` prints one wafer run: what ran, its time, its split, its schedule."""
    g, cp, sc = r["grid"], r["critical_path"], r["schedule"]
    where = ("one GPU" if (g["rows"], g["cols"]) == (1, 1)
             else f"{g['rows']} x {g['cols']} GPUs (nodes x GPUs)")
    lines = [f"{r['hardware']} {r['kind']} ({r['algorithm']}) on {where}, {_what(r)}",
             f"{r['seconds'] * 1e6:,.3f} us = {r['cycles']:,.0f} cycles"
             + (f"; {r['flops_per_s'] / 1e12:,.1f} TFLOP/s, {100 * r['efficiency']:.1f} % of the datasheet's "
                "dense peak" if r["flops"] else ""),
             f"time: launch {cp['launch'] * 1e6:,.3f}, compute {cp['compute'] * 1e6:,.3f}, memory "
             f"{cp['memory'] * 1e6:,.3f}, communication {cp['communication'] * 1e6:,.3f} us "
             f"({sc['bound']}-bound)"]
    if sc["tiles"]:
        lines.append(f"schedule: {sc['tiles']:,} tiles of {sc['tile_m']} x {sc['tile_n']} in {sc['waves']:,} "
                     f"wave{'s' if sc['waves'] > 1 else ''}"
                     + (f", split-K {sc['split_k']}" if sc["split_k"] > 1 else ""))
    if r["hbm_bytes"]:
        lines.append(f"HBM: {r['hbm_bytes'] / 1e6:,.2f} MB read and written")
    if r["link_bytes"]:
        lines.append(f"links: {r['link_bytes'] / 1e6:,.2f} MB sent by each GPU")
    return "\n".join(lines + [f"note: {n}" for n in r["notes"]])


def gpu_table(runs: list[dict[str, Any]]) -> str:
    """A sweep's GPU runs, one line each."""
    rows = [(f"{r['grid']['rows']}x{r['grid']['cols']}", _what(r), r["algorithm"],
             f"{r['seconds'] * 1e6:,.3f}",
             f"{r['flops_per_s'] / 1e12:,.1f}" if r["flops"] else "n/a",
             f"{100 * r['efficiency']:.1f}" if r["flops"] else "n/a", r["schedule"]["waves"] or "-",
             r["schedule"]["bound"]) for r in runs]
    return format_table(rows, ("grid", "what", "algorithm", "us", "TFLOP/s", "eff %", "waves", "bound"),
                        left=(0, 1, 2, 7))
