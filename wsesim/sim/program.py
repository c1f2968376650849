"""A workload as data: the ordered ops of a program, which both engines execute (docs/architecture.md).

A builder (``training.training_program`` for a training step) writes the order of work once; the fast
engine (``engine.py``) and the plain-SimPy reference (``reference.py``) each execute the same
``Program`` with their own mechanism, so the order lives in one place and tests can read it directly.
An op says what it is (``kind``, ``pass_``, ``layer``), where it runs, what it computes (FLOPs and the
weight bytes it feeds, from ``model.shapes``), which weights it waits for and which gradient it hands
on; the engines decide when.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..model.vocabulary import Copy, Gradient, OpKind, Pass, Where

__all__ = ["WAFER_OPS", "Op", "Program"]

ChunkKey = tuple[Any, ...]  # (copy, layer, tensor) or (tensor,): a key of the chunk plan

WAFER_OPS = frozenset({OpKind.ATTENTION, OpKind.ROUTER, OpKind.FFN, OpKind.LM_HEAD, OpKind.EXPAND,
                       OpKind.WEIGHTED_SUM})
"""Op kinds that run on the whole wafer as one timed op (per tile when ``Op.tiles``)."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Op:
    """One op of a program.

    * ``WEIGHTS``: wait for the weights of chunk key ``weights`` (a stall of the step while they come);
    * the whole-wafer kinds (``WAFER_OPS``): ``flops`` of arithmetic feeding ``weight_bytes`` of weights,
      once, or ``tiles`` times back to back (one span each, with its ``tile``); ``useful`` is False for
      datapath work that is no arithmetic (copies: timed, not counted as FLOPs);
    * ``DISPATCH``/``COMBINE``: the layer's routed tokens over the fabric (``reverse``: experts to
      tokens), ``nbytes`` in all;
    * ``EXPERTS``: the layer's experts under the MoE mapping, on weight copy ``copy``; ``flops`` is the
      phase's arithmetic, summed over its experts;
    * ``GRADIENT``: hand ``nbytes`` of ``gradient`` to the outbound link;
    * ``GRADIENT_DRAIN``/``REDUCE_DRAIN``: the end of the step;
    * the serving kinds (``GEMV``, ``GEMM``, ``ALLREDUCE``, ``ELEMENTWISE``, ``HANDOFF``): a kernel
      ``name`` of ``layer`` on ``stage``'s grid, whose ``cycles`` the kernel model has simulated.

    ``args`` are the span arguments the trace records beside the engine's own (cycles, bound, bytes).
    """

    kind: OpKind
    pass_: Pass | None = None
    layer: int | None = None
    where: Where = Where.WAFER
    tiles: int = 0
    flops: float = 0.0
    weight_bytes: float = 0.0
    useful: bool = True
    backward: bool = False
    weights: ChunkKey | None = None
    copy: Copy | None = None
    reverse: bool = False
    gradient: Gradient | None = None
    nbytes: float = 0.0
    args: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    # a kernel on a grid (serving): its name in the layer, its stage, and its simulated cycles with the
    # part of them that is wavelets on the fabric (the rest is arithmetic, or waiting inside the kernel)
    matmuls: tuple[tuple[int, int, int], ...] = ()  # a whole-wafer op's GEMMs (M, K, N), for compute: kernel
    name: str = ""
    stage: int | None = None
    cycles: float = 0.0
    communication: float = 0.0

    @property
    def runs(self) -> int:
        """How many times the op runs back to back (its tiles, or once)."""
        return self.tiles or 1

    @property
    def executed_flops(self) -> float:
        """Arithmetic the op executes in all (0 for waits, transfers and copies)."""
        return self.runs * self.flops if self.useful else 0.0


@dataclass(frozen=True)
class Program:
    """``body`` runs once per micro-batch, ``micro_batches`` times back to back; ``tail`` once after."""

    body: tuple[Op, ...]
    micro_batches: int = 1
    tail: tuple[Op, ...] = ()

    def ops(self) -> Iterator[tuple[int, Op]]:
        """Every op in execution order with its micro-batch (the tail's as the last micro-batch's)."""
        for micro_batch in range(self.micro_batches):
            for op in self.body:
                yield micro_batch, op
        for op in self.tail:
            yield self.micro_batches - 1, op

    @property
    def executed_flops(self) -> float:
        """The arithmetic of the whole program (recomputation included)."""
        return self.micro_batches * sum(op.executed_flops for op in self.body)

    def kinds(self) -> tuple[OpKind, ...]:
        """The body's op kinds in order (one micro-batch)."""
        return tuple(op.kind for op in self.body)
