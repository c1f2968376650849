"""The fast engine: executes a program (``program.Program``: a training step built by
``builders.training``, serving requests by ``builders.serving``) at the costs of the cost pass
(``costing``), as SimPy processes and resources (docs/model.md §2, §3, §11.4). Simulated time is in
clock cycles.

* the inbound link (``links.WeightStream``, a process) fills the bounded staging buffer with weight
  chunks in order of first use, and waits while the buffer is full;
* the outbound link (``links.GradientLink``) carries weight gradients out, FIFO;
* ``_step`` (a process) runs the program's ops in order, once per micro-batch (every weight streams in
  again for each): a ``WEIGHTS`` op waits for its chunks, a whole-wafer op takes its cost model's cycles,
  per tile when it is tiled (under ``compute: kernel`` its first run consumes its weights as they arrive:
  ``links.consume``), a fabric op the fabric's, the ``EXPERTS`` op the experts phase
  (``experts.ExpertsPhase``), a ``GRADIENT`` op hands its bytes to the outbound link; the drains end the
  step when the last gradient has left (in a cluster: when its sum has come through the reduce tree);
* a ``SERVE_BATCHES`` op (served requests) advances a whole iteration of a station at a time, the
  scheduler's (``scheduler.Scheduler``), in one loop over event times (``batching.run_batches``).

A hot expert straggles, a late chunk stalls only its expert, a full buffer stalls the stream: overlap,
stalls and contention emerge from these. The engine never prints or writes files; it returns a
``Trace`` and ``wsesim.analysis.results`` measures it afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from ..model.vocabulary import OpKind, Phase, Track
from .cluster import io_rate
from .costing import Costs, with_defaults
from .counting import CountingEnvironment
from .experts import ExpertsPhase
from .links import GradientLink, Pending, WeightStream, close_wait, consume
from .plan import Span, StepPlan, Trace
from .program import (
    WAFER_OPS,
    Drain,
    GradientOut,
    Op,
    OptimizerStep,
    Program,
    ServeBatches,
    Transfer,
    WaferOp,
    Weights,
)

__all__ = ["simulate"]

Run = Callable[[Op], Generator[Any, Any, None]]

_CONSUMERS = frozenset({OpKind.WEIGHTS, *WAFER_OPS})
"""The ops before which a pipelined weights wait stays open: another wait, or the op that consumes it."""


class _Engine:
    def __init__(self, plan: StepPlan | None, program: Program, costs: Costs) -> None:
        self.plan, self.program, self.costs = plan, program, costs
        self.env = CountingEnvironment()
        self.trace = Trace()
        self.events: int | None = None  # a serving run's stage visits (the heap's events)
        self._pending: Pending | None = None  # see _links
        self._consumed = False  # the current whole-wafer op's first run consumed a weights wait
        self._run: dict[OpKind, Run] = {OpKind.SERVE_BATCHES: self._serve_batches}
        if program.chunks is not None:
            assert plan is not None, "a program that streams weights needs the step's plan"
            self._links(plan, program)

    def _links(self, plan: StepPlan, program: Program) -> None:
        """The training step's resources: the weight stream, the gradient link, the experts phase."""
        hw, chunks = plan.hw, program.chunks
        assert chunks is not None
        self.chunks = chunks
        self.keys = chunks.keys
        self.trace.restreamed_for_recompute = chunks.restreamed_for_recompute
        self.sizes = chunks.sizes
        self.copied_out = np.zeros(len(chunks), dtype=bool)  # whole-wafer chunks already freed
        # compute: kernel pipelines an op with its weights' arrival (links.consume): the last weights wait
        # (its start, the first bytes' arrival, the last's, its args) until an op consumes it
        self.pipelined = plan.compute == "kernel"
        staging = chunks.staging_bytes  # half for weights in, half for gradients out
        rate, latency = io_rate(hw, plan.tree), (plan.tree.latency if plan.tree else 0.0)
        self.stream = WeightStream(self.env, chunks.names, chunks.sizes, staging / 2, rate, latency)
        self.grads = GradientLink(staging / 2, rate)
        self.experts = ExpertsPhase(plan, chunks, self.env, self.stream, self.grads, self.trace,
                                    self._gradient_room)
        self._fabric_times: dict[tuple[int, bool], tuple[float, float]] = {}
        self._run.update({kind: self._wafer for kind in WAFER_OPS})
        self._run.update({OpKind.WEIGHTS: self._weights, OpKind.DISPATCH: self._fabric,
                          OpKind.COMBINE: self._fabric, OpKind.EXPERTS: self.experts.run,
                          OpKind.GRADIENT: self._gradient,
                          OpKind.GRADIENT_DRAIN: self._drain, OpKind.REDUCE_DRAIN: self._reduce_drain,
                          OpKind.OPTIMIZER_STEP: self._optimizer})

    # --------------------------------------------------------------------------------- weight chunks
    def _use_micro_batch(self, i: int) -> None:
        """Index micro-batch i's copy of every chunk: the first micro-batch's, ``i · per_micro_batch`` on."""
        c, off = self.chunks, i * self.chunks.per_micro_batch
        self.keys = {k: (a + off, b + off) for k, (a, b) in c.keys.items()} if off else c.keys
        self.experts.use_micro_batch(i)

    def _weights(self, op: Weights) -> Generator[Any, Any, None]:
        """Wait (a stall of the step) for the weights of ``op.weights``: whole-wafer weights (attention,
        router, LM head, embedding) are copied out of the staging buffer into their resident place as
        each piece arrives, so the buffer never has to hold all of them at once."""
        env, stream, start = self.env, self.stream, self.env.now
        self._close_pending()
        first, last = self.keys[op.key]
        for i in range(first, last + 1):
            if i >= stream.next:
                yield stream.wait(i)
            arrival = float(stream.arrival[i])
            if arrival > env.now:
                yield env.timeout(arrival - env.now)
            if not self.copied_out[i]:  # a recompute and its backward wait for the same copy: free it once
                self.copied_out[i] = True
                stream.free(self.sizes[i])
        if self.pipelined:  # the next whole-wafer op may have started with the first bytes (links.consume)
            self._pending = (start, float(stream.start[first]) + stream.latency, env.now, dict(op.args))
        elif env.now > start:
            self.trace.spans.append(Span(Track.STEP, Phase.WEIGHT_STALL, start, env.now, dict(op.args)))

    def _close_pending(self) -> None:
        close_wait(self.trace, self._pending)
        self._pending = None

    def _first_run(self, cycles: float) -> tuple[float, float]:
        """(begin, end) of a whole-wafer op's first run: now and now + cycles, or, pipelined after a weights
        wait (``_consumed``), from its weights' first bytes to no earlier than their last
        (``links.consume``)."""
        self._consumed = self._pending is not None
        if self._pending is None:
            return self.env.now, self.env.now + cycles
        start, head, arrival, args = self._pending
        self._pending = None
        begin, end, _ = consume(start, head, arrival, cycles, True)
        if begin > start:
            self.trace.spans.append(Span(Track.STEP, Phase.WEIGHT_STALL, start, begin, args))
        return begin, end

    # ---------------------------------------------------------------------------------- compute ops
    def _wafer(self, op: WaferOp) -> Generator[Any, Any, None]:
        """A whole-wafer op, or its ``tiles`` runs back to back (one span each)."""
        cost = self.costs.wafer[op]
        start, cycles, spans = self.env.now, cost.cycles, self.trace.spans
        begin, first_end = self._first_run(cycles)
        # after its first run, each run takes its cycles (the weights are resident)
        shift = first_end - (start + cycles) if self._consumed else 0.0
        for i in range(op.runs):
            args = {**op.args, **({"tile": i} if op.tiles else {}), "flops": op.flops,
                    "weight_bytes": op.weight_bytes, "bound": cost.bound}
            if i == 0 and self._consumed:
                if first_end > begin + cycles:
                    args["bound"] = "stream"  # paced by its weights' arrival
                spans.append(Span(Track.STEP, op.kind, begin, first_end, args))
                continue
            spans.append(Span(Track.STEP, op.kind, start + i * cycles + shift,
                              start + (i + 1) * cycles + shift, args))
        self.trace.executed_flops += op.executed_flops
        yield self.env.timeout(op.runs * cycles + shift)

    def _fabric(self, op: Transfer) -> Generator[Any, Any, None]:
        nbytes = (self.plan.tokens[op.layer].astype(float) * self.plan.model.hidden_size
                  * self.plan.model.bytes_per_value)
        key = (op.layer, op.reverse)  # forward, recompute and backward move the same bytes: time them once
        if key not in self._fabric_times:
            self._fabric_times[key] = self.plan.dispatch(nbytes, op.reverse)
        cycles, max_load = self._fabric_times[key]
        start = self.env.now
        yield self.env.timeout(cycles)
        self.trace.fabric_span(op, start, self.env.now, float(nbytes.sum()), max_load)

    def _gradient_room(self, args: dict[str, Any], incoming: float = 0.0) -> Generator[Any, Any, None]:
        """Stall while the outbound buffer holds more gradients than fit (with ``incoming`` bytes more)."""
        ready = self.grads.room_at(self.env.now, incoming)
        if ready > self.env.now:
            start = self.env.now
            yield self.env.timeout(ready - start)
            self.trace.spans.append(Span(Track.STEP, Phase.GRADIENT_STALL, start, self.env.now, dict(args)))

    def _gradient(self, op: GradientOut) -> Generator[Any, Any, None]:
        """Hand one gradient to the outbound link, once its buffer has room for it."""
        yield from self._gradient_room(op.args, op.nbytes)
        self.grads.send(np.array([self.env.now]), np.array([op.nbytes]))
        self.trace.gradients.append((op.gradient, dict(op.args)))

    # ------------------------------------------------------------------------------- the step's end
    def _drain(self, op: Drain) -> Generator[Any, Any, None]:
        """The step ends when the last gradient has left."""
        yield from self._until(self.grads.link_free_at, Phase.GRADIENT_DRAIN, op)

    def _reduce_drain(self, op: Drain) -> Generator[Any, Any, None]:
        """... and, in a cluster, when its sum has come through the reduce tree."""
        yield from self._until(self.grads.link_free_at + self.plan.tree.latency, Phase.REDUCE_DRAIN, op)

    def _optimizer(self, op: OptimizerStep) -> Generator[Any, Any, None]:
        """MemoryX's weight update: nothing streams until it is done."""
        start, cycles = self.env.now, self.costs.optimizer_cycles
        yield self.env.timeout(cycles)
        self.trace.spans.append(Span(Track.STEP, Phase.OPTIMIZER_STEP, start, self.env.now,
                                     {**op.args, "cycles": cycles}))

    def _until(self, at: float, phase: Phase, op: Drain) -> Generator[Any, Any, None]:
        env = self.env
        if at > env.now:
            start = env.now
            yield env.timeout(at - start)
            self.trace.spans.append(Span(Track.STEP, phase, start, env.now, dict(op.args)))

    # ------------------------------------------------------------------------------------- serving
    def _serve_batches(self, op: ServeBatches) -> Generator[Any, Any, None]:
        """Requests over time, each stage running iteration-level batches (``batching``)."""
        from .batching import run_batches  # serving's continuous batching only

        log = self.trace.batches = run_batches(op, self.costs.stations())
        self.events = len(log.start)  # the iterations
        yield self.env.timeout(log.end_cycle)

    # ----------------------------------------------------------------------------------------- run
    def _step(self) -> Generator[Any, Any, None]:
        run, program = self._run, self.program
        for i in range(program.micro_batches):
            if program.chunks is not None:
                self._use_micro_batch(i)
            for op in program.body:
                if op.kind not in _CONSUMERS:
                    self._close_pending()
                yield from run[op.kind](op)
        self._close_pending()
        for op in program.tail:
            yield from run[op.kind](op)

    def run(self) -> Trace:
        env = self.env
        if self.program.chunks is not None:
            env.process(self.stream.process())
        done = env.process(self._step())
        env.run(until=done)
        tr = self.trace
        tr.step_cycles = float(env.now)
        tr.events = env.processed if self.events is None else self.events
        if self.program.chunks is not None:
            tr.io_bytes_in, tr.io_bytes_out = self.stream.bytes_in, self.grads.bytes_out
            tr.io_in = self.stream.schedule()
            tr.staging_held_at_end = self.stream.held_after_all_frees()
            tr.gradient_batches = self.grads.batches
        return tr


def simulate(plan: StepPlan | None, program: Program | None = None, costs: Costs | None = None) -> Trace:
    """Execute ``program`` at ``costs`` (by default the training step of ``plan``, costed by the cost
    pass); returns the trace (spans in cycles) and counters. A serving program needs no plan (None)."""
    return _Engine(plan, *with_defaults(plan, program, costs)).run()
