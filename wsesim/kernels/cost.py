"""The kernel model as a cost function for the training step (issue 18, ``simulation.compute: kernel``).

``gemm_cycles(hw, m, k, n, rows, cols, dtype)`` is what an op of shape M × K × N costs on a region of
rows × cols PEs; it is cached per argument tuple (a step repeats a handful of shapes), and a new shape
takes well under a millisecond for SUMMA, ~0.1 s for Cannon and MeshGEMM on a ~750-PE side (their skew's
link loads), so the default algorithm is SUMMA (it runs on any rectangle and its step count does not
depend on the region's shape being square).
"""

from __future__ import annotations

from functools import lru_cache

from ..config.specs import HardwareSpec
from .gemm import GEMM_ALGORITHMS
from .machine import Machine


@lru_cache(maxsize=65536)
def gemm_cycles(hw: HardwareSpec, m: int, k: int, n: int, rows: int, cols: int, dtype: str = "fp16",
                algorithm: str = "summa") -> tuple[float, str]:
    """Cycles of C[m×n] = A[m×k] · B[k×n] on a ``rows`` × ``cols`` grid of ``hw``'s PEs, and what bounds it.

    Contract:

    * ``hw`` is a ``HardwareSpec`` (frozen, hashable: the cache key includes it, so overrides are
      separate entries); ``m``, ``k``, ``n``, ``rows``, ``cols`` positive ints with ``rows`` ≤
      ``hw.mesh.rows`` and ``cols`` ≤ ``hw.mesh.cols``; ``dtype`` "fp16" (bf16: pass "fp16", the same
      lanes) or "fp32"; ``algorithm`` one of ``GEMM_ALGORITHMS`` (summa, cannon, meshgemm).
    * Returns ``(cycles, bound)``: ``cycles`` a float ≥ 0, the kernel alone (no task launch overhead:
      the caller adds ``runtime.task_overhead`` if it wants it); ``bound`` is ``"compute"`` when the
      critical path is mostly arithmetic, ``"communication"`` when mostly wavelets, or
      ``"infeasible: <reason>"`` when the blocks do not fit a PE's SRAM (or Cannon/MeshGEMM on a
      non-square grid): the cycles are then those of the schedule as if it fitted, so a caller may
      still use them, but should say so.
    * Deterministic, pure, never prints; raises ``ConfigError`` for a grid larger than the mesh, a
      non-positive size, an unknown dtype or algorithm (the message lists the valid names).
    """
    from ..config.errors import ConfigError

    if algorithm not in GEMM_ALGORITHMS:
        raise ConfigError(f"expected one of {', '.join(GEMM_ALGORITHMS)}, got \"{algorithm}\"", path="algorithm")
    r = GEMM_ALGORITHMS[algorithm](Machine.of(hw, "fp16" if dtype == "bf16" else dtype), rows, cols, (m, k, n))
    if not r.feasible:
        return r.cycles, f"infeasible: {r.reason}"
    return r.cycles, "compute" if r.compute >= r.cycles / 2 else "communication"
