"""GEMM and grouped GEMM on a GPU as thread-block tiles in waves over the SMs (docs/model.md §13.2).

C[M×N] = A[M×K]·B[K×N] is cut into output tiles of ``tm × tn``; each SM computes one tile at a time,
walking K in steps of ``tk`` (128 bytes of K a stage). The tiles run in waves of at most ``sms`` — a
wave's tiles run side by side, and the next wave starts when it ends — so ``ceil(tiles / sms)`` waves,
the last one partly empty (wave quantization), and every tile a whole ``tm × tn`` however few rows or
columns it has (tile quantization). A wave takes the longer of its arithmetic, one tile's
``2·tm·tn·K / r_sm``, and its HBM traffic over the GPU's bandwidth: the distinct row panels of A and
column panels of B its tiles read (the L2 serves a panel to every tile of the wave that shares it; the
tiles are rasterized in swizzled panels of ``SWIZZLE`` rows so that a wave's tiles share panels), less
what the wave before left in the L2, and the C tiles it writes. So a GEMM with few rows reads all its
weights at HBM bandwidth whatever its arithmetic: an expert with 16 tokens pays for its whole weight matrix.

When a GEMM has fewer tiles than SMs, K is split (split-K) so that ``tiles × s`` ≤ SMs fill the GPU;
each split writes an fp32 partial that is read back once to sum. The tile shape is the fastest of the
large ones when they fill the SMs, else of all (``_best``), as a library's heuristic picks its kernels.
A grouped GEMM (``grouped``) runs E problems with one tile shape in one launch, their tiles in sequence
over the SMs (a persistent grouped kernel), without split-K; each problem's B is its own expert's weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ...config.errors import ConfigError
from .device import Gpu, GpuKernelResult

__all__ = ["TILES", "TileCost", "gemm", "grouped", "tile_cost"]

TILES: tuple[tuple[int, int], ...] = ((128, 256), (256, 128), (128, 128), (64, 256), (64, 128), (64, 64))
"""The output tiles (tm, tn) the GEMM may use: Hopper's and Blackwell's common CUTLASS/cuBLAS shapes,
the largest first; 64 is the smallest M a warpgroup's MMA takes."""

LARGE_TILE = 128 * 128
"""The smallest tile area a large GEMM runs in (``_best``)."""

STAGE_BYTES = 128
"""Bytes of K one pipeline stage loads per row (64 16-bit values): K is padded to whole stages."""

SWIZZLE = 8
"""Tile rows a rasterized wave walks down before the next column (CUTLASS's threadblock swizzle), so a
wave's tiles share few rows of A and few columns of B, and the L2 serves them to each other."""

MAX_TILES = 2_000_000
"""Tiles a GEMM may have here (each wave's tiles are walked one by one: some seconds at most)."""

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


def _tile(t: int, rows: int, cols: int) -> tuple[int, int]:
    """Tile ``t``'s (row, column) in a problem of ``rows`` x ``cols`` tiles, rasterized as CUTLASS's
    swizzle does: panels of ``SWIZZLE`` tile rows, walked column by column, down each column's rows."""
    panel, rest = divmod(t, SWIZZLE * cols)
    height = min(SWIZZLE, rows - panel * SWIZZLE)
    column, row = divmod(rest, height)
    return panel * SWIZZLE + row, column


def tile_cost(gpu: Gpu, problems: Sequence[int], k: int, n: int, tile: tuple[int, int], *,
              split: bool = True) -> TileCost:
    """The schedule of GEMMs with ``problems`` rows each (M of each; one entry for a plain GEMM), all
    ``k`` deep and ``n`` wide, in ``tile`` = (tm, tn) tiles over ``gpu``'s SMs. ``split``: allow split-K
    when there are fewer tiles than SMs (a plain GEMM)."""
    tm, tn = tile
    tk = max(1, STAGE_BYTES // gpu.elem_bytes)
    steps = math.ceil(k / tk)
    cols = math.ceil(n / tn)
    rows = [math.ceil(m / tm) for m in problems]
    tiles = sum(rows) * cols
    if tiles > MAX_TILES:
        raise ConfigError(f"expected at most {MAX_TILES:,} tiles of {tm} x {tn}, got {tiles:,}: a GEMM this "
                          "large takes too long to schedule tile by tile here", path="shape")
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
    problem, first = 0, 0  # the problem the next tile is in, and that problem's first tile
    held: dict[tuple[str, int, int], float] = {}  # the previous wave's panels, and their bytes
    for w in range(waves):
        panels: dict[tuple[str, int, int], float] = {}
        out = 0.0
        for t in range(w * gpu.sms, min((w + 1) * gpu.sms, tiles)):
            while t >= first + rows[problem] * cols:
                first += rows[problem] * cols
                problem += 1
            i, j = _tile(t - first, rows[problem], cols)
            m = problems[problem]
            height, width = min(tm, m - i * tm), min(tn, n - j * tn)
            panels[("a", problem, i)] = height * k * a_b  # the rows of A the tile reads
            panels[("b", problem, j)] = width * k * a_b  # the columns of B
            out += height * width * c_b
        # the L2 still holds what the wave before read, as far as it holds it
        kept = min(gpu.l2_bytes, sum(v for key, v in panels.items() if key in held))
        nbytes = sum(panels.values()) - kept + out
        held = panels
        mem = nbytes / gpu.hbm_bytes_per_s
        total += nbytes
        if t_tile >= mem:
            compute += t_tile
        else:
            memory += mem
    return TileCost(tile, compute, memory, tiles, waves, 1, total)


def _best(gpu: Gpu, problems: Sequence[int], k: int, n: int, split: bool) -> TileCost:
    """The tile shape a library's heuristic would pick: the fastest of the large tiles (``LARGE_TILE``
    and up) when any of them fills every SM at least once — a smaller tile reuses each operand it loads
    over too little output to keep the tensor cores fed from the L2 (traffic not modelled, so this rule
    stands for it) — else the fastest of all, split-K among them (the first listed on a tie)."""
    costs = [tile_cost(gpu, problems, k, n, t, split=split) for t in TILES]
    large = [c for c in costs if c.tile[0] * c.tile[1] >= LARGE_TILE]
    if any(c.tiles >= gpu.sms for c in large):
        costs = large
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
