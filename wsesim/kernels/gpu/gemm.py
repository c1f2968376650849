"""GEMM and grouped GEMM on a GPU as thread-block tiles in waves over the SMs (docs/model.md §13.2, which
gives the formulas and a worked case).

C = A·B is cut into ``tm × tn`` output tiles, walked along K in stages of ``tk``; the tiles run in waves
of at most ``sms`` (wave and tile quantization both counted). A wave takes the longer of one tile's
arithmetic and its HBM traffic: the distinct panels of A and B its tiles read (tiles rasterized in
swizzled panels of ``SWIZZLE`` rows; the L2 serves a panel to every tile of the wave sharing it, and keeps
some of the wave before), and the C tiles it writes. So a GEMM with few rows reads all its weights at HBM
bandwidth whatever its arithmetic. Fewer tiles than SMs split K (split-K); the tile shape is the fastest
of the large ones when they fill the SMs, else of all (``_best``), as a library's heuristic picks. A
grouped GEMM (``grouped``) runs E problems, each against its own expert's weights, with one tile shape in
one launch (a persistent grouped kernel), without split-K.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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
"""Tiles a GEMM may have here (every tile is placed, as arrays: some seconds at most)."""

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


def _tiles(problems: Sequence[int], rows: Sequence[int], cols: int, tm: int, tn: int,
           n: int) -> tuple[np.ndarray, ...]:
    """Every tile in launch order, as arrays: its A row panel and B column panel (numbered over all the
    problems), its rows and columns of output (a last tile's fewer). Each problem's tiles are rasterized as
    CUTLASS's swizzle does: panels of ``SWIZZLE`` tile rows, walked column by column, down each column's
    rows."""
    sizes = np.asarray(rows, dtype=np.int64) * cols
    problem = np.repeat(np.arange(len(problems)), sizes)
    t = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    panel, rest = np.divmod(t, SWIZZLE * cols)
    height = np.minimum(SWIZZLE, np.asarray(rows, dtype=np.int64)[problem] - panel * SWIZZLE)
    column, row = np.divmod(rest, height)
    i = panel * SWIZZLE + row
    first_row = np.cumsum(rows) - np.asarray(rows)
    a_panel = first_row[problem] + i
    b_panel = problem * cols + column
    return (a_panel, b_panel, np.minimum(tm, np.asarray(problems, dtype=np.int64)[problem] - i * tm),
            np.minimum(tn, n - column * tn))


def _wave_bytes(wave: np.ndarray, panel: np.ndarray, nbytes: np.ndarray, panels: int,
                waves: int) -> tuple[np.ndarray, np.ndarray]:
    """Per wave, the bytes of the distinct panels its tiles read, and of those the wave before read too."""
    key, first = np.unique(wave * panels + panel, return_index=True)
    size = nbytes[first]
    read = np.bincount(key // panels, weights=size, minlength=waves)
    before = key - panels  # the same panel in the wave before (the keys are sorted: found by bisection)
    at = np.minimum(np.searchsorted(key, before), len(key) - 1)
    again = (key[at] == before) & (key >= panels)
    return read, np.bincount(key[again] // panels, weights=size[again], minlength=waves)


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
                          "large takes too long to place every tile here", path="shape")
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
    a_panel, b_panel, height, width = _tiles(problems, rows, cols, tm, tn, n)
    wave = np.arange(tiles, dtype=np.int64) // gpu.sms
    a_read, a_held = _wave_bytes(wave, a_panel, height * k * a_b, sum(rows), waves)
    b_read, b_held = _wave_bytes(wave, b_panel, width * k * a_b, len(problems) * cols, waves)
    out = np.bincount(wave, weights=height * width * c_b, minlength=waves)
    # the L2 still holds what the wave before read, as far as it holds it (every figure a whole number of
    # bytes, exact in float64)
    kept = np.minimum(gpu.l2_bytes, a_held + b_held)
    for nbytes in (a_read + b_read - kept + out).tolist():
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
