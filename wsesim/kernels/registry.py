"""Every kernel by kind and algorithm (``kinds``): ``run_kernel`` is the one entry point (the CLI's, the
serving model's and the validation table's). An unknown kind or algorithm is a ``ConfigError`` that lists
the valid names."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial

import numpy as np

from ..config.errors import ConfigError
from ..config.specs import HardwareSpec
from . import collectives as coll
from .gemm import GEMM_ALGORITHMS
from .gemv import GEMV_ALGORITHMS, ROW_TREES
from .kinds import MATMULS, Algorithm, GemmAlgorithm, KernelKind, ReduceAlgorithm, choice
from .lines import ring_order
from .machine import Machine
from .result import KernelResult
from .routes import routes_needed, skew_routes_needed

_MATMULS: dict[KernelKind, Mapping[Algorithm, Callable[..., KernelResult]]] = {
    KernelKind.GEMM: GEMM_ALGORITHMS, KernelKind.GEMV: GEMV_ALGORITHMS}
_COLLECTIVES: dict[KernelKind, Callable[..., KernelResult]] = {
    KernelKind.REDUCE: coll.run_reduce, KernelKind.ALLREDUCE: coll.run_allreduce,
    KernelKind.BROADCAST: coll.run_broadcast, KernelKind.ALLTOALL: coll.run_alltoall}


def _line_colours(algorithm: ReduceAlgorithm, n: int) -> int:
    """Colours a reduce tree over a line of n PEs needs at one router: a chain alternates two (a PE's
    input and output), a star merges every stream on one, the binary tree one per level, two-phase two
    chains, the ring one per direction; the K-tree six, its multicast included, as WaferLLM's code
    declares them (for each of its two phases and its scatter, one toward each end)."""
    if n < 2:
        return 0
    return {ReduceAlgorithm.CHAIN: 2, ReduceAlgorithm.STAR: 1, ReduceAlgorithm.TREE: math.ceil(math.log2(n)),
            ReduceAlgorithm.TWO_PHASE: 4, ReduceAlgorithm.RING: 2,
            ReduceAlgorithm.KTREE: 6}[algorithm]


def colours_needed(kind: KernelKind, algorithm: Algorithm, rows: int, cols: int) -> int:
    """Routable colours per router: the rows' and the columns' trees each need their own; an allreduce
    adds one for the multicast back; SUMMA's two multicasts, Cannon's and MeshGEMM's two shifts, each
    double-buffered, four."""
    if kind == KernelKind.GEMM:
        return 4
    if kind == KernelKind.GEMV:
        tree = ROW_TREES[algorithm]
        return _line_colours(tree, cols) + (tree != ReduceAlgorithm.KTREE and cols > 1)
    if kind == KernelKind.BROADCAST:
        return 1
    if kind == KernelKind.ALLTOALL:
        return 2 * ((rows > 1) + (cols > 1))  # east and west, north and south
    both = _line_colours(algorithm, rows) + _line_colours(algorithm, cols)
    own_multicast = algorithm in (ReduceAlgorithm.RING, ReduceAlgorithm.KTREE)  # counted in its colours
    return both + (kind == KernelKind.ALLREDUCE and not own_multicast)


def run_kernel(hw: HardwareSpec, kind: KernelKind | str, rows: int, cols: int, *, dtype: str = "fp16",
               algorithm: Algorithm | str | None = None, shape: tuple[int, int, int] | None = None,
               wavelets: int = 1) -> KernelResult:
    """Simulate one kernel on a rows × cols grid of ``hw``'s PEs. ``kind`` and ``algorithm`` are
    ``kinds`` members or their plain names (``algorithm`` None: the kind's ``DEFAULT_ALGORITHM``); an
    unknown one is a ``ConfigError`` listing the valid names. GEMM and GEMV take ``shape`` (M, K, N; a
    GEMV's M is 1); the collectives take ``wavelets`` per PE."""
    kind, algorithm = choice(kind, algorithm)
    m = Machine.of(hw, dtype)
    if kind in MATMULS:
        if shape is None:
            raise ConfigError(f"{kind} needs a shape M x K x N", path="shape")
        r = _MATMULS[kind][algorithm](m, rows, cols, shape)
    else:
        r = partial(_COLLECTIVES[kind], hw, m)(rows, cols, wavelets, algorithm)
    colours = colours_needed(kind, algorithm, rows, cols)
    routes = routes_needed(kind, algorithm, rows, cols)
    r = replace(r, colours=colours, routes=routes)
    if kind == KernelKind.GEMM and algorithm != GemmAlgorithm.SUMMA and rows == cols:
        skew = skew_routes_needed(rows,
                                  np.arange(rows) if algorithm == GemmAlgorithm.CANNON else ring_order(rows))
        if skew > m.route_paths:
            r = replace(r, notes=(*r.notes, f"the skew as direct paths would need {skew} routes at its "
                                  f"busiest router, more than the {m.route_paths} of fabric.route_paths: "
                                  "not counted (laid out skewed as the operands load, or relayed)"))
    if colours > m.colours and r.feasible:
        return replace(r, feasible=False, reason=f"needs {colours} routable colours per router, "
                       f"more than the {m.colours} of {m.name} (fabric.colours)")
    if routes > m.route_paths and r.feasible:
        return replace(r, feasible=False, reason=f"needs {routes} routes at its busiest router, more than "
                       f"the {m.route_paths} of {m.name} (fabric.route_paths)")
    return r
