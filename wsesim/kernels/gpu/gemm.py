"""GEMM and grouped GEMM on a GPU as thread-block tiles in waves over the SMs (docs/model.md §13.2).

C[M×N] = A[M×K]·B[K×N] is cut into output tiles of ``tm × tn``; each SM computes one tile at a time,
walking K in steps of ``tk`` (128 bytes of K a stage). The tiles run in waves of at most ``sms`` — a
wave's tiles run side by side, and the next wave starts when it ends — so ``ceil(tiles / sms)`` waves,
the last one partly empty (wave quantization), and every tile a whole ``tm × tn`` however few rows or
columns it has (tile quantization). A wave takes the longer of its arithmetic, one tile's
``2·tm·tn·K / r_sm``, and its HBM traffic over the GPU's bandwidth: the distinct row panels of A and
column panels of B its tiles read (the L2 serves a panel to every tile of the wave that shares it) and
the C tiles it writes. So a GEMM with few rows reads all its weights at HBM bandwidth whatever its
arithmetic: an expert with 16 tokens pays for its whole weight matrix.

When a GEMM has fewer tiles than SMs, K is split (split-K) so that ``tiles × s`` ≤ SMs fill the GPU;
each split writes an fp32 partial that is read back once to sum. The tile shape is the one of
``TILES`` that finishes first, as a library's heuristic picks among its kernels. A grouped GEMM
(``grouped``) runs E problems with one tile shape in one launch, their tiles in sequence over the SMs
(a persistent grouped kernel), without split-K; each problem's B is its own expert's weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .device import Gpu, GpuKernelResult

__all__ = ["TILES", "TileCost", "gemm", "grouped", "tile_cost"]

TILES: tuple[tuple[int, int], ...] = ((128, 256), (256, 128), (128, 128), (64, 256), (64, 128), (64, 64))
"""The output tiles (tm, tn) the GEMM may use: Hopper's and Blackwell's common CUTLASS/cuBLAS shapes,
the largest first; 64 is the smallest M a warpgroup's MMA takes."""

STAGE_BYTES = 128
"""Bytes of K one pipeline stage loads per row (64 16-bit values): K is padded to whole stages."""

PARTIAL_BYTES = 4
"""An fp32 partial sum of split-K, written by each split and read back once to add them."""


@dataclass(frozen=True)
class TileCost:
    """One tile shape's schedule of a GEMM: its time split between waves bound by arithmetic
    (``compute``) and by HBM (``memory``), its tiles, waves, split-K and HBM bytes."""

    tile: tuple[int, int]
    compute: float
    memory: float
    tiles: int
    waves: int
    split_k: int
    hbm_bytes: float

    @property
    def seconds(self) -> float:
        return self.compute + self.memory


def _span(t0: int, t1: int, cols: int) -> tuple[int, int]:
    """(tile rows, tile columns) that tiles ``t0 .. t1 - 1`` of a row-major grid ``cols`` wide touch."""
    rows = (t1 - 1) // cols - t0 // cols + 1
    if rows == 1:
        return 1, t1 - t0
    if rows == 2:
        return 2, min(cols, cols - t0 % cols + (t1 - 1) % cols + 1)
    return rows, cols


def tile_cost(gpu: Gpu, problems: Sequence[int], k: int, n: int, tile: tuple[int, int], *,
              split: bool = True) -> TileCost:
    """The schedule of GEMMs with ``problems`` rows each (M of each; one entry for a plain GEMM), all
    ``k`` deep and ``n`` wide, in ``tile`` = (tm, tn) tiles over ``gpu``'s SMs. ``split``: allow split-K
    when there are fewer tiles than SMs (a plain GEMM)."""
    tm, tn = tile
    tk = max(1, STAGE_BYTES // gpu.elem_bytes)
    steps = math.ceil(k / tk)
    cols = math.ceil(n / tn)
    per = [math.ceil(m / tm) * cols for m in problems]
    tiles = sum(per)
    s = min(gpu.sms // tiles, steps) if split and len(problems) == 1 and tiles < gpu.sms else 1
    k_tile = math.ceil(steps / s) * tk  # the K one unit of work walks
    t_tile = 2 * tm * tn * k_tile / gpu.sm_flops_per_s
    a_b, c_b = gpu.elem_bytes, gpu.out_bytes
    if s > 1:  # one wave: every panel once, each split's fp32 partial written and read back, C written
        m = problems[0]
        nbytes = (m * k + k * n) * a_b + 2 * tiles * s * tm * tn * PARTIAL_BYTES + m * n * c_b
        mem = nbytes / gpu.hbm_bytes_per_s
        return TileCost(tile, t_tile if t_tile >= mem else 0.0, mem if mem > t_tile else 0.0, tiles, 1, s,
                        nbytes)
    compute = memory = total = 0.0
    waves = math.ceil(tiles / gpu.sms)
    offsets = [0]
    for count in per:
        offsets.append(offsets[-1] + count)
    first = 0  # the first problem the wave may touch
    for w in range(waves):
        lo, hi = w * gpu.sms, min((w + 1) * gpu.sms, tiles)
        nbytes = 0.0
        e = first
        while e < len(problems) and offsets[e] < hi:
            a, b = max(lo, offsets[e]) - offsets[e], min(hi, offsets[e + 1]) - offsets[e]
            if b > a:
                rows, panels = _span(a, b, cols)
                m = problems[e]
                nbytes += (min(rows * tm, m) * k + min(panels * tn, n) * k) * a_b
                nbytes += min((b - a) * tm * tn, m * n) * c_b
            if offsets[e + 1] <= hi:
                first = e + 1
            e += 1
        mem = nbytes / gpu.hbm_bytes_per_s
        total += nbytes
        if t_tile >= mem:
            compute += t_tile
        else:
            memory += mem
    return TileCost(tile, compute, memory, tiles, waves, 1, total)


def _best(gpu: Gpu, problems: Sequence[int], k: int, n: int, split: bool) -> TileCost:
    """The tile shape of ``TILES`` that finishes first (the first listed on a tie)."""
    costs = [tile_cost(gpu, problems, k, n, t, split=split) for t in TILES]
    return min(costs, key=lambda c: c.seconds)


def _result(kind: str, gpu: Gpu, shape: tuple[int, ...], flops: float, c: TileCost, graphs: bool,
            notes: tuple[str, ...] = ()) -> GpuKernelResult:
    launch = gpu.launch(graphs)
    return GpuKernelResult(kind, "tiled", gpu, 1, 1, shape, launch + c.seconds, launch=launch,
                           compute=c.compute, memory=c.memory, flops=flops, hbm_bytes=c.hbm_bytes,
                           tiles=c.tiles, waves=c.waves, tile=c.tile, split_k=c.split_k, notes=notes)


def gemm(gpu: Gpu, m: int, k: int, n: int, *, graphs: bool = False, kind: str = "gemm") -> GpuKernelResult:
    """C[m×n] = A[m×k]·B[k×n] on one GPU (a GEMV is m = 1): the fastest tile shape's schedule."""
    c = _best(gpu, [m], k, n, split=True)
    return _result(kind, gpu, (m, k, n), 2.0 * m * k * n, c, graphs)


def grouped(gpu: Gpu, tokens: Sequence[int], k: int, n: int, *, graphs: bool = False) -> GpuKernelResult:
    """A grouped GEMM: one problem per expert, ``tokens[e]`` rows each against that expert's own k×n
    weights, in one launch (an MoE layer's experts). Experts with no tokens are skipped."""
    busy = [t for t in tokens if t > 0]
    shape = (max(tokens, default=0), k, n, len(tokens))
    if not busy:
        launch = gpu.launch(graphs)
        return GpuKernelResult("grouped-gemm", "tiled", gpu, 1, 1, shape, launch, launch=launch)
    c = _best(gpu, busy, k, n, split=False)
    notes = () if len(set(tokens)) == 1 else (f"tokens per expert from {min(tokens)} to {max(tokens)}",)
    return _result("grouped-gemm", gpu, shape, 2.0 * sum(busy) * k * n, c, graphs, notes)
