"""Every kernel by kind and algorithm (``kinds``): ``run_kernel`` is the one entry point (the CLI's, the
serving model's and the validation table's). An unknown kind or algorithm is a ``ConfigError`` that lists
the valid names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from ..config.errors import ConfigError
from ..config.specs import HardwareSpec
from ..fabric.colours import DIRECTION_RULE, over_budget
from . import collectives as coll
from .gemm import GEMM_ALGORITHMS
from .gemv import GEMV_ALGORITHMS
from .kinds import MATMULS, Algorithm, GemmAlgorithm, KernelKind, choice
from .lines import ring_order
from .machine import Machine
from .result import KernelResult
from .routes import colours_needed, skew_colours_needed
from .stream import STREAM_ALGORITHMS

_MATMULS: dict[KernelKind, Mapping[Algorithm, Callable[..., KernelResult]]] = {
    KernelKind.GEMM: GEMM_ALGORITHMS, KernelKind.GEMV: GEMV_ALGORITHMS}
_COLLECTIVES: dict[KernelKind, Callable[..., KernelResult]] = {
    KernelKind.REDUCE: coll.run_reduce, KernelKind.ALLREDUCE: coll.run_allreduce,
    KernelKind.BROADCAST: coll.run_broadcast, KernelKind.ALLTOALL: coll.run_alltoall}


def run_kernel(hw: HardwareSpec, kind: KernelKind | str, rows: int, cols: int, *, dtype: str = "fp16",
               algorithm: Algorithm | str | None = None, shape: tuple[int, int, int] | None = None,
               wavelets: int = 1, staged: bool = False) -> KernelResult:
    """Simulate one kernel on a rows × cols grid of ``hw``'s PEs. ``kind`` and ``algorithm`` are
    ``kinds`` members or their plain names (``algorithm`` None: the kind's ``DEFAULT_ALGORITHM``); an
    unknown one is a ``ConfigError`` listing the valid names. GEMM and GEMV take ``shape`` (M, K, N; a
    GEMV's M is 1); the collectives take ``wavelets`` per PE. ``staged``: a streamed GEMM's weights are
    already on the wafer (the training step's staging buffer), so the edge's I/O is not charged."""
    kind, algorithm = choice(kind, algorithm)
    m = Machine.of(hw, dtype)
    if kind in MATMULS:
        if shape is None:
            raise ConfigError(f"{kind} needs a shape M x K x N", path="shape")
        if algorithm in STREAM_ALGORITHMS:
            r = STREAM_ALGORITHMS[algorithm](m, rows, cols, shape, staged=staged)
        else:
            r = _MATMULS[kind][algorithm](m, rows, cols, shape)
    else:
        r = _COLLECTIVES[kind](m, rows, cols, wavelets, algorithm)
    colours = colours_needed(kind, algorithm, rows, cols)
    r = replace(r, colours=colours)
    shifted = (GemmAlgorithm.CANNON, GemmAlgorithm.MESHGEMM)
    if kind == KernelKind.GEMM and algorithm in shifted and rows == cols:
        skew = skew_colours_needed(rows,
                                   np.arange(rows) if algorithm == GemmAlgorithm.CANNON else ring_order(rows))
        if skew > m.colours:
            r = replace(r, notes=(*r.notes, f"the skew as direct paths would need {skew} colours at its "
                                  f"busiest router, more than the {m.colours} of fabric.colours: "
                                  "not counted (laid out skewed as the operands load, or relayed)"))
    if kind == KernelKind.ALLTOALL:
        r = replace(r, notes=(*r.notes, f"colours {DIRECTION_RULE}: the rule wsesim fabric and the "
                              "training step's dispatch apply"))
    reason = over_budget(colours, m.colours, "its busiest router", "wsesim.kernels.routes",
                         f"fabric.colours of {m.name}")
    if reason and r.feasible:
        return replace(r, feasible=False, reason=reason)
    return r
