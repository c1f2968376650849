"""The fast engine's continuous batching (a ``SERVE_BATCHES`` op, docs/model.md §11.7): one loop over
event times, each station advancing a whole iteration at a time, never a SimPy event per layer or per
token. The rules are the scheduler's (``scheduler.Scheduler``), the costs the cost pass's
(``costing.BatchCosts``: per batch size, per context, per prompt piece, each computed once); this module
is only the mechanism that times them:

* a heap of event times: iterations ending, moves landing; arrivals come from the op's sorted array;
* at each event time every event of that time is handled — arrivals, iterations ending, moves
  landing — and only then does each idle station with work queued start its next iteration, in station
  order, so work that lands in the cycle a station frees joins that station's next batch;
* a hand-off leaves on its station's outbound link, which delivers in order: it lands at its own time or
  when the one ahead of it on that link landed, whichever is later;
* on a run of one station alone (``Scheduler.loops``) a decode iteration's successors are run ahead to the
  next arrival (``Scheduler.run_ahead``): most of such a run's iterations never pass through the heap.

``reference_batching.py`` times the same scheduler with SimPy processes; both agree exactly (tests/sim).
"""

from __future__ import annotations

import heapq
from typing import Any

from ..programs.plan import BatchLog
from ..programs.program import Move, ServeBatches
from .scheduler import Scheduler

__all__ = ["run_batches"]

_INF = float("inf")


def run_batches(op: ServeBatches, costs: list[Any]) -> BatchLog:
    """Serve ``op``'s requests (see the module's docstring); returns their log. ``costs``: each stage's
    ``BatchCosts``, then with a draft the draft's station (``speculative.DraftCosts``)."""
    sched = Scheduler(op, costs)
    n, arrival, touched = op.requests, sched.arrival, sched.touched
    arrive, land, ready, start, finish = sched.arrive, sched.land, sched.ready, sched.start, sched.finish
    loops, run_ahead = sched.loops, sched.run_ahead
    push, pop = heapq.heappush, heapq.heappop
    heap: list[tuple[float, int, int, Move | None]] = []  # (cycle, order, station or −1, move)
    link = [0.0] * sched.stations  # the last hand-off's landing on each station's outbound link
    order = 0

    def send(moves: list[Move], now: float) -> None:
        nonlocal order
        for move in moves:
            if move.ordered:  # behind the hand-off ahead of it on its link
                at = link[move.source] = max(move.at, link[move.source])
                if at == now:
                    land(move, now)
                    continue
            else:
                at = now + (move.at - now)  # as a SimPy timeout lands
            push(heap, (at, order, -1, move))
            order += 1

    next_arrival = 0
    while True:
        if next_arrival < n and (not heap or arrival[next_arrival] <= heap[0][0]):
            now = arrival[next_arrival]
        elif heap:
            now = heap[0][0]
        else:
            break
        while next_arrival < n and arrival[next_arrival] == now:
            send(arrive(next_arrival, now), now)
            next_arrival += 1
        while heap and heap[0][0] == now:
            _, _, s, move = pop(heap)
            if move is None:
                send(finish(s, now), now)
            else:
                land(move, now)
        # only a station whose queue grew or whose iteration ended now can start one, in station order
        for s in sorted(touched) if len(touched) > 1 else touched:
            if ready(s):
                it = start(s, now)
                if it is not None:
                    if loops:  # one station alone: its decode iterations run ahead to the next event
                        it = run_ahead(it, min(arrival[next_arrival] if next_arrival < n else _INF,
                                            heap[0][0] if heap else _INF))
                    push(heap, (it.start + it.cycles, order, s, None))
                    order += 1
        touched.clear()
    return sched.log()
