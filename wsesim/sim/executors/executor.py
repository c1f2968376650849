"""What both executors share (docs/architecture.md), in the manner of SimPy's ``BaseResource``, whose
queueing is written once while each resource overrides only how a request is put and got: one loop over
a costed program's ops and one table from an op's kind to its handler. An executor overrides only its
mechanism: how it waits for weights, runs a whole-wafer op and an experts phase, hands a gradient out,
drains the links and starts them (the fast engine with arrays and registered frees, ``engine``; the
reference with plain SimPy processes and resources, ``reference``), and its serving handlers.

Written here once: the loop (each micro-batch's body, then the tail), the pipelined weights wait held
open until the op that consumes it (``CONSUMERS``), a dispatch or combine (its cost's cycles), MemoryX's
optimizer step, the spans of stalls and drains, and the run's counters. Nothing is built or costed here
or in an executor: every cycle an op takes is the cost pass's (``costing.Costs``); what an executor
decides is when each op runs, from the queues and waits of the run.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from ...model.vocabulary import OpKind, Phase, Track
from ..cost.costing import Costs
from ..programs.plan import Span, StepPlan, Trace
from ..programs.program import WAFER_OPS, OptimizerStep, Program, Transfer
from .counting import CountingEnvironment
from .links import Pending, close_wait, consume

__all__ = ["CONSUMERS", "Executor"]

Run = Callable[[Any], Generator[Any, Any, None]]

CONSUMERS = frozenset({OpKind.WEIGHTS, *WAFER_OPS})
"""The ops before which a pipelined weights wait stays open: another wait, or the op that consumes it."""


class Executor:
    """Runs ``program`` at ``costs`` on ``plan``'s resources (a serving program needs no plan: None).
    A subclass makes its resources, adds its serving handlers to ``handlers``, and overrides the
    training step's mechanism: ``_weights``, ``_wafer``, ``_experts``, ``_gradient``,
    ``_gradient_drain``, ``_reduce_drain``, ``_micro_batch``, ``_start_links`` and ``_link_records``."""

    def __init__(self, plan: StepPlan | None, program: Program, costs: Costs) -> None:
        self.plan, self.program, self.costs = plan, program, costs
        self.env = CountingEnvironment()
        self.trace = Trace()
        self.events: int | None = None  # a serving run's own count of events, if it keeps one
        # a pipelined compute model runs an op with its weights' arrival (links.consume): the last weights
        # wait (its start, the first bytes' arrival, the last's, its args), open until an op consumes it
        self.pipelined = costs.pipelined
        self.pending: Pending | None = None
        self.handlers: dict[OpKind, Run] = {}
        if program.chunks is not None:
            assert plan is not None, "a program that streams weights needs the step's plan"
            self.handlers.update({kind: self._wafer for kind in WAFER_OPS})
            self.handlers.update({
                OpKind.WEIGHTS: self._weights, OpKind.DISPATCH: self._fabric, OpKind.COMBINE: self._fabric,
                OpKind.EXPERTS: self._experts, OpKind.GRADIENT: self._gradient,
                OpKind.GRADIENT_DRAIN: self._gradient_drain, OpKind.REDUCE_DRAIN: self._reduce_drain,
                OpKind.OPTIMIZER_STEP: self._optimizer})

    # the mechanism, each executor's own: the training step's handlers (a generator per op) ...
    _weights: Run
    _wafer: Run
    _experts: Run
    _gradient: Run
    _gradient_drain: Run
    _reduce_drain: Run
    _micro_batch: Callable[[int], None]  # ... micro-batch i's copy of every chunk indexed ...
    _start_links: Callable[[], None]  # ... the links' processes started, before the step's ...
    _link_records: Callable[[Trace], None]  # ... and their counters and schedules, into the trace at the end


    # ------------------------------------------------------------------------------- written once
    def _fabric(self, op: Transfer) -> Generator[Any, Any, None]:
        """A dispatch or combine over the fabric: its cost's cycles (the cost pass timed it)."""
        cost, start = self.costs.fabric[op.layer, op.reverse], self.env.now
        yield self.env.timeout(cost.cycles)
        self.trace.fabric_span(op, start, self.env.now, cost.nbytes, cost.max_link_load_bytes)

    def _optimizer(self, op: OptimizerStep) -> Generator[Any, Any, None]:
        """MemoryX's weight update with the summed gradients: nothing streams until it is done."""
        start, cycles = self.env.now, self.costs.optimizer_cycles
        yield self.env.timeout(cycles)
        self.trace.spans.append(Span(Track.STEP, Phase.OPTIMIZER_STEP, start, self.env.now,
                                     {**op.args, "cycles": cycles}))

    def _since(self, start: float, phase: Phase, args: Any) -> None:
        """``phase`` (a stall or a drain) on the step's track from ``start`` to now, if time passed."""
        if self.env.now > start:
            self.trace.spans.append(Span(Track.STEP, phase, start, self.env.now, dict(args)))

    def _waited(self, start: float, head: float, args: Any) -> None:
        """A weights wait from ``start`` to now, their first bytes in at ``head``: under a pipelined
        compute model held open for the op that consumes it (``_consumed``), else a stall."""
        if self.pipelined:
            self.pending = (start, head, self.env.now, dict(args))
        else:
            self._since(start, Phase.WEIGHT_STALL, args)

    def _consumed(self, cycles: float) -> tuple[float, float]:
        """(begin, end) of the first run, ``cycles`` long, of the op that consumes the open weights wait:
        from its weights' first bytes to no earlier than their last (``links.consume``); the wait until it
        begins a stall."""
        assert self.pending is not None
        start, head, arrival, args = self.pending
        self.pending = None
        begin, end, _ = consume(start, head, arrival, cycles, True)
        if begin > start:
            self.trace.spans.append(Span(Track.STEP, Phase.WEIGHT_STALL, start, begin, args))
        return begin, end

    def _close_pending(self) -> None:
        """A weights wait no whole-wafer op consumed as it arrived: a stall, as unpipelined."""
        close_wait(self.trace, self.pending)
        self.pending = None

    def _step(self) -> Generator[Any, Any, None]:
        run, program = self.handlers, self.program
        for i in range(program.micro_batches):  # one after another; MemoryX sums their gradients
            if program.chunks is not None:
                self._micro_batch(i)
            for op in program.body:
                if op.kind not in CONSUMERS:
                    self._close_pending()
                yield from run[op.kind](op)
        self._close_pending()
        for op in program.tail:
            yield from run[op.kind](op)

    def run(self) -> Trace:
        env, streams = self.env, self.program.chunks is not None
        if streams:
            self._start_links()
        env.run(until=env.process(self._step()))
        tr = self.trace
        tr.step_cycles = float(env.now)
        tr.events = env.processed if self.events is None else self.events
        if streams:
            assert self.program.chunks is not None
            tr.restreamed_for_recompute = self.program.chunks.restreamed_for_recompute
            self._link_records(tr)
        return tr

