"""The two software stacks a served model's kernels can be written in (``inference.software``; docs/model.md
§11.11, which says what each does and why): ``research``, WaferLLM's code, the builder's list of kernels
as it is, each launched on its own; ``production``, as Cerebras describes its October 2024 inference
release, the same kernels composed (``fuse``): an element-wise kernel runs in the epilogue of the GEMV or
GEMM whose output it reads (its launch gone), and an allreduce whose result only scales the GEMV or GEMM
after it runs beside that kernel (``sim.cost.software`` costs the pair). A stage's launches are the
length of the composed list (``launches``), counted from what was fused. The composed kernel keeps the
GEMV's or GEMM's name, kind and layer and carries the others (``Kernel.fused``, ``Kernel.beside``); its
name lists them (``qkv+rope|attn_norm_sum``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ....model.vocabulary import StageOpKind
from ..program import Kernel

__all__ = ["SOFTWARE_STACKS", "compose", "fuse", "launches"]

SOFTWARE_STACKS = {"research": "WaferLLM's code: each kernel launched on its own, collectives and "
                               "hand-offs in turn",
                   "production": "element-wise kernels fused into the GEMV or GEMM feeding them; "
                                 "allreduces and wafer I/O beside compute"}
"""The stacks by name (``inference.software``) and what each runs."""

HOSTS = frozenset({StageOpKind.GEMV, StageOpKind.GEMM})
"""Kernels an element-wise epilogue can be fused into, and that a collective can run beside."""


def _name(op: Kernel) -> str:
    fused = "".join(f"+{f.name}" for f in op.fused)
    beside = "".join(f"|{b.name}" for b in op.beside)
    return f"{op.name.split('+')[0].split('|')[0]}{fused}{beside}"


def fuse(ops: Iterable[Kernel]) -> list[Kernel]:
    """The production stack's kernels for ``ops`` (one stage's, in the order they run): each element-wise
    kernel fused into the GEMV or GEMM just before it (on the same region, both of attention or neither);
    each allreduce just before a GEMV or GEMM (likewise) put beside it. Everything else as it was."""
    out: list[Kernel] = []
    waiting: list[Kernel] = []  # allreduces held for the kernel after them
    for op in ops:
        if waiting and not _pairs(waiting[-1], op):
            out += waiting
            waiting = []
        if op.kind == StageOpKind.ALLREDUCE:
            waiting.append(op)
            continue
        if waiting:  # a GEMV or GEMM after its allreduce(s)
            op = replace(op, beside=(*op.beside, *waiting))
            op = replace(op, name=_name(op))
            waiting = []
        last = out[-1] if out else None
        if (op.kind == StageOpKind.ELEMENTWISE and last is not None and last.kind in HOSTS
                and _same_place(last, op)):
            host = replace(last, fused=(*last.fused, op))
            out[-1] = replace(host, name=_name(host))
            continue
        out.append(op)
    return out + waiting


def _same_place(a: Kernel, b: Kernel) -> bool:
    return a.region == b.region and a.attention == b.attention


def _pairs(collective: Kernel, op: Kernel) -> bool:
    return op.kind in HOSTS and _same_place(collective, op)


def launches(ops: Iterable[Kernel]) -> int:
    """Kernels launched to run ``ops``: one each, fused ones and collectives beside them included in
    their host's; moves between grids (``GRID_TRIPS``, part of an MoE dispatch) launch none."""
    return sum(1 for op in ops if op.kind != StageOpKind.GRID_TRIPS)


def compose(ops: Iterable[Kernel], software: str) -> tuple[Kernel, ...]:
    """``ops`` as ``software`` runs them: as they are (research) or fused (production)."""
    return tuple(fuse(ops)) if software == "production" else tuple(ops)
