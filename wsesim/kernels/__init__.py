"""Kernels on the mesh (docs/model.md §10): GEMM, GEMV and collectives as schedules of steps over a grid of
PEs — SIMD work per PE, wavelets over ramps and links, hop and ramp latency, SRAM per PE checked.

The layer between ``fabric`` and ``sim``: it imports config, model and fabric only, never prints or
writes. The names below are imported on first use, so ``import wsesim.kernels.kinds`` (the kinds and
algorithms the CLI lists when it builds its parser) stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    **{name: "kinds" for name in ("DEFAULT_ALGORITHM", "Algorithm", "AlltoallAlgorithm", "BroadcastAlgorithm",
                                  "GemmAlgorithm", "GemvAlgorithm", "KernelKind", "ReduceAlgorithm",
                                  "algorithms")},
    "KernelCost": "cost", "kernel_cost": "cost", "LinkMap": "linkmap", "T_OP": "machine",
    "Machine": "machine",
    "run_kernel": "registry", "KernelResult": "result", "LinkSummary": "result",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
