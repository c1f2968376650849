"""Every kernel by kind and algorithm name: ``run_kernel`` is the one entry point (the CLI's and the
validation table's). An unknown kind or algorithm is a ``ConfigError`` that lists the valid names."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import numpy as np

from ..config.errors import ConfigError
from ..config.specs import HardwareSpec
from . import collectives as coll
from .gemm import GEMM_ALGORITHMS
from .gemv import GEMV_ALGORITHMS
from .lines import ring_order
from .machine import Machine
from .result import KernelResult
from .routes import routes_needed, skew_routes_needed

KINDS = ("gemm", "gemv", "reduce", "allreduce", "broadcast", "alltoall")
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "gemm": tuple(GEMM_ALGORITHMS), "gemv": tuple(GEMV_ALGORITHMS), "reduce": coll.REDUCE_ALGORITHMS,
    "allreduce": coll.ALLREDUCE_ALGORITHMS, "broadcast": ("multicast",), "alltoall": ("transpose",)}
"""Algorithm names per kind, the first the default."""
DEFAULT_ALGORITHM = {"gemm": "summa", "gemv": "meshgemv", "reduce": "chain", "allreduce": "chain",
                     "broadcast": "multicast", "alltoall": "transpose"}

_COLLECTIVES: dict[str, Callable[..., KernelResult]] = {
    "reduce": coll.run_reduce, "allreduce": coll.run_allreduce, "broadcast": coll.run_broadcast,
    "alltoall": coll.run_alltoall}


def check_choice(kind: str, algorithm: str) -> None:
    if kind not in KINDS:
        raise ConfigError(f"expected one of {', '.join(KINDS)}, got \"{kind}\"", path="kind")
    if algorithm not in ALGORITHMS[kind]:
        raise ConfigError(f"expected one of {', '.join(ALGORITHMS[kind])} for {kind}, got \"{algorithm}\"",
                          path="algorithm")


def _line_colours(algorithm: str, n: int) -> int:
    """Colours a reduce tree over a line of n PEs needs at one router: a chain alternates two (a PE's
    input and output), a star merges every stream on one, the binary tree one per level, two-phase two
    chains, the ring one per direction."""
    if n < 2:
        return 0
    return {"chain": 2, "star": 1, "tree": math.ceil(math.log2(n)), "two-phase": 4, "ring": 2}[algorithm]


def colours_needed(kind: str, algorithm: str, rows: int, cols: int) -> int:
    """Routable colours per router: the rows' and the columns' trees each need their own; an allreduce
    adds one for the multicast back; SUMMA's two multicasts, Cannon's and MeshGEMM's two shifts, each
    double-buffered, four."""
    if kind == "gemm":
        return 4
    if kind == "gemv":
        return _line_colours("chain" if algorithm == "pipeline" else "two-phase", cols) + 1
    if kind in ("broadcast",):
        return 1
    if kind == "alltoall":
        return 2 * ((rows > 1) + (cols > 1))  # east and west, north and south
    both = _line_colours(algorithm, rows) + _line_colours(algorithm, cols)
    return both + (kind == "allreduce" and algorithm != "ring")


def run_kernel(hw: HardwareSpec, kind: str, rows: int, cols: int, *, dtype: str = "fp16",
               algorithm: str | None = None, shape: tuple[int, int, int] | None = None,
               wavelets: int = 1) -> KernelResult:
    """Simulate one kernel on a rows × cols grid of ``hw``'s PEs. GEMM and GEMV take ``shape``
    (M, K, N; a GEMV's M is 1); the collectives take ``wavelets`` per PE."""
    algorithm = algorithm or DEFAULT_ALGORITHM.get(kind, "")
    check_choice(kind, algorithm)
    m = Machine.of(hw, dtype)
    if kind in ("gemm", "gemv"):
        if shape is None:
            raise ConfigError(f"{kind} needs a shape M x K x N", path="shape")
        table = GEMM_ALGORITHMS if kind == "gemm" else GEMV_ALGORITHMS
        r = table[algorithm](m, rows, cols, shape)
    else:
        r = partial(_COLLECTIVES[kind], hw, m)(rows, cols, wavelets, algorithm)
    colours = colours_needed(kind, algorithm, rows, cols)
    routes = routes_needed(kind, algorithm, rows, cols)
    r = replace(r, colours=colours, routes=routes)
    if kind == "gemm" and algorithm != "summa" and rows == cols:
        skew = skew_routes_needed(rows, np.arange(rows) if algorithm == "cannon" else ring_order(rows))
        if skew > m.route_paths:
            r = replace(r, notes=(*r.notes, f"the skew as direct paths would need {skew} routes at its busiest "
                                  f"router, more than the {m.route_paths} of fabric.route_paths: not counted "
                                  "(laid out skewed as the operands load, or relayed)"))
    if colours > m.colours and r.feasible:
        return replace(r, feasible=False, reason=f"needs {colours} routable colours per router, "
                       f"more than the {m.colours} of {m.name} (fabric.colours)")
    if routes > m.route_paths and r.feasible:
        return replace(r, feasible=False, reason=f"needs {routes} routes at its busiest router, more than the "
                       f"{m.route_paths} of {m.name} (fabric.route_paths)")
    return r
