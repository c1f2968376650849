"""The two executors of a serving program (docs/model.md §11.4). Simulated time is in clock cycles.

Every request arrives at cycle 0. Its first token is the prompt's prefill, through every stage in turn;
each further token is one decode step through every stage, started when the previous token has come
back from the last stage. A stage serves one request's token at a time, first come first served; between
stages the activations take the hand-off's cycles (a delay, not a resource: a stage's outbound links are
its own). With several requests the stages work on different requests at once: the pipeline fills.

* ``serve`` — the fast path: one loop over arrivals in time order (a heap), each stage's next start the
  later of the arrival and the stage's last finish;
* ``serve_reference`` — the same in plain SimPy: a process per request, a ``simpy.Resource`` per stage.

Both return a ``ServeTrace``; on ties of equal cycles the fast path serves in the order the arrivals
were made, as SimPy's queue does for requests made in one cycle in order.
"""

from __future__ import annotations

import heapq
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from ..model.vocabulary import ServePhase, Track
from .counting import CountingEnvironment
from .inference import ServingProgram
from .plan import Span

__all__ = ["ServeTrace", "serve", "serve_reference"]


@dataclass
class ServeTrace:
    """``done[r, t]``: the cycle request r's token t left the last stage (its LM head); ``waited[s]``:
    cycles requests queued at stage s in all; ``busy[s]``: cycles stage s worked; spans per stage visit."""

    done: np.ndarray
    waited: np.ndarray
    busy: np.ndarray
    spans: list[Span] = field(default_factory=list)
    events: int = 0

    @property
    def end(self) -> float:
        return float(self.done.max()) if self.done.size else 0.0


def _service(program: ServingProgram, s: int, token: int) -> float:
    work = program.stages[s]
    return work.prefill_cycles if token == 0 else work.decode_cycles[token - 1]


def _handoff(program: ServingProgram, s: int, token: int) -> float:
    work = program.stages[s]
    return work.handoff_prefill if token == 0 else work.handoff_decode


def _span(s: int, token: int, request: int, start: float, end: float) -> Span:
    phase = ServePhase.PREFILL if token == 0 else ServePhase.DECODE
    return Span(Track.STAGE, phase, start, end, {"stage": s, "request": request, "token": token})


def serve(program: ServingProgram, record: bool = True) -> ServeTrace:
    """The fast path: arrivals in time order, FIFO at each stage."""
    S, B, T = len(program.stages), program.batch, program.output_len
    free = np.zeros(S)
    trace = ServeTrace(np.zeros((B, T)), np.zeros(S), np.zeros(S))
    heap = [(0.0, r, r, 0, 0) for r in range(B)]  # (arrival, order, request, token, stage)
    order = B
    while heap:
        at, _, r, t, s = heapq.heappop(heap)
        start = max(at, free[s])
        end = start + _service(program, s, t)
        free[s] = end
        trace.waited[s] += start - at
        trace.busy[s] += end - start
        if record:
            trace.spans.append(_span(s, t, r, start, end))
        trace.events += 1
        if s == S - 1:
            trace.done[r, t] = end
            if t + 1 == T:
                continue
        nxt_t = t + 1 if s == S - 1 else t
        heapq.heappush(heap, (end + _handoff(program, s, t), order, r, nxt_t, (s + 1) % S))
        order += 1
    return trace


def serve_reference(program: ServingProgram) -> ServeTrace:
    """The same run as SimPy processes and resources."""
    S, B, T = len(program.stages), program.batch, program.output_len
    env = CountingEnvironment()
    stages = [simpy.Resource(env, capacity=1) for _ in range(S)]
    trace = ServeTrace(np.zeros((B, T)), np.zeros(S), np.zeros(S))

    def request(r: int) -> Generator[Any, Any, None]:
        for t in range(T):
            for s in range(S):
                arrived = env.now
                with stages[s].request() as turn:
                    yield turn
                    start = env.now
                    yield env.timeout(_service(program, s, t))
                trace.waited[s] += start - arrived
                trace.busy[s] += env.now - start
                trace.spans.append(_span(s, t, r, start, env.now))
                if s == S - 1:
                    trace.done[r, t] = env.now
                    if t + 1 == T:
                        return
                yield env.timeout(_handoff(program, s, t))

    for r in range(B):
        env.process(request(r))
    env.run()
    trace.events = env.processed
    return trace
