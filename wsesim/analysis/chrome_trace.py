"""A simulated step as a Chrome / Perfetto trace-event file (pure: builds a dict; the CLI writes it).

Timestamps are simulated microseconds (cycles / clock). Tracks, named with metadata events:

=====  =========================  ==========================================================
pid    process                    threads (tid)
=====  =========================  ==========================================================
1      off-wafer I/O              1 weights in (one span per chunk), 2 gradients out
2      wafer: step timeline       1 whole wafer (attention tiles, router, LM head),
                                  2 fabric (dispatch, combine), 3 stalls (weights, gradients)
3      expert regions             one thread per region, each op a span; with more than
                                  ``MAX_REGION_TRACKS`` regions, groups of regions with one span
                                  per layer and pass covering the group's work
=====  =========================  ==========================================================

Spans on the step timeline carry the engine's phase names, so their durations add up to the
result's ``phases``; every span's ``args`` has layer, pass, tile or expert, bytes and FLOPs.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ..model.shapes import LayerShapes
from ..sim.plan import StepPlan, Trace

MAX_REGION_TRACKS = 16
_STEP_TIDS = {"attention": 1, "ffn": 1, "router": 1, "lm_head": 1, "expand": 1, "weighted_sum": 1, "dispatch": 2,
              "combine": 2, "weight_stall": 3, "gradient_stall": 3, "gradient_drain": 3, "experts": 4}
_THREADS = {1: {1: "weights in", 2: "gradients out"},
            2: {1: "whole wafer: attention, FFN, router, LM head", 2: "fabric: dispatch, combine",
                3: "stalls", 4: "experts phase (all regions)"}}
_PROCESSES = {1: "off-wafer I/O", 2: "wafer: step timeline", 3: "expert regions"}


def _clean(args: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in args.items()}


def _key_args(key: tuple[Any, ...]) -> dict[str, Any]:
    """Trace arguments of a chunk key ``(pass, layer, tensor[, expert])`` or ``(tensor,)``."""
    if len(key) == 1:
        return {"tensor": key[0]}
    args: dict[str, Any] = {"pass": key[0], "layer": key[1], "tensor": key[2]}
    if len(key) > 3:
        args["expert"] = key[3]
    return args


def chrome_trace(trace: Trace, plan: StepPlan) -> dict[str, Any]:
    """The trace-event JSON object (``{"traceEvents": [...], ...}``) of a finished run."""
    us = 1e6 / plan.hw.clock_hz
    events: list[dict[str, Any]] = []

    def span(pid: int, tid: int, name: str, start: float, end: float, args: dict[str, Any], cat: str) -> None:
        events.append({"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": start * us,
                       "dur": (end - start) * us, "args": _clean(args)})

    for track, name, start, end, args in trace.spans:
        if track == "step":
            span(2, _STEP_TIDS[name], name, start, end, args, "phase")
    if trace.io_in is not None:
        io = trace.io_in
        for i in np.flatnonzero(~np.isnan(io.arrival)):
            key = io.names[i]
            span(1, 1, " ".join(map(str, key)), float(io.start[i]), float(io.arrival[i]),
                 {"bytes": float(io.sizes[i]), **_key_args(key)}, "io")
    for (name, args), (start, left, nbytes) in zip(trace.gradients, trace.gradient_batches, strict=True):
        for a, b, n in zip(start.tolist(), left.tolist(), nbytes.tolist(), strict=True):
            span(1, 2, name, a, b, {**args, "bytes": n}, "io")
    threads = {**_THREADS, 3: _expert_events(trace, plan, span)}
    meta = []
    for pid, pname in _PROCESSES.items():
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": pname}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for tid, tname in threads.get(pid, {}).items():
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": tname}})
            meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"clock_hz": plan.hw.clock_hz, "hardware": plan.hw.name, "model": plan.model.name,
                          "tiles": plan.tiles, "batch_per_tile": plan.batch_per_tile}}


def _expert_events(trace: Trace, plan: StepPlan, span: Any) -> dict[int, str]:
    """Expert ops as spans, one thread per region, or per group of regions; returns the thread names."""
    s = LayerShapes(plan.model)
    regions = len(plan.expert_regions)
    region_of = np.asarray(plan.expert_region_of)
    per_group = max(1, -(-regions // MAX_REGION_TRACKS))
    names = {g + 1: (f"region {g}" if per_group == 1 else
                     f"regions {g * per_group}-{min(regions, (g + 1) * per_group) - 1}")
             for g in range(-(-regions // per_group))}
    groups: dict[tuple[int, int, str], list[float]] = defaultdict(lambda: [np.inf, -np.inf, 0.0, 0.0, 0])
    for ops in trace.expert_ops:
        tokens = plan.tokens[ops.layer, ops.experts]
        flops = s.expert_op_flops(ops.op, tokens, ops.backward)
        weight_bytes = s.expert_op_bytes(ops.op)
        tid = region_of[ops.experts] // per_group + 1
        if per_group == 1:
            for i in range(len(ops.experts)):
                span(3, int(tid[i]), f"expert {ops.op}", float(ops.start[i]), float(ops.end[i]),
                     {"layer": ops.layer, "pass": ops.pass_, "expert": int(ops.experts[i]), "tokens": int(tokens[i]),
                      "flops": float(flops[i]), "bytes": weight_bytes, "weight_wait_cycles": float(ops.weight_wait[i]),
                      "bound": "compute" if ops.compute_bound[i] else "feed"},
                     "expert")
            continue
        for i in range(len(ops.experts)):
            g = groups[(int(tid[i]), ops.layer, ops.pass_)]
            g[0], g[1] = min(g[0], float(ops.start[i])), max(g[1], float(ops.end[i]))
            g[2] += float(flops[i])
            g[3] += weight_bytes
            g[4] += 1
    for (tid, layer, pass_), (start, end, flops, nbytes, count) in sorted(groups.items(), key=lambda kv: kv[1][0]):
        span(3, tid, f"experts {pass_}", start, end,
             {"layer": layer, "pass": pass_, "ops": count, "flops": flops, "bytes": nbytes}, "expert")
    return names

