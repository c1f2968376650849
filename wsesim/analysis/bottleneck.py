"""The bottleneck line of a serving run (``ServeResult.bottleneck``, docs/model.md §11.7): what limits the
run, in words that agree with its figures — the stage requests queue for, admission, the hand-offs between
stages, and what a decode step is mostly made of."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["BUSY", "Load", "bottleneck"]

BUSY = 0.9
"""A stage's busy share of the run from which it, not admission, is what requests queue for."""


@dataclass(frozen=True)
class Load:
    """What a run's queueing is measured by (``ServeResult``'s figures): ``cap`` requests in flight at most
    (``inference.scheduler.batch``), the ``largest`` number that were, the mean ``queueing_s`` from arrival to
    the prompt's start against the mean ``ttft_s``, and a prompt's cycles on the links between stages
    (``prefill_handoff``) against those in the stages' kernels (``prefill_kernels``)."""

    cap: int
    largest: int
    queueing_s: float
    ttft_s: float
    prefill_handoff: float = 0.0
    prefill_kernels: float = 0.0


def bottleneck(breakdown: dict[str, float], by_op: dict[str, float], busy: Any,
                load: Load | None = None, words: dict[str, str] | None = None) -> str:
    """What limits the run, in words that agree with its figures: when requests queue (their mean wait
    before the prompt starts half their TTFT or more), the stage they queue for if one is busy (``BUSY``),
    else admission (``inference.scheduler.batch`` requests in flight, or fewer when their KV caches filled the
    stages), and, when a prompt spends longer on the links between stages than in their kernels, that;
    then what a decode step is mostly made of, and the op that costs most (``words``: another machine's
    names of the parts, ``analysis.gpu_energy.GPU_WORDS``)."""
    total = sum(breakdown.values()) or 1.0
    part = max(breakdown, key=lambda k: breakdown[k])
    op = max(by_op, key=lambda k: by_op[k]) if by_op else ""
    busiest = int(busy.argmax()) if len(busy) else 0
    share = float(busy.max()) if len(busy) else 0.0
    stage = f"stage {busiest}" if len(busy) > 1 else "the stage"
    what = {**{"instructions": "instruction issue and kernel launches on the PEs",
               "compute": "arithmetic on the PEs",
               "communication": "wavelets on the fabric (hop and ramp latency)"}, **(words or {}),
            "handoff": "hand-offs between stages",
            "waiting": (f"waiting for {stage}, busy with other requests" if share >= BUSY
                        else "waiting between its decode steps (others' prompts, hand-offs in line)")}[part]
    step = f"{what}: {100 * breakdown[part] / total:.0f} % of a decode step"
    if op:
        step += f"; costliest op {op} ({100 * by_op[op] / total:.0f} %)"
    lead = []
    if load is not None and math.isfinite(load.queueing_s) and 0 < load.queueing_s >= 0.5 * load.ttft_s:
        ms = 1e3 * load.queueing_s
        shown = f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"  # 75,356, not 7.54e+04
        wait = f"a request waits {shown} ms on average before its prompt starts"
        idle = f"{stage}, {100 * share:.0f} % busy"
        if share >= BUSY:
            lead.append(f"{stage} busy {100 * share:.0f} % of the run: {wait}")
        elif load.largest >= load.cap:
            lead.append(f"admission: {load.cap} requests in flight at most (inference.scheduler.batch), "
                        f"{wait}; "
                        f"the stages have room ({'busiest ' if len(busy) > 1 else ''}{idle})")
        else:
            lead.append(f"admission: the KV cache held {load.largest} requests in flight at most (inference."
                        f"scheduler.batch allows {load.cap}), {wait}; the stages have room "
                        f"({'busiest ' if len(busy) > 1 else ''}{idle})")
    if load is not None and share < BUSY and load.prefill_handoff > load.prefill_kernels > 0:
        lead.append(f"hand-offs between stages carry the prompts: {load.prefill_handoff:,.0f} cycles a "
                    f"prompt on the links against {load.prefill_kernels:,.0f} in the stages' kernels, decode "
                    f"tokens waiting behind them ({stage} {100 * share:.0f} % busy)")
    return "; ".join([*lead, step])
