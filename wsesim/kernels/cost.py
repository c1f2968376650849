"""The one cached front door to the kernel layer for the cost pass: what a kernel of a kind, shape,
grid, dtype and algorithm costs, with its split (``kernel_cost``). Training's ``compute: kernel`` and
every serving kernel ask it; ``run_kernel`` (the CLI's entry) is what it runs on a miss.

A GEMV's cycles depend on K and N only through each PE's block (⌈K/Q⌉ values of x along a row of Q PEs,
⌈N/P⌉ outputs down a column of P), and a SUMMA GEMM's on M and N only through ⌈M/P⌉ and ⌈N/Q⌉, so those
shapes are rounded up to whole blocks before the lookup (``whole_blocks``): a step or a decode run asks
for a few dozen distinct simulations, not one per token count. Cannon and MeshGEMM are looked up as
given (their skew depends on the whole shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..config.specs import HardwareSpec

__all__ = ["KernelCost", "kernel_cost", "lanes_dtype", "whole_blocks"]


@dataclass(frozen=True, slots=True)
class KernelCost:
    """A kernel's cycles and their split along the critical path (``overhead`` instruction issue,
    ``compute`` arithmetic, ``communication`` wavelets; the rest waiting), and whether it fits
    (``reason`` if not: the cycles are then the schedule's as if it fitted, for a caller that says so)."""

    cycles: float
    compute: float
    communication: float
    feasible: bool = True
    reason: str = ""
    overhead: float = 0.0  # instruction issue on the critical path (``pe.instruction_issue`` each)
    # what the kernel does, summed over its PEs and links (for its energy, ``model.energy``)
    fmacs: float = 0.0  # multiply-accumulates (a GEMM's or GEMV's FLOPs / 2)
    wavelet_hops: float = 0.0  # wavelets times the router hops each crossed (the link map's total)

    @property
    def bound(self) -> str:
        """``"compute"`` when arithmetic is at least half the critical path, else ``"communication"``."""
        return "compute" if self.compute >= self.cycles / 2 else "communication"


def lanes_dtype(bytes_per_value: int) -> str:
    """The kernel dtype a model's values run as: fp32 on its own lanes, 16-bit (bf16 or fp16) as fp16."""
    return "fp32" if bytes_per_value == 4 else "fp16"


def whole_blocks(kind: str, algorithm: str, rows: int, cols: int,
                 shape: tuple[int, int, int]) -> tuple[int, int, int]:
    """``shape`` rounded up to whole blocks per PE where the kernel's cycles depend only on the blocks:
    a GEMV's K over the columns and N over the rows; a SUMMA GEMM's M over the rows and N over the
    columns; a streamed GEMM's tokens over the rows. Any other kernel's shape as it is."""
    m, k, n = shape
    if kind == "gemv":
        return m, -(-k // cols) * cols, -(-n // rows) * rows
    if kind == "gemm" and algorithm == "summa":
        return -(-max(m, 1) // rows) * rows, k, -(-max(n, 1) // cols) * cols
    if kind == "gemm" and algorithm == "stream":  # M through ⌈M/R⌉ (K and N as given: the edge's bytes)
        return -(-max(m, 1) // rows) * rows, k, n
    if kind == "gemm" and algorithm == "stream-dw":  # the tokens, K', through ⌈K'/R⌉
        return m, -(-max(k, 1) // rows) * rows, n
    return shape


@lru_cache(maxsize=65536)
def _cached(hw: HardwareSpec, kind: str, rows: int, cols: int, dtype: str, algorithm: str,
            shape: tuple[int, int, int] | None, wavelets: int, staged: bool) -> KernelCost:
    # local: the kernels themselves only when one is costed (a training step under ``compute: constant``
    # costs none)
    from .registry import run_kernel

    r = run_kernel(hw, kind, rows, cols, dtype=dtype, algorithm=algorithm, shape=shape, wavelets=wavelets,
                   staged=staged)
    return KernelCost(r.cycles, r.compute, r.communication, r.feasible, r.reason, r.overhead,
                      fmacs=r.flops / 2, wavelet_hops=r.links.wavelet_hops)


def kernel_cost(hw: HardwareSpec, kind: str, rows: int, cols: int, *, dtype: str, algorithm: str,
                shape: tuple[int, int, int] | None = None, wavelets: int = 1,
                staged: bool = False) -> KernelCost:
    """The cost of one kernel on a ``rows`` × ``cols`` grid of ``hw``'s PEs (cached; ``hw`` is frozen
    and hashable, so overrides are entries of their own). GEMM and GEMV take ``shape`` (M, K, N; a
    GEMV's M is 1), rounded by ``whole_blocks``; the collectives ``wavelets`` per PE. ``dtype`` "fp16"
    (bf16 runs on the same lanes) or "fp32". Raises ``ConfigError`` for an unknown kind or algorithm,
    a grid larger than the mesh or a non-positive size. ``staged``: a streamed GEMM's operands are on the
    wafer already (``run_kernel``)."""
    if shape is not None:
        shape = whole_blocks(kind, algorithm, rows, cols, shape)
    return _cached(hw, kind, rows, cols, "fp16" if dtype == "bf16" else dtype, algorithm, shape, wavelets,
                   staged)


kernel_cost.cache_info = _cached.cache_info  # type: ignore[attr-defined]
kernel_cost.cache_clear = _cached.cache_clear  # type: ignore[attr-defined]
