"""The fast engine: executes a costed program (``program.Program``; its ``Costs`` from the cost pass,
``costing``) with SimPy (docs/model.md §2, §3, §11.4), over the loop it shares with the reference
(``executor.Executor``). It builds and costs nothing: what it decides is when each op runs. Simulated
time is in clock cycles.

Its mechanism: the inbound link (``links.WeightStream``) fills the bounded staging buffer with weight
chunks in order of first use, frees registered ahead so that whole phases are laid out with arrays; the
outbound link (``links.GradientLink``) carries gradients out, FIFO, in closed form; the experts phase is
``experts.ExpertsPhase``; a ``SERVE_BATCHES`` op advances a station a whole iteration at a time, in one
loop over event times (``batching.run_batches``). A hot expert straggles, a late chunk stalls only its
expert, a full buffer stalls the stream: overlap, stalls and contention emerge from these.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from ...model.vocabulary import OpKind, Phase, Track
from ..cost.costing import Costs
from ..programs.chunks import ChunkPlan
from ..programs.cluster import io_rate
from ..programs.plan import Span, StepPlan, Trace
from ..programs.program import Drain, Experts, GradientOut, Program, ServeBatches, WaferOp, Weights
from .executor import Executor
from .experts import ExpertsPhase
from .links import GradientLink, WeightStream

__all__ = ["simulate"]


class _Engine(Executor):
    def __init__(self, plan: StepPlan | None, program: Program, costs: Costs) -> None:
        super().__init__(plan, program, costs)
        self.handlers.update({OpKind.SERVE_BATCHES: self._serve_batches})
        if program.chunks is not None:
            assert plan is not None
            self._links(plan, program.chunks)

    def _links(self, plan: StepPlan, chunks: ChunkPlan) -> None:
        """The training step's resources: the weight stream, the gradient link, the experts phase."""
        hw = plan.hw
        self.chunks = chunks
        self.keys = chunks.keys
        self.sizes = chunks.sizes
        self.copied_out = np.zeros(len(chunks), dtype=bool)  # whole-wafer chunks already freed
        staging = chunks.staging_bytes  # half for weights in, half for gradients out
        rate, latency = io_rate(hw, plan.tree), (plan.tree.latency if plan.tree else 0.0)
        self.stream = WeightStream(self.env, chunks.names, chunks.sizes, staging / 2, rate, latency)
        self.grads = GradientLink(staging / 2, rate)
        self.experts = ExpertsPhase(plan, self.costs, chunks, self.env, self.stream, self.grads, self.trace,
                                    self._gradient_room)

    def _start_links(self) -> None:
        self.env.process(self.stream.process())

    # --------------------------------------------------------------------------------- weight chunks
    def _micro_batch(self, i: int) -> None:
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
        self._waited(start, float(stream.start[first]) + stream.latency, op.args)

    # ---------------------------------------------------------------------------------- compute ops
    def _wafer(self, op: WaferOp) -> Generator[Any, Any, None]:
        """A whole-wafer op, or its ``tiles`` runs back to back (one span each); pipelined after a weights
        wait, its first run consumes its weights as they arrive (``_consumed``)."""
        cost = self.costs.wafer[op]
        start, cycles, spans = self.env.now, cost.cycles, self.trace.spans
        consumed = self.pending is not None
        begin, first_end = self._consumed(cycles) if consumed else (start, start + cycles)
        # after its first run, each run takes its cycles (the weights are resident)
        shift = first_end - (start + cycles) if consumed else 0.0
        for i in range(op.runs):
            args = {**op.args, **({"tile": i} if op.tiles else {}), "flops": op.flops,
                    "weight_bytes": op.weight_bytes, "bound": cost.bound}
            if i == 0 and consumed:
                if first_end > begin + cycles:
                    args["bound"] = "stream"  # paced by its weights' arrival
                spans.append(Span(Track.STEP, op.kind, begin, first_end, args))
                continue
            spans.append(Span(Track.STEP, op.kind, start + i * cycles + shift,
                              start + (i + 1) * cycles + shift, args))
        self.trace.executed_flops += op.executed_flops
        yield self.env.timeout(op.runs * cycles + shift)

    def _experts(self, op: Experts) -> Generator[Any, Any, None]:
        return self.experts.run(op)

    def _gradient_room(self, args: dict[str, Any], incoming: float = 0.0) -> Generator[Any, Any, None]:
        """Stall while the outbound buffer holds more gradients than fit (with ``incoming`` bytes more)."""
        ready, start = self.grads.room_at(self.env.now, incoming), self.env.now
        if ready > start:
            yield self.env.timeout(ready - start)
            self._since(start, Phase.GRADIENT_STALL, args)

    def _gradient(self, op: GradientOut) -> Generator[Any, Any, None]:
        """Hand one gradient to the outbound link, once its buffer has room for it."""
        yield from self._gradient_room(op.args, op.nbytes)
        self.grads.send(np.array([self.env.now]), np.array([op.nbytes]))
        self.trace.gradients.append((op.gradient, dict(op.args)))

    # ------------------------------------------------------------------------------- the step's end
    def _gradient_drain(self, op: Drain) -> Generator[Any, Any, None]:
        """The step ends when the last gradient has left."""
        yield from self._until(self.grads.link_free_at, Phase.GRADIENT_DRAIN, op)

    def _reduce_drain(self, op: Drain) -> Generator[Any, Any, None]:
        """... and, in a cluster, when its sum has come through the reduce tree."""
        assert self.plan is not None and self.plan.tree is not None
        yield from self._until(self.grads.link_free_at + self.plan.tree.latency, Phase.REDUCE_DRAIN, op)

    def _until(self, at: float, phase: Phase, op: Drain) -> Generator[Any, Any, None]:
        start = self.env.now
        if at > start:
            yield self.env.timeout(at - start)
            self._since(start, phase, op.args)

    # ------------------------------------------------------------------------------------- serving
    def _serve_batches(self, op: ServeBatches) -> Generator[Any, Any, None]:
        """Requests over time, each stage running iteration-level batches (``batching``)."""
        # local: serving's scheduler loads when a program serves, not at the start of every training run
        from .batching import run_batches

        log = self.trace.batches = run_batches(op, self.costs.stations())
        self.events = len(log.start)  # the iterations
        yield self.env.timeout(log.end_cycle)

    def _link_records(self, tr: Trace) -> None:
        tr.io_bytes_in, tr.io_bytes_out = self.stream.bytes_in, self.grads.bytes_out
        tr.io_in = self.stream.schedule()
        tr.staging_held_at_end = self.stream.held_after_all_frees()
        tr.gradient_batches = self.grads.batches


def simulate(plan: StepPlan | None, program: Program, costs: Costs) -> Trace:
    """Execute ``program`` at ``costs`` (the cost pass's: ``costing.cost_program`` for a training step);
    returns the trace (spans in cycles) and counters. A serving program needs no plan (None)."""
    return _Engine(plan, program, costs).run()
