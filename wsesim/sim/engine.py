"""The fast engine: executes a program (``program.Program``, for a training step built by
``training.training_program``) as SimPy processes and resources (docs/model.md §2, §3). Simulated time
is in clock cycles.

* the inbound link (``links.WeightStream``, a process) fills the bounded staging buffer with weight
  chunks in order of first use, and waits while the buffer is full;
* the outbound link (``links.GradientLink``) carries weight gradients out, FIFO;
* ``_step`` (a process) runs the program's ops in order, once per micro-batch (every weight streams in
  again for each): a ``WEIGHTS`` op waits for its chunks, a whole-wafer op takes its cost model's cycles,
  per tile when it is tiled, a fabric op the fabric's, the ``EXPERTS`` op the experts phase
  (``experts.ExpertsPhase``), a ``GRADIENT`` op hands its bytes to the outbound link; the drains end the
  step when the last gradient has left (in a cluster: when its sum has come through the reduce tree).

A hot expert straggles, a late chunk stalls only its expert, a full buffer stalls the stream: overlap,
stalls and contention emerge from these. The engine never prints or writes files; it returns a
``Trace`` and ``wsesim.analysis.results`` measures it afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from ..model.vocabulary import OpKind, Phase, Track
from .chunks import plan_chunks
from .cluster import io_rate
from .counting import CountingEnvironment
from .experts import ExpertsPhase
from .links import GradientLink, WeightStream
from .plan import Span, StepPlan, Trace, wafer_cost
from .program import WAFER_OPS, Op, Program
from .training import training_program

__all__ = ["simulate"]

Run = Callable[[Op], Generator[Any, Any, None]]


class _Engine:
    def __init__(self, plan: StepPlan, program: Program) -> None:
        self.plan, self.program, hw = plan, program, plan.hw
        self.env = CountingEnvironment()
        self.trace = Trace()
        self.chunks = chunks = plan_chunks(hw, plan.model, plan.training.activations == "recompute",
                                           plan.micro_batches)
        self.keys = chunks.keys
        self.trace.restreamed_for_recompute = chunks.restreamed_for_recompute
        self.sizes = chunks.sizes
        self.copied_out = np.zeros(len(chunks), dtype=bool)  # whole-wafer chunks already freed
        staging = chunks.staging_bytes  # half for weights in, half for gradients out
        rate, latency = io_rate(hw, plan.tree), (plan.tree.latency if plan.tree else 0.0)
        self.stream = WeightStream(self.env, chunks.names, chunks.sizes, staging / 2, rate, latency)
        self.grads = GradientLink(staging / 2, rate)
        self.experts = ExpertsPhase(plan, chunks, self.env, self.stream, self.grads, self.trace, self._gradient_room)
        self._fabric_times: dict[tuple[int, bool], tuple[float, float]] = {}
        self._run: dict[OpKind, Run] = {kind: self._wafer for kind in WAFER_OPS}
        self._run.update({OpKind.WEIGHTS: self._weights, OpKind.DISPATCH: self._fabric, OpKind.COMBINE: self._fabric,
                          OpKind.EXPERTS: self.experts.run, OpKind.GRADIENT: self._gradient,
                          OpKind.GRADIENT_DRAIN: self._drain, OpKind.REDUCE_DRAIN: self._reduce_drain,
                          OpKind.OPTIMIZER_STEP: self._optimizer})

    # --------------------------------------------------------------------------------- weight chunks
    def _use_micro_batch(self, i: int) -> None:
        """Index micro-batch i's copy of every chunk: the first micro-batch's, ``i · per_micro_batch`` on."""
        c, off = self.chunks, i * self.chunks.per_micro_batch
        self.keys = {k: (a + off, b + off) for k, (a, b) in c.keys.items()} if off else c.keys
        self.experts.use_micro_batch(i)

    def _weights(self, op: Op) -> Generator[Any, Any, None]:
        """Wait (a stall of the step) for the weights of ``op.weights``: whole-wafer weights (attention,
        router, LM head, embedding) are copied out of the staging buffer into their resident place as
        each piece arrives, so the buffer never has to hold all of them at once."""
        env, stream, start = self.env, self.stream, self.env.now
        first, last = self.keys[op.weights]
        for i in range(first, last + 1):
            if i >= stream.next:
                yield stream.wait(i)
            arrival = float(stream.arrival[i])
            if arrival > env.now:
                yield env.timeout(arrival - env.now)
            if not self.copied_out[i]:  # a recompute and its backward wait for the same copy: free it once
                self.copied_out[i] = True
                stream.free(self.sizes[i])
        if env.now > start:
            self.trace.spans.append(Span(Track.STEP, Phase.WEIGHT_STALL, start, env.now, dict(op.args)))

    # ---------------------------------------------------------------------------------- compute ops
    def _wafer(self, op: Op) -> Generator[Any, Any, None]:
        """A whole-wafer op, or its ``tiles`` runs back to back (one span each)."""
        cost = wafer_cost(self.plan, op)
        start, cycles, spans = self.env.now, cost.cycles, self.trace.spans
        for i in range(op.runs):
            args = {**op.args, **({"tile": i} if op.tiles else {}), "flops": op.flops,
                    "weight_bytes": op.weight_bytes, "bound": cost.bound}
            spans.append(Span(Track.STEP, op.kind, start + i * cycles, start + (i + 1) * cycles, args))
        self.trace.executed_flops += op.executed_flops
        yield self.env.timeout(op.runs * cycles)

    def _fabric(self, op: Op) -> Generator[Any, Any, None]:
        nbytes = self.plan.tokens[op.layer].astype(float) * self.plan.model.hidden_size * self.plan.model.bytes_per_value
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

    def _gradient(self, op: Op) -> Generator[Any, Any, None]:
        """Hand one gradient to the outbound link, once its buffer has room for it."""
        yield from self._gradient_room(op.args, op.nbytes)
        self.grads.send(np.array([self.env.now]), np.array([op.nbytes]))
        self.trace.gradients.append((op.gradient, dict(op.args)))

    # ------------------------------------------------------------------------------- the step's end
    def _drain(self, op: Op) -> Generator[Any, Any, None]:
        """The step ends when the last gradient has left."""
        yield from self._until(self.grads.link_free_at, Phase.GRADIENT_DRAIN, op)

    def _reduce_drain(self, op: Op) -> Generator[Any, Any, None]:
        """... and, in a cluster, when its sum has come through the reduce tree."""
        yield from self._until(self.grads.link_free_at + self.plan.tree.latency, Phase.REDUCE_DRAIN, op)

    def _optimizer(self, op: Op) -> Generator[Any, Any, None]:
        """MemoryX's weight update: nothing streams until it is done."""
        start = self.env.now
        yield self.env.timeout(op.cycles)
        self.trace.spans.append(Span(Track.STEP, Phase.OPTIMIZER_STEP, start, self.env.now, dict(op.args)))

    def _until(self, at: float, phase: Phase, op: Op) -> Generator[Any, Any, None]:
        env = self.env
        if at > env.now:
            start = env.now
            yield env.timeout(at - start)
            self.trace.spans.append(Span(Track.STEP, phase, start, env.now, dict(op.args)))

    def _step(self) -> Generator[Any, Any, None]:
        run, program = self._run, self.program
        for i in range(program.micro_batches):
            self._use_micro_batch(i)
            for op in program.body:
                yield from run[op.kind](op)
        for op in program.tail:
            yield from run[op.kind](op)

    def run(self) -> Trace:
        env = self.env
        env.process(self.stream.process())
        done = env.process(self._step())
        env.run(until=done)
        tr = self.trace
        tr.step_cycles, tr.events = float(env.now), env.processed
        tr.io_bytes_in, tr.io_bytes_out = self.stream.bytes_in, self.grads.bytes_out
        tr.io_in = self.stream.schedule()
        tr.staging_held_at_end = self.stream.held_after_all_frees()
        tr.gradient_batches = self.grads.batches
        return tr


def simulate(plan: StepPlan, program: Program | None = None) -> Trace:
    """Execute ``program`` (by default the training step of ``plan``); returns the trace (spans in
    cycles) and counters."""
    return _Engine(plan, program or training_program(plan)).run()
