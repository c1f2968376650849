"""The experts phase of the fast engine (docs/model.md §3): how a layer's experts run, under either MoE
mapping. Simulated time is in clock cycles.

* ``regions``: every expert region in parallel; each runs its experts one after another, each op as soon
  as its weights have arrived and its region is free, and frees the weights after their last use. A
  region whose next chunk is already scheduled is laid out with array arithmetic, without events (the
  timeline is the same); the regions that reach a chunk the stream has not yet scheduled continue in one
  loop that lays each of them out as far as the stream has got, then waits for the earliest chunk any of
  them needs (a region waiting on its own would see the same timeline: see ``_stragglers``).
* ``in_place``: the whole wafer runs every expert's ops one after another, in chunk order, each when its
  weights have arrived: one chain, laid out with float arithmetic until it reaches a chunk the stream
  has not scheduled, then waiting for it.

Either way the phase's span on the step timeline is split in two: ``experts`` and, for the time the
phase's critical path (the region that finished last, or the wafer) waited for weights, ``weight_stall``
(with ``during: experts``) — so an I/O-bound step shows as I/O-bound. The split is an accounting of the
critical path, not the order in which it waited: the stall span is put at the phase's end.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from ...config.specs import DTYPE_BYTES
from ...model.shapes import BACKWARD_OPS, EXPERT_SHARE, FORWARD_OPS, LayerShapes
from ...model.vocabulary import Copy, Gradient, Pass
from ..cost.costing import Costs
from ..programs.chunks import ChunkPlan
from ..programs.plan import ExpertOps, StepPlan, Trace
from ..programs.program import Experts
from .links import GradientLink, WeightStream, consume

__all__ = ["MAPPINGS", "ExpertsPhase"]

Grad = tuple[np.ndarray, ...]  # arrays of (hand-over cycle, bytes, slot, op index, region), one per gradient
RoomFn = Callable[[dict[str, Any]], Generator[Any, Any, None]]  # stall until the outbound buffer has room


def _last_use(pass_: str, chunk_pass: str) -> bool:
    """A recompute that shares the backward copy of a layer's weights leaves them for the backward."""
    return pass_ != Pass.RECOMPUTE or chunk_pass == Copy.REC


class ExpertsPhase:
    """The experts phase's own state, given what it needs: the plan (tokens, regions), the step's costs
    (its expert ops', whether they are pipelined), the chunk plan, the clock, both links, the trace it
    records into, and how to stall for outbound room.

    ``slots[j, r]`` is the j-th expert region r runs (-1: none); ``run(op)`` executes an ``EXPERTS`` op
    under the plan's MoE mapping (``MAPPINGS``)."""

    def __init__(self, plan: StepPlan, costs: Costs, chunks: ChunkPlan, env: simpy.Environment,
                 stream: WeightStream, grads: GradientLink, trace: Trace, gradient_room: RoomFn) -> None:
        self.plan, self.env, self.stream, self.grads, self.trace = plan, env, stream, grads, trace
        self.gradient_room = gradient_room
        self.chunks, self.expert_chunks, self.chunk_bytes = chunks, chunks.expert_chunks, chunks.sizes
        self.s = LayerShapes(plan.model)
        self.cost = costs.experts.cycles
        self.compute_bound = costs.experts.compute_bound  # else bound by the weight feed
        g = DTYPE_BYTES[plan.training.weight_gradient_dtype]
        self.op_bytes = {op: self.s.expert_op_bytes(op, g) for op in EXPERT_SHARE}  # their gradients' bytes
        R = len(plan.expert_regions)
        members: list[list[int]] = [[] for _ in range(R)]
        for e, r in enumerate(plan.expert_region_of):
            members[r].append(e)
        K = max((len(x) for x in members), default=0)
        self.slots = np.full((K, R), -1, dtype=np.int64)
        for r, experts in enumerate(members):
            self.slots[: len(experts), r] = experts
        self._phase = MAPPINGS[plan.moe_mapping] if plan.model.experts else None
        self.pipelined = costs.pipelined  # an op consumes its weights as they arrive (links.consume)

    def use_micro_batch(self, i: int) -> None:
        """Index micro-batch i's copy of the experts' chunks."""
        c, off = self.chunks, i * self.chunks.per_micro_batch
        self.expert_chunks = {k: v + off for k, v in c.expert_chunks.items()} if off else c.expert_chunks

    def run(self, op: Experts) -> Generator[Any, Any, None]:
        yield from self._phase(self, op.layer, op.pass_, op.copy, op.backward)


def regions_phase(eng: ExpertsPhase, layer: int, pass_: str, chunk_pass: str,
                  backward: bool) -> Generator[Any, Any, None]:
    """All expert regions in parallel (an op whose weights came in several pieces runs piece by piece)."""
    env, stream, start = eng.env, eng.stream, eng.env.now
    ops = BACKWARD_OPS if backward else FORWARD_OPS
    last_use = _last_use(pass_, chunk_pass)
    R = eng.slots.shape[1]
    t = np.full(R, start)
    wait = np.zeros(R)  # cycles each region waited for weights in this phase
    stopped = np.zeros(R, dtype=bool)  # regions continuing in the straggler loop
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
                begin, end, waited = consume(t[regions], stream.start[index] + stream.latency, arrival,
                                             eng.cost[op, backward][layer, ex] / pieces, eng.pipelined)
                record(eng, op, pass_, layer, backward, ex, begin, end, waited, pieces)
                wait[regions] += waited
                t[regions] = end
                if last_use:
                    stream.free_at(end, eng.chunk_bytes[index])
                if backward and piece == pieces - 1:
                    n = len(regions)
                    grads.append((end, np.full(n, eng.op_bytes[op]), np.full(n, j), np.full(n, k), regions))
    if resume:
        yield from _stragglers(eng, resume, t, wait, layer, pass_, chunk_pass, backward, last_use, grads)
    critical = int(np.argmax(t))
    end = max(float(t[critical]), start)
    if end > env.now:
        yield env.timeout(end - env.now)
    close_phase(eng, start, float(wait[critical]), layer, pass_)
    if backward:
        at, nbytes, slot, op_index, region = (np.concatenate([g[i] for g in grads]) for i in range(5))
        # in order of hand-over; in one cycle by (slot, op, region), however the phase was laid out
        order = np.lexsort((region, op_index, slot, at))
        yield from send_gradients(eng, at[order], nbytes[order], layer, pass_)


def _record_pieces(eng: ExpertsPhase, op: Any, pass_: str, layer: int, backward: bool, ee: np.ndarray,
                   begin: np.ndarray, end: np.ndarray, waited: np.ndarray, pieces: int,
                   pg: np.ndarray) -> None:
    """A round's runs of ``op`` recorded: one record when they are all one piece of it, else one a piece
    (records keep one piece count per batch)."""
    if pieces == 1 or (pg == pg[0]).all():
        record(eng, op, pass_, layer, backward, ee, begin, end, waited, pieces)
        return
    for piece in np.unique(pg):
        same = pg == piece
        record(eng, op, pass_, layer, backward, ee[same], begin[same], end[same], waited[same], pieces)


def _stragglers(eng: ExpertsPhase, pending: list[tuple[int, int, int, int]], t: np.ndarray, wait: np.ndarray,
                layer: int, pass_: str, chunk_pass: str, backward: bool, last_use: bool,
                grads: list[Grad]) -> Generator[Any, Any, None]:
    """The regions ``pending`` (region, slot, op index, piece) stopped at, continued: in rounds, every
    region whose next chunk is scheduled runs its next op (array arithmetic over the regions); when none
    can, the loop waits for the earliest chunk any of them still needs.

    The timeline is the one each region would have as a process of its own. A region's op starts at
    max(region free, chunk arrival) either way (``links.consume``; pipelined, its first bytes' arrival);
    registering its frees as soon as its chunk is scheduled
    (not when the chunk arrives) is only earlier, and the stream decides nothing beyond the next event
    in the queue — here the arrival of the earliest chunk waited for, which no pending region's free
    precedes (its chunk comes later on the in-order link).
    """
    stream = eng.stream
    ops = BACKWARD_OPS if backward else FORWARD_OPS
    K = eng.slots.shape[0]
    chunks = [eng.expert_chunks[chunk_pass, layer, op] for op in ops]  # [pieces, experts] per op
    r, j, k, p = (np.array(x, dtype=np.int64) for x in zip(*sorted(pending), strict=True))
    while len(r):
        e = eng.slots[np.minimum(j, K - 1), r]
        live = (j < K) & (e >= 0)
        if not live.all():  # regions past their last expert drop out
            r, j, k, p, e = r[live], j[live], k[live], p[live], e[live]
            if not len(r):
                break
        i = np.empty(len(r), dtype=np.int64)
        for op_index, table in enumerate(chunks):
            mine = k == op_index
            i[mine] = table[p[mine], e[mine]]
        ready = i < stream.next
        if not ready.any():  # every pending region needs a chunk the stream has not scheduled
            yield stream.wait(int(i.min()))
            continue
        k_now = k.copy()
        for op_index, op in enumerate(ops):  # one round: each ready region runs its next op (piece)
            go = ready & (k_now == op_index)
            if not go.any():
                continue
            pieces = chunks[op_index].shape[0]
            rr, ee, ii = r[go], e[go], i[go]
            begin, end, waited = consume(t[rr], stream.start[ii] + stream.latency, stream.arrival[ii],
                                         eng.cost[op, backward][layer, ee] / pieces, eng.pipelined)
            _record_pieces(eng, op, pass_, layer, backward, ee, begin, end, waited, pieces, p[go])
            wait[rr] += waited
            t[rr] = end
            if last_use:
                stream.free_at(end, eng.chunk_bytes[ii])
            last = p[go] == pieces - 1
            if backward and last.any():
                n = int(last.sum())
                grads.append((end[last], np.full(n, eng.op_bytes[op]), j[go][last], np.full(n, op_index),
                              rr[last]))
            p[go] += 1
            wrap = go & (p == pieces)
            p[wrap], k[wrap] = 0, k[wrap] + 1
            nxt = wrap & (k == len(ops))
            k[nxt], j[nxt] = 0, j[nxt] + 1


def in_place_phase(eng: ExpertsPhase, layer: int, pass_: str, chunk_pass: str,
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
                begin, end, wait = consume(t, float(stream.start[i]) + stream.latency,
                                           float(stream.arrival[i]), cycles, eng.pipelined)
                experts, begins, ends, waits = laid.setdefault((k, piece), ([], [], [], []))
                experts.append(e)
                begins.append(begin)
                waits.append(wait)
                waited += wait
                t = end
                ends.append(t)
                if last_use:
                    frees[0].append(t)
                    frees[1].append(float(eng.chunk_bytes[i]))
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


def _flush(eng: ExpertsPhase, frees: tuple[list[float], list[float]]) -> None:
    if frees[0]:
        eng.stream.free_at(np.array(frees[0]), np.array(frees[1]))
        frees[0].clear()
        frees[1].clear()


def record(eng: ExpertsPhase, op: str, pass_: str, layer: int, backward: bool, experts: np.ndarray,
           start: np.ndarray, end: np.ndarray, wait: np.ndarray, pieces: int) -> None:
    """Keep a batch of expert ops in the trace, and count their FLOPs."""
    eng.trace.expert_ops.append(ExpertOps(op, pass_, layer, backward, experts, start, end, wait,
                                          eng.compute_bound[op, backward][layer, experts], pieces))
    eng.trace.executed_flops += eng.s.expert_op_flops(op, float(eng.plan.tokens[layer, experts].sum()),
                                                      backward) / pieces


def close_phase(eng: ExpertsPhase, start: float, waited: float, layer: int, pass_: str) -> None:
    """The phase's spans (``Trace.experts_spans``), its critical path having waited ``waited`` cycles."""
    eng.trace.experts_spans(start, eng.env.now, waited, layer, pass_)


def send_gradients(eng: ExpertsPhase, at: np.ndarray, nbytes: np.ndarray, layer: int,
                   pass_: str) -> Generator[Any, Any, None]:
    """Hand the phase's weight gradients (in order of hand-over) to the outbound link, then stall while
    its buffer holds more than fits."""
    eng.grads.send(at, nbytes)
    eng.trace.gradients.append((Gradient.EXPERTS, {"layer": layer, "count": len(at)}))
    yield from eng.gradient_room({"layer": layer, "pass": pass_})


MAPPINGS = {"regions": regions_phase, "in_place": in_place_phase}
"""The experts phase under each MoE mapping (``simulation.moe_mapping``)."""
