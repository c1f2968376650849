"""The experts phase of the fast engine (docs/model.md §3): how a layer's experts run, under either MoE
mapping. Simulated time is in clock cycles.

* ``regions``: every expert region in parallel; each runs its experts one after another, each op as soon
  as its weights have arrived and its region is free, and frees the weights after their last use. A
  region whose next chunk is already scheduled is laid out with array arithmetic, without events (the
  timeline is the same); a region that must wait for a chunk the stream has not yet scheduled becomes
  its own process and waits for it.
* ``in_place``: the whole wafer runs every expert's ops one after another, in chunk order, each when its
  weights have arrived: one chain, laid out with float arithmetic until it reaches a chunk the stream
  has not scheduled, then waiting for it.

Either way the phase's span on the step timeline is split in two: ``experts`` and, for the time the
phase's critical path (the region that finished last, or the wafer) waited for weights, ``weight_stall``
(with ``during: experts``) — so an I/O-bound step shows as I/O-bound. The split is an accounting of the
critical path, not the order in which it waited: the stall span is put at the phase's end.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from ..model.shapes import BACKWARD_OPS, FORWARD_OPS
from .plan import ExpertOps

if TYPE_CHECKING:
    from .engine import _Engine

Grad = tuple[np.ndarray, float, int, int, np.ndarray]  # (cycles, bytes, slot, op index, regions)


def _last_use(pass_: str, chunk_pass: str) -> bool:
    """A recompute that shares the backward copy of a layer's weights leaves them for the backward."""
    return pass_ != "recompute" or chunk_pass == "rec"


def regions_phase(eng: _Engine, layer: int, pass_: str, chunk_pass: str,
                  backward: bool) -> Generator[Any, Any, None]:
    """All expert regions in parallel (an op whose weights came in several pieces runs piece by piece)."""
    env, stream, start = eng.env, eng.stream, eng.env.now
    ops = BACKWARD_OPS if backward else FORWARD_OPS
    last_use = _last_use(pass_, chunk_pass)
    R = eng.slots.shape[1]
    t = np.full(R, start)
    wait = np.zeros(R)  # cycles each region waited for weights in this phase
    stopped = np.zeros(R, dtype=bool)  # regions continuing as processes
    resume: list[tuple[int, int, int, int]] = []  # (region, slot, op index, piece)
    grads: list[Grad] = []
    for j, experts in enumerate(eng.slots):
        for k, op in enumerate(ops):
            chunks = eng.expert_chunks[chunk_pass, layer, op]
            pieces = chunks.shape[0]
            for piece in range(pieces):
                regions = np.flatnonzero((experts >= 0) & ~stopped)
                if not len(regions):
                    continue
                ex = experts[regions]
                index = chunks[piece, ex]
                arrival = stream.arrival[index]
                unscheduled = np.isnan(arrival)
                if unscheduled.any():
                    resume.extend((int(r), j, k, piece) for r in regions[unscheduled])
                    stopped[regions[unscheduled]] = True
                    regions, ex, index, arrival = (a[~unscheduled] for a in (regions, ex, index, arrival))
                begin = np.maximum(t[regions], arrival)
                end = begin + eng.cost[op, backward][layer, ex] / pieces
                record(eng, op, pass_, layer, backward, ex, begin, end, begin - t[regions], pieces)
                wait[regions] += begin - t[regions]
                t[regions] = end
                if last_use:
                    stream.free_at(end, eng.chunk_bytes[index])
                if backward and piece == pieces - 1:
                    grads.append((end, eng.op_bytes[op], j, k, regions))
    if resume:
        procs = [env.process(_region(eng, r, j, k, piece, float(t[r]), layer, pass_, chunk_pass, backward,
                                     last_use, grads, wait)) for r, j, k, piece in resume]
        done = yield simpy.AllOf(env, procs)
        for (r, *_), proc in zip(resume, procs, strict=True):
            t[r] = done[proc]
    critical = int(np.argmax(t))
    end = max(float(t[critical]), start)
    if end > env.now:
        yield env.timeout(end - env.now)
    close_phase(eng, start, float(wait[critical]), layer, pass_)
    if backward:
        at = np.concatenate([g[0] for g in grads])
        nbytes, slot, op_index, region = (np.concatenate([np.broadcast_to(g[i], len(g[0])) for g in grads])
                                          for i in range(1, 5))
        # in order of hand-over; in one cycle by (slot, op, region), whether laid out or run as a process
        order = np.lexsort((region, op_index, slot, at))
        yield from send_gradients(eng, at[order], nbytes[order], layer, pass_)


def _region(eng: _Engine, r: int, j0: int, k0: int, p0: int, t: float, layer: int, pass_: str, chunk_pass: str,
            backward: bool, last_use: bool, grads: list[Grad], wait: np.ndarray) -> Generator[Any, Any, float]:
    """One region's remaining ops from slot ``j0``, op ``k0``, piece ``p0``, as a process that waits for
    chunks the stream has not scheduled yet (the same timeline as ``regions_phase``' layout)."""
    env, stream = eng.env, eng.stream
    ops = BACKWARD_OPS if backward else FORWARD_OPS
    first = True
    for j in range(j0, eng.slots.shape[0]):
        e = int(eng.slots[j, r])
        if e < 0:
            break
        for k in range(k0 if j == j0 else 0, len(ops)):
            op = ops[k]
            chunks = eng.expert_chunks[chunk_pass, layer, op]
            pieces = chunks.shape[0]
            for piece in range(p0 if first else 0, pieces):
                first = False
                i = int(chunks[piece, e])
                if i >= stream.next and t > env.now:
                    yield env.timeout(t - env.now)
                if i >= stream.next:  # (checked again: the stream may have got there meanwhile)
                    yield stream.wait(i)
                free_at, begin = t, max(t, float(stream.arrival[i]))
                t = begin + float(eng.cost[op, backward][layer, e]) / pieces
                record(eng, op, pass_, layer, backward, np.array([e]), np.array([begin]), np.array([t]),
                       np.array([begin - free_at]), pieces)
                wait[r] += begin - free_at
                if last_use:
                    stream.free_at(np.array([t]), np.array([eng.sizes[i]]))
                if backward and piece == pieces - 1:
                    grads.append((np.array([t]), eng.op_bytes[op], j, k, np.array([r])))
    return t


def in_place_phase(eng: _Engine, layer: int, pass_: str, chunk_pass: str,
                   backward: bool) -> Generator[Any, Any, None]:
    """Every expert's ops on the whole wafer, one after another in chunk order (experts ascending; an op
    whose weights came in several pieces runs piece by piece), each when its weights have arrived."""
    env, stream, start = eng.env, eng.stream, eng.env.now
    ops = BACKWARD_OPS if backward else FORWARD_OPS
    last_use = _last_use(pass_, chunk_pass)
    t, waited = start, 0.0
    laid: dict[tuple[int, int], tuple[list[int], list[float], list[float], list[float]]] = {}
    frees: tuple[list[float], list[float]] = ([], [])
    grads: tuple[list[float], list[float]] = ([], [])
    for e in range(eng.plan.model.experts):
        for k, op in enumerate(ops):
            chunks = eng.expert_chunks[chunk_pass, layer, op]
            pieces = chunks.shape[0]
            cycles = float(eng.cost[op, backward][layer, e]) / pieces
            for piece in range(pieces):
                i = int(chunks[piece, e])
                if i >= stream.next:  # register the frees laid out so far, then wait for the stream
                    _flush(eng, frees)
                    if t > env.now:
                        yield env.timeout(t - env.now)
                    if i >= stream.next:
                        yield stream.wait(i)
                begin = max(t, float(stream.arrival[i]))
                experts, begins, ends, waits = laid.setdefault((k, piece), ([], [], [], []))
                experts.append(e)
                begins.append(begin)
                waits.append(begin - t)
                waited += begin - t
                t = begin + cycles
                ends.append(t)
                if last_use:
                    frees[0].append(t)
                    frees[1].append(float(eng.sizes[i]))
                if backward and piece == pieces - 1:
                    grads[0].append(t)
                    grads[1].append(eng.op_bytes[op])
    _flush(eng, frees)
    for (k, _piece), (experts, begins, ends, waits) in laid.items():
        record(eng, ops[k], pass_, layer, backward, np.array(experts), np.array(begins), np.array(ends),
               np.array(waits), eng.expert_chunks[chunk_pass, layer, ops[k]].shape[0])
    if t > env.now:
        yield env.timeout(t - env.now)
    close_phase(eng, start, waited, layer, pass_)
    if backward:
        yield from send_gradients(eng, np.array(grads[0]), np.array(grads[1]), layer, pass_)


def _flush(eng: _Engine, frees: tuple[list[float], list[float]]) -> None:
    if frees[0]:
        eng.stream.free_at(np.array(frees[0]), np.array(frees[1]))
        frees[0].clear()
        frees[1].clear()


def record(eng: _Engine, op: str, pass_: str, layer: int, backward: bool, experts: np.ndarray, start: np.ndarray,
           end: np.ndarray, wait: np.ndarray, pieces: int) -> None:
    """Keep a batch of expert ops in the trace, and count their FLOPs."""
    eng.trace.expert_ops.append(ExpertOps(op, pass_, layer, backward, experts, start, end, wait,
                                          eng.compute_bound[op, backward][layer, experts], pieces))
    eng.trace.executed_flops += eng.s.expert_op_flops(op, float(eng.plan.tokens[layer, experts].sum()),
                                                      backward) / pieces


def close_phase(eng: _Engine, start: float, waited: float, layer: int, pass_: str) -> None:
    """The phase's spans: ``experts`` up to the critical path's waits, then ``weight_stall`` for them."""
    end = eng.env.now
    split = min(max(end - waited, start), end)
    eng.trace.spans.append(("step", "experts", start, split, {"layer": layer, "pass": pass_}))
    if split < end:
        eng.trace.spans.append(("step", "weight_stall", split, end,
                                {"layer": layer, "pass": pass_, "during": "experts"}))


def send_gradients(eng: _Engine, at: np.ndarray, nbytes: np.ndarray, layer: int,
                   pass_: str) -> Generator[Any, Any, None]:
    """Hand the phase's weight gradients (in order of hand-over) to the outbound link, then stall while
    its buffer holds more than fits."""
    eng.grads.send(at, nbytes)
    eng.trace.gradients.append(("expert grads", {"layer": layer, "count": len(at)}))
    yield from eng._gradient_room({"layer": layer, "pass": pass_})
