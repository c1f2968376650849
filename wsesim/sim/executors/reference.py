"""The reference engine: a second executor of the same programs as the fast engine (``engine.py``),
written in plain SimPy, slow and obvious, to vouch for it (docs/model.md §2, §3, §11.4). Simulated time
is in clock cycles, sizes in bytes. The order of work is the program's (``builders.training`` for a
training step, ``builders.serving`` for serving), run op by op, once per micro-batch.

It shares with the fast engine only data — the program with its chunk plan, the cost pass's costs, the
FLOP and byte counts and the trace's records — and the loop of ``executor.Executor``, never scheduling
code: the inbound link is a process ``put``ting each chunk's bytes into a ``simpy.Container`` (the weight
half of the staging SRAM) and ``get``ting them back at the chunk's last use (docs/model.md §2.2); the
wafer and each expert region are ``simpy.Resource``s, with a process per attention tile and per region
and phase, each op (piece) a timeout once its chunk has arrived and its region is free; a cluster's tree
is a process per level (``relay``); the outbound link takes gradients from a ``simpy.Store``, FIFO
(§2.3); serving is ``reference_batching``'s processes.

Where the fast engine is subtle, what the reference does and why it is the same model:

* Frees registered ahead (``WeightStream.free_at``): here a free is a ``get`` at its own cycle. A get
  retries the blocked put at once, so a chunk starts at max(previous arrival, first cycle its room
  exists) — the start the fast stream decides from the frees it has registered up to that cycle.
* The 1e-12 capacity slack: the Container's capacity is that same slackened bound, and its level is an
  exact ``Fraction`` of the (float) chunk sizes, so a get always finds its bytes and no decision hangs on
  summation order; the fast engine's float level differs from the exact one by far less than the slack,
  and a real overfill is at least a fraction of a byte, far more. The outbound room check uses the same
  bound, ``max(capacity − incoming, 0)·(1 + 1e-12)``.
* Ties at equal cycles: a get and the put it unblocks happen in the same cycle whatever their order in
  the event queue; an op whose chunk arrives in the cycle its region frees starts in that cycle.
  Gradients handed over in the same cycle enter the link ordered by (slot, op, region), as the fast
  engine sorts them — it matters, because their departures one by one decide when the buffer has room:
  they are collected during the cycle and put into the Store by a zero-delay event, which is queued
  after every op ending in that cycle (those timeouts were scheduled when the ops began).
* Float rounding: the tiles' spans here accumulate (each tile starts where the last ended) where the
  fast engine multiplies (start + i·cycles), its gradient link uses a closed form of the FIFO recurrence
  and it sums FLOPs per array rather than per op. So results agree bit for bit only where the cycles are
  round numbers (tiny8), and otherwise to ~1e-13 relative (the full Qwen3-30B-A3B step on WSE-2).

Raises ``RuntimeError`` if a chunk is freed whose bytes are not in the buffer (a bookkeeping error), and
SimPy's ``RuntimeError`` if the event queue runs dry before the step has ended (a deadlock).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from fractions import Fraction
from math import fsum
from typing import Any

import numpy as np
import simpy

from ...config.specs import DTYPE_BYTES
from ...model.shapes import BACKWARD_OPS, FORWARD_OPS, LayerShapes
from ...model.vocabulary import Copy, Gradient, OpKind, Pass, Phase, Track
from ..cost.costing import Costs
from ..programs.chunks import ChunkPlan
from ..programs.cluster import io_rate
from ..programs.plan import ExpertOps, LinkSchedule, Span, StepPlan, Trace
from ..programs.program import Drain, Experts, GradientOut, Program, ServeBatches, WaferOp, Weights
from .executor import Executor
from .links import consume
from .relay import relay

__all__ = ["simulate"]

SLACK = 1 + 1e-12
"""Relative slack on both staging buffers' capacity, as in the fast engine (``links``)."""


@dataclass
class _Gradient:
    """One gradient on its way out: handed over at ``at``, on the link from ``start`` until ``left``."""

    nbytes: float
    at: float
    order: tuple[int, ...]  # tie order among gradients handed over in the same cycle
    batch: int
    start: float = np.nan
    left: float = np.nan


class _Reference(Executor):
    def __init__(self, plan: StepPlan | None, program: Program, costs: Costs) -> None:
        super().__init__(plan, program, costs)
        self.handlers.update({OpKind.SERVE_BATCHES: self._serve_batches})
        if program.chunks is not None:
            assert plan is not None
            self._resources(plan, program.chunks)

    def _resources(self, plan: StepPlan, chunks: ChunkPlan) -> None:
        """The training step's: the staging buffer, the wafer, the expert regions, the links' queues."""
        hw, m, env = plan.hw, plan.model, self.env
        self.s = LayerShapes(m)
        self.g = DTYPE_BYTES[plan.training.weight_gradient_dtype]  # bytes per weight gradient value
        self.rate = io_rate(hw, plan.tree)
        self.latency = plan.tree.latency if plan.tree is not None else 0.0  # first bytes: start + latency
        self.recompute = plan.training.activations == "recompute"
        self.chunks = chunks
        self.offset = 0  # the current micro-batch's first chunk
        n = len(self.chunks)
        half = self.chunks.staging_bytes / 2  # half for weights in, half for gradients out
        self.weights = simpy.Container(env, capacity=Fraction(half * SLACK))
        self.arrived = [env.event() for _ in range(n)]
        self.start, self.arrival = np.full(n, np.nan), np.full(n, np.nan)
        self.copied: set[int] = set()  # whole-wafer chunks already copied out (and freed)
        self.freed: list[tuple[float, float]] = []  # (cycle, bytes) of every free, for the trace's counters
        self.bytes_in = 0.0
        self.wafer = simpy.Resource(env, capacity=1)
        self.regions = [simpy.Resource(env, capacity=1) for _ in plan.expert_regions]
        self.members: list[list[int]] = [[] for _ in plan.expert_regions]
        for e, r in enumerate(plan.expert_region_of):
            self.members[r].append(e)
        self.grad_capacity = half
        self.outbox = simpy.Store(env)
        self.sent: list[_Gradient] = []  # every gradient handed over, in hand-over order
        self.held: list[_Gradient] = []  # handed over and not known to have left
        self.same_cycle: list[_Gradient] = []  # handed over this cycle, not yet in the Store
        self.departure = env.event()  # triggered (and replaced) each time a gradient leaves
        self.departed = 0
        self.at_memoryx = simpy.Store(env)  # gradients' sums that have come up a cluster's tree
        # a chunk's last byte has left MemoryX, a gradient's the wafer: in a cluster, through the tree
        self.to_wafer = self._arrive if plan.tree is None else relay(env, plan.tree, self._arrive).put
        self.to_memoryx = None if plan.tree is None else relay(env, plan.tree, self.at_memoryx.put).put

    # ------------------------------------------------------------------------------ the inbound link
    def _inbound(self) -> Generator[Any, Any, None]:
        env = self.env
        for i, size in enumerate(self.chunks.sizes.tolist()):
            yield self.weights.put(Fraction(size))  # blocks while the buffer is full
            self.start[i] = env.now
            self.bytes_in += size
            yield env.timeout(size / self.rate)
            self.to_wafer(i)

    def _arrive(self, i: int) -> None:
        self.arrival[i] = self.env.now
        self.arrived[i].succeed()

    def _free(self, i: int) -> None:
        self.freed.append((float(self.env.now), float(self.chunks.sizes[i])))
        if not self.weights.get(Fraction(float(self.chunks.sizes[i]))).triggered:
            raise RuntimeError(f"chunk {self.chunks.names[i]} freed but its bytes are not in the buffer")

    def _weights(self, op: Weights) -> Generator[Any, Any, None]:
        """Wait for a whole-wafer tensor, copying each piece out (and freeing it) as it arrives."""
        self._close_pending()
        start = self.env.now
        first, last = (self.offset + i for i in self.chunks.keys[op.key])
        for i in range(first, last + 1):
            yield self.arrived[i]
            if i not in self.copied:  # a recompute and its backward share the backward copy
                self.copied.add(i)
                self._free(i)
        self._waited(start, float(self.start[first]) + self.latency, op.args)

    # ----------------------------------------------------------------------------- the outbound link
    def _outbound(self) -> Generator[Any, Any, None]:
        env = self.env
        while True:
            g = yield self.outbox.get()
            g.start, g.left = env.now, env.now + g.nbytes / self.rate
            yield env.timeout(g.nbytes / self.rate)
            self.departed += 1
            self.departure.succeed()
            self.departure = env.event()
            if self.to_memoryx:  # every wafer's copy leaves in this cycle: summed on the way up
                self.to_memoryx(g)

    def _hand_over(self, nbytes: float, order: tuple[int, ...], batch: int) -> None:
        g = _Gradient(nbytes, self.env.now, order, batch)
        self.sent.append(g)
        self.held.append(g)
        self.same_cycle.append(g)
        if len(self.same_cycle) == 1:
            self.env.timeout(0).callbacks.append(self._to_link)

    def _to_link(self, _: Any) -> None:
        for g in sorted(self.same_cycle, key=lambda g: g.order):
            self.outbox.put(g)
        self.same_cycle = []

    def _gradient_room(self, args: dict[str, Any], incoming: float = 0.0) -> Generator[Any, Any, None]:
        """Stall while the outbound buffer holds more than fits (with ``incoming`` bytes more)."""
        env, start = self.env, self.env.now
        limit = max(self.grad_capacity - incoming, 0.0) * SLACK
        while True:
            self.held = [g for g in self.held if not g.left <= env.now]  # not started, or leaving later
            if fsum(g.nbytes for g in self.held) <= limit:
                break
            yield self.departure
        self._since(start, Phase.GRADIENT_STALL, args)

    def _gradient(self, op: GradientOut) -> Generator[Any, Any, None]:
        yield from self._gradient_room(op.args, op.nbytes)
        self._hand_over(op.nbytes, (), len(self.trace.gradients))
        self.trace.gradients.append((op.gradient, dict(op.args)))

    # ------------------------------------------------------------------------------------ compute ops
    def _on_wafer(self, op: WaferOp, args: dict[str, Any]) -> Generator[Any, Any, None]:
        """One run of a whole-wafer op, once the wafer is free."""
        cost = self.costs.wafer[op]
        bound = cost.bound
        with self.wafer.request() as request:
            yield request
            start = self.env.now
            if self.pending is None:
                yield self.env.timeout(cost.cycles)
            else:  # the first run after a weights wait: from the first bytes, no earlier than the last
                start, end = self._consumed(cost.cycles)
                if end > start + cost.cycles:
                    bound = "stream"
                yield self.env.timeout(end - self.env.now)
        self.trace.spans.append(Span(Track.STEP, op.kind, start, self.env.now, {
            **args, "flops": op.flops, "weight_bytes": op.weight_bytes, "bound": bound}))
        if op.useful:
            self.trace.executed_flops += op.flops

    def _wafer(self, op: WaferOp) -> Generator[Any, Any, None]:
        """A whole-wafer op; a tiled one is one process per tile, queued on the wafer in tile order."""
        if not op.tiles:
            yield from self._on_wafer(op, dict(op.args))
            return
        tiles = [self.env.process(self._on_wafer(op, {**op.args, "tile": i})) for i in range(op.tiles)]
        yield simpy.AllOf(self.env, tiles)

    def _region(self, r: int, layer: int, pass_: str, chunk_pass: str, backward: bool,
                batch: int) -> Generator[Any, Any, None]:
        """Region r's experts in slot order, each op (piece) when its chunk has arrived and r is free."""
        env, p, s = self.env, self.plan, self.s
        # backward copies serve recompute, then backward
        frees = pass_ != Pass.RECOMPUTE or chunk_pass == Copy.REC
        for slot, e in enumerate(self.members[r]):
            tokens = float(p.tokens[layer, e])
            for k, op in enumerate(BACKWARD_OPS if backward else FORWARD_OPS):
                flops = s.expert_op_flops(op, tokens, backward)
                # the cost pass's
                cycles = float(self.costs.experts.cycles[op, backward][layer, e])
                bound = bool(self.costs.experts.compute_bound[op, backward][layer, e])
                chunks = (self.chunks.expert_chunks[chunk_pass, layer, op][:, e] + self.offset).tolist()
                for piece, i in enumerate(chunks):
                    with self.regions[r].request() as request:
                        yield request
                        free = env.now
                        yield self.arrived[i]
                        begin, end, waited = consume(free, float(self.start[i]) + self.latency, env.now,
                                                     cycles / len(chunks), self.pipelined)
                        self.waited[r] += waited
                        yield env.timeout(end - env.now if self.pipelined else cycles / len(chunks))
                        self.ended[r] = env.now
                    self.trace.expert_ops.append(ExpertOps(
                        op, pass_, layer, backward, np.array([e]), np.array([begin]), np.array([env.now]),
                        np.array([waited]), np.array([bound]), len(chunks)))
                    self.trace.executed_flops += flops / len(chunks)
                    if frees:
                        self._free(i)
                    if backward and piece == len(chunks) - 1:
                        self._hand_over(s.expert_op_bytes(op, self.g), (slot, k, r), batch)

    def _experts(self, op: Experts) -> Generator[Any, Any, None]:
        """Every region with experts runs them as a process of its own (in place the plan gives one
        region: the whole wafer); the phase is the critical region's, the first of those that ended last,
        and its waits for weights are the phase's weight stall."""
        env, start, layer, pass_ = self.env, self.env.now, op.layer, op.pass_
        batch = len(self.trace.gradients)
        self.waited = [0.0] * len(self.regions)  # per region, cycles its ops waited for their weights
        self.ended = [start] * len(self.regions)
        regions = [env.process(self._region(r, layer, pass_, op.copy, op.backward, batch))
                   for r in range(len(self.regions)) if self.members[r]]
        yield simpy.AllOf(env, regions)
        critical = max(range(len(self.regions)), key=lambda r: (self.ended[r], -r))
        self.trace.experts_spans(start, env.now, self.waited[critical], layer, pass_)
        if op.backward:
            count = sum(g.batch == batch for g in self.sent)
            self.trace.gradients.append((Gradient.EXPERTS, {"layer": layer, "count": count}))
            yield from self._gradient_room({"layer": layer, "pass": pass_})

    # --------------------------------------------------------------------------------------- the step
    def _gradient_drain(self, op: Drain) -> Generator[Any, Any, None]:
        """The step ends when the last gradient has left ..."""
        start = self.env.now
        while self.departed < len(self.sent):
            yield self.departure
        self._since(start, Phase.GRADIENT_DRAIN, op.args)

    def _reduce_drain(self, op: Drain) -> Generator[Any, Any, None]:
        """... and, in a cluster, when its sum has reached MemoryX."""
        start = self.env.now
        for _ in self.sent:
            yield self.at_memoryx.get()
        self._since(start, Phase.REDUCE_DRAIN, op.args)

    def _micro_batch(self, i: int) -> None:
        self.offset = i * self.chunks.per_micro_batch

    def _start_links(self) -> None:
        self.env.process(self._inbound())
        self.env.process(self._outbound())

    # ---------------------------------------------------------------------------------------- serving
    def _serve_batches(self, op: ServeBatches) -> Generator[Any, Any, None]:
        """Continuous batching as processes and resources (``reference_batching``)."""
        # local: serving's scheduler loads when a program serves, not at the start of every training run
        from .reference_batching import serve_batches

        self.trace.batches = yield from serve_batches(self.env, op, self.costs.stations())

    def _link_records(self, tr: Trace) -> None:
        c, env = self.chunks, self.env
        tr.io_bytes_in = self.bytes_in
        tr.io_bytes_out = fsum(g.nbytes for g in self.sent if g.left <= env.now)
        freed = np.array(self.freed, dtype=float).reshape(-1, 2)
        tr.io_in = LinkSchedule(tuple(c.names), c.sizes.copy(), self.start, self.arrival,
                                (freed[:, 0], freed[:, 1]))
        tr.staging_held_at_end = float(self.weights.level)
        for batch in range(len(tr.gradients)):  # (start, left, bytes) arrays per hand-over, in link order
            out = sorted((g for g in self.sent if g.batch == batch), key=lambda g: g.start)
            tr.gradient_batches.append(tuple(np.array([getattr(g, f) for g in out])
                                             for f in ("start", "left", "nbytes")))


def simulate(plan: StepPlan | None, program: Program, costs: Costs) -> Trace:
    """Execute ``program`` at ``costs`` (the cost pass's) with the reference engine; returns the trace
    (spans in cycles) and counters, as ``engine.simulate`` does. A serving program needs no plan (None).
    Raises ``RuntimeError`` on a bookkeeping error or a deadlock."""
    return _Reference(plan, program, costs).run()
