"""Kernels on the mesh (docs/model.md §10): GEMM, GEMV and collectives as schedules of steps over a grid of
PEs — SIMD work per PE, wavelets over ramps and links, hop and ramp latency, SRAM per PE checked.

The layer between ``fabric`` and ``sim``: it imports config and fabric only, never prints or writes.
"""

from .cost import KernelCost, kernel_cost
from .linkmap import LinkMap
from .machine import T_OP, Machine
from .registry import ALGORITHMS, DEFAULT_ALGORITHM, KINDS, run_kernel
from .result import KernelResult, LinkSummary

__all__ = ["ALGORITHMS", "DEFAULT_ALGORITHM", "KINDS", "T_OP", "KernelCost", "KernelResult", "LinkMap",
           "LinkSummary", "Machine", "kernel_cost", "run_kernel"]
