"""A simulated run as a Chrome / Perfetto trace-event file (pure: builds a dict; the CLI writes it):
the one writer of traces, for a training step and for serving alike.

Timestamps are simulated microseconds (cycles / clock). A serving run is one process, "pipeline
stages", with a thread per stage and a span per request's token the stage served (prefill or decode);
under continuous batching, a span per iteration (its decode tokens and prompt tokens in its args), and
with a paged KV cache a span per preemption and per swap to MemoryX and back; for an MoE stage a thread
"stage s experts" with, per iteration, its expert dispatch, its experts' work and its combine, each
summed over the stage's MoE layers (one span per part, not per layer: a 48-layer stage's iterations would
make a run's trace 48 times longer), drawn back to back from the iteration's start.
A training step's tracks, named with metadata events:

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

Counter tracks (``ph: C``): on off-wafer I/O, the inbound and the outbound link's utilisation (% of each
of ``COUNTER_BINS`` slices of the step) and the weights held in the staging buffer (bytes per PE, from
the stream's reservations and frees); on the step timeline, the SRAM in use per PE (the memory model's
resident part and the working set of the phase running, at the mean expert load, with the staged weights
as they are at that moment).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from ..model.memory import training_memory
from ..model.shapes import LayerShapes
from ..model.vocabulary import Phase, Track
from ..sim.programs.plan import StepPlan, Trace

MAX_REGION_TRACKS = 16
COUNTER_BINS = 400
_STEP_TIDS = {Phase.ATTENTION: 1, Phase.FFN: 1, Phase.ROUTER: 1, Phase.LM_HEAD: 1, Phase.EXPAND: 1,
              Phase.WEIGHTED_SUM: 1, Phase.DISPATCH: 2, Phase.COMBINE: 2, Phase.WEIGHT_STALL: 3,
              Phase.GRADIENT_STALL: 3, Phase.GRADIENT_DRAIN: 3, Phase.REDUCE_DRAIN: 3,
              Phase.OPTIMIZER_STEP: 3, Phase.EXPERTS: 4}
"""The thread of each phase on the step timeline; every phase has one (a test checks)."""
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


def chrome_trace(trace: Trace, plan: StepPlan | None = None, *,
                 clock_hz: float | None = None) -> dict[str, Any]:
    """The trace-event JSON object (``{"traceEvents": [...], ...}``) of a finished run: a training step
    (its ``plan``), or a serving run (its trace's batch log, at ``clock_hz``)."""
    us = 1e6 / (plan.hw.clock_hz if plan is not None else clock_hz)  # type: ignore[operator]
    events: list[dict[str, Any]] = []

    def span(pid: int, tid: int, name: str, start: float, end: float, args: dict[str, Any], cat: str) -> None:
        events.append({"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": start * us,
                       "dur": (end - start) * us, "args": _clean(args)})

    if trace.batches is not None:
        return _batch_trace(trace, span, events)
    assert plan is not None, "a training step's trace is drawn with its plan"
    for track, name, start, end, args in trace.spans:
        if track == Track.STEP:
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
    events += counter_events(trace, plan)
    threads = {**_THREADS, 3: _expert_events(trace, plan, span)}
    meta = []
    for pid, pname in _PROCESSES.items():
        meta.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": pname}})
        meta.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                     "args": {"sort_index": pid}})
        for tid, tname in threads.get(pid, {}).items():
            meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": tname}})
            meta.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                         "args": {"sort_index": tid}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ns",
            "otherData": {"clock_hz": plan.hw.clock_hz, "hardware": plan.hw.name, "model": plan.model.name,
                          "tiles": plan.tiles, "batch_per_tile": plan.batch_per_tile}}


def _batch_trace(trace: Trace, span: Any, events: list[dict[str, Any]]) -> dict[str, Any]:
    """A serving run: a thread per station (each stage, a speculative draft's wafers, the prefill
    wafers'), a span per iteration: its decode tokens (``verify`` passes of K + 1 positions with a draft;
    ``draft`` rounds of K steps on the draft's station) and its prompt tokens, and when the log has them
    (a run for ``--trace``) which requests they are (``requests``: the decode tokens'; ``prompts``:
    [request, first token, tokens] of each prompt piece); a thread per station's outbound link, a span
    per hand-off (the activations, the KV cache, drafts, new tokens) from the iteration's end to its
    landing."""
    b = trace.batches
    assert b is not None
    names = b.names or tuple(f"stage {s}" for s in range(len(b.busy)))
    links = len(names) + 1  # each station's outbound link, a thread after the stations'
    meta: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "pipeline stages"}},
        *({"name": "thread_name", "ph": "M", "pid": 1, "tid": s + 1, "args": {"name": name}}
          for s, name in enumerate(names)),
        *({"name": "thread_name", "ph": "M", "pid": 1, "tid": links + s,
           "args": {"name": f"{name} hand-off"}} for s, name in enumerate(names))]
    kv = f"prefill {len([n for n in names if n.startswith('prefill')]) - 1}"  # split prefill's KV hand-off
    for s, end, landed, moved in zip(b.stage.tolist(), b.end.tolist(), b.landed.tolist(), b.moved.tolist(),
                                     strict=True):
        if moved and landed == landed:  # a hand-off left after the iteration (NaN: none)
            what = "KV cache" if names[s] == kv else "hand-off"
            span(1, links + s, f"{what} {moved:,}", end, landed, {"station": names[s], "values": moved},
                 "handoff")
    if len(b.kv_events):  # a paged cache's preemptions and swaps, on a thread after the hand-offs'
        kv = 2 * len(names) + 1
        meta.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": kv,
                     "args": {"name": "KV cache: preemptions, MemoryX I/O"}})
        for kind, r, start, end, tokens in b.kv_events.tolist():
            what = ("preempt", "swap out", "swap in")[int(kind)]
            span(1, kv, f"{what} r{int(r)}", start, end, {"request": int(r), "tokens": int(tokens)}, "kv")
    _expert_spans(b, names, meta, span)
    members = b.members or ((None, None),) * len(b.stage)
    for s, start, end, decodes, prompt, (rs, ps) in zip(b.stage.tolist(), b.start.tolist(), b.end.tolist(),
                                                        b.decodes.tolist(), b.prompt_tokens.tolist(), members,
                                                        strict=True):
        drafting = names[s] == "draft"
        what = "draft" if drafting else ("verify" if b.width > 1 else "decode")
        name = f"{decodes} {what}" + (f" + {prompt} prompt" if prompt else "")
        whose = {} if rs is None else {"requests": list(rs), "prompts": [list(p) for p in ps]}
        span(1, s + 1, name, start, end, {"station": names[s], "decodes": decodes, "prompt_tokens": prompt,
                                          **({"positions": b.width} if b.width > 1 and not drafting else {}),
                                          **whose},
             "draft" if drafting else what if what == "verify" else "iteration")
    return {"traceEvents": meta + events, "displayTimeUnit": "ns"}


def _expert_spans(b: Any, names: tuple[str, ...], meta: list[dict[str, Any]], span: Any) -> None:
    """Each MoE iteration's expert dispatch, experts and combine (``BatchLog.experts``), on a thread
    "<station> experts" after the KV cache's: three spans back to back from the iteration's start, each
    the cycles of that part summed over the stage's MoE layers (their lengths, not their times: the
    layers alternate with attention within the iteration's span)."""
    moe = np.flatnonzero(b.experts.any(axis=1)) if len(b.experts) else np.zeros(0, dtype=np.int64)
    tid = 2 * len(names) + 2  # after the stations', the hand-offs' and the KV cache's threads
    for s in sorted(set(b.stage[moe].tolist())):
        meta.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid + s,
                     "args": {"name": f"{names[s]} experts"}})
    for s, start, parts in zip(b.stage[moe].tolist(), b.start[moe].tolist(), b.experts[moe].tolist(),
                               strict=True):
        for what, cycles in zip(("dispatch", "experts", "combine"), parts, strict=True):
            if cycles > 0:
                span(1, tid + s, what, start, start + cycles, {"station": names[s], "cycles": cycles,
                                                               "summed over": "the stage's MoE layers"},
                     "experts")
                start += cycles


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
                     {"layer": ops.layer, "pass": ops.pass_, "expert": int(ops.experts[i]),
                      "tokens": int(tokens[i]), "flops": float(flops[i]), "bytes": weight_bytes,
                      "weight_wait_cycles": float(ops.weight_wait[i]),
                      "bound": "compute" if ops.compute_bound[i] else "feed"},
                     "expert")
            continue
        for i in range(len(ops.experts)):
            g = groups[(int(tid[i]), ops.layer, ops.pass_)]
            g[0], g[1] = min(g[0], float(ops.start[i])), max(g[1], float(ops.end[i]))
            g[2] += float(flops[i])
            g[3] += weight_bytes
            g[4] += 1
    for (tid, layer, pass_), (start, end, flops, nbytes, count) in sorted(groups.items(),
                                                                          key=lambda kv: kv[1][0]):
        span(3, tid, f"experts {pass_}", start, end,
             {"layer": layer, "pass": pass_, "ops": count, "flops": flops, "bytes": nbytes}, "expert")
    return names



# ---------------------------------------------------------------------------------------------- counters


def _busy(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Fraction of each slice between ``edges`` a serial link is busy, its transfers [start, end) in order."""
    order = np.argsort(start, kind="stable")
    a, b = start[order], end[order]
    done = np.r_[0.0, np.cumsum(b - a)]  # busy time before transfer k
    k = np.searchsorted(a, edges, side="right") - 1  # the transfer that started last by each edge
    inside = np.where(k >= 0, np.clip(edges - a[np.maximum(k, 0)], 0, (b - a)[np.maximum(k, 0)]), 0.0)
    busy = done[np.maximum(k, 0)] * (k >= 0) + inside
    return np.clip(np.diff(busy) / np.diff(edges), 0.0, 1.0)


def counter_events(trace: Trace, plan: StepPlan) -> list[dict[str, Any]]:
    """The counter tracks (see the module docstring) as trace events."""
    us, step, rate, pes = 1e6 / plan.hw.clock_hz, trace.step_cycles, plan.hw.io_bytes_per_cycle, plan.hw.pes
    events: list[dict[str, Any]] = []

    def counter(pid: int, name: str, cycles: np.ndarray, series: dict[str, np.ndarray]) -> None:
        for i, t in enumerate(cycles.tolist()):
            events.append({"name": name, "ph": "C", "pid": pid, "ts": t * us,
                           "args": {k: float(v[i]) for k, v in series.items()}})

    if step <= 0:
        return events
    edges = np.linspace(0.0, step, COUNTER_BINS + 1)
    staged: tuple[np.ndarray, np.ndarray] | None = None
    if trace.io_in is not None:
        io = trace.io_in
        ran = ~np.isnan(io.start)
        start, sizes = io.start[ran], io.sizes[ran]
        counter(1, "inbound link utilisation (%)", edges[:-1],
                {"busy": 100 * _busy(start, start + sizes / rate, edges)})
        if io.freed is not None:
            times, deltas = np.r_[start, io.freed[0]], np.r_[sizes, -io.freed[1]]
            order = np.argsort(times, kind="stable")
            t, level = times[order], np.cumsum(deltas[order]) / pes
            last = np.r_[t[1:] != t[:-1], True]  # the level once everything at that cycle has happened
            staged = (t[last], np.maximum(level[last], 0.0))
            counter(1, "staging buffer (bytes per PE)", staged[0], {"weights staged": staged[1]})
    if trace.gradient_batches:
        left = np.concatenate([b[1] for b in trace.gradient_batches])
        nbytes = np.concatenate([b[2] for b in trace.gradient_batches])
        counter(1, "outbound link utilisation (%)", edges[:-1],
                {"busy": 100 * _busy(left - nbytes / rate, left, edges)})
    memory = {p.phase: p for p in training_memory(plan.hw, plan.model, plan.training,
                                                  batch_per_tile=plan.batch_per_tile).phases}
    common = set.intersection(*(set(p.components) for p in memory.values()))  # held in every phase
    resident = sum(v for k, v in next(iter(memory.values())).components.items()
                   if k in common and k != "staging")
    starts, working = [], []
    for track, name, start_cycle, _end, args in trace.spans:
        if track != Track.STEP:
            continue
        starts.append(start_cycle)
        phase = memory.get(_memory_phase(name, str(args.get("pass", ""))))
        working.append(0.0 if phase is None
                       else sum(v for k, v in phase.components.items() if k not in common))
    if starts:
        t = np.asarray(starts, dtype=float)
        now = np.zeros(len(t))
        if staged is not None and len(staged[0]):  # the level set last at or before each span's start
            k = np.searchsorted(staged[0], t, side="right") - 1
            now = np.where(k >= 0, staged[1][np.maximum(k, 0)], 0.0)
        counter(2, "SRAM in use (bytes per PE)", t, {"resident": np.full(len(t), float(resident)),
                                                     "phase working set": np.asarray(working),
                                                     "weights staged": now})
    return events


_EXPERTS_MEMORY = frozenset({Phase.ROUTER, Phase.DISPATCH, Phase.EXPAND, Phase.EXPERTS, Phase.WEIGHTED_SUM,
                             Phase.COMBINE})
"""Phases that run in the memory model's experts phase (an MoE layer's sub-block)."""


def _memory_phase(name: str, pass_: str) -> str:
    """The memory model's phase (``model.memory``) a step span runs in."""
    forward = pass_.startswith("fwd")
    if name == Phase.ATTENTION:
        return "attention_fwd" if forward else "attention_bwd"
    if name == Phase.FFN:
        return "ffn_fwd" if forward else "ffn_bwd"
    if name in _EXPERTS_MEMORY:
        return "experts_fwd" if forward else "experts_bwd"
    return name  # lm_head; a stall holds only the resident part
