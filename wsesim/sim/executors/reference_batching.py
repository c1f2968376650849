"""The reference engine's serving (a ``SERVE_BATCHES`` op, docs/model.md §11.7), in plain SimPy: the
scheduler's ops (``scheduler.Scheduler``, the rules both engines share) timed by processes, apart from the
fast engine's loop (``batching``) to vouch for its mechanism.

A process for the arrivals, one per station and one per station's outbound link. A station sleeps on an
event until work lands in its queue, then waits for the end of the cycle (an event scheduled at a
priority after every ordinary event of that cycle, so that all work landing in it is queued), takes the
scheduler's next iteration, holds a timeout of its cycles, and puts the moves it sends into its link's
``simpy.Store``; the link process takes them one at a time and lands each at its time (so a hand-off
never overtakes the one before it). A move off the links (a swap back in from MemoryX, first tokens to a
draft) is a process of its own that lands it after its delay.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from ..programs.plan import BatchLog
from ..programs.program import Move, ServeBatches
from .scheduler import Scheduler

__all__ = ["serve_batches"]

LATE = 2
"""The end-of-cycle event's priority: after SimPy's URGENT (0) and NORMAL (1) events of the same cycle."""


def serve_batches(env: simpy.Environment, op: ServeBatches,
                  costs: list[Any]) -> Generator[Any, Any, BatchLog]:
    """Serve ``op``'s requests as processes (see the module's docstring); returns their log. ``costs``:
    each stage's ``BatchCosts``, then with a draft its station's (``speculative.DraftCosts``)."""
    sched = Scheduler(op, costs)
    stations = sched.stations
    woken: list[simpy.Event | None] = [None] * stations
    links = [simpy.Store(env) for _ in range(stations)]
    all_done = env.event()

    def wake(s: int) -> None:
        if woken[s] is not None and not woken[s].triggered:
            woken[s].succeed()

    def land(move: Move) -> None:
        sched.land(move, env.now)
        wake(move.to)

    def check() -> None:
        if sched.done and not all_done.triggered:
            all_done.succeed()

    def apart(move: Move) -> Generator[Any, Any, None]:
        yield env.timeout(move.at - env.now)
        land(move)

    def send(moves: list[Move]) -> None:
        for move in moves:
            if move.ordered:
                links[move.source].put(move)
            else:
                env.process(apart(move))
        for s in list(sched.touched):  # stations the scheduler queued work at (admission)
            wake(s)
        sched.touched.clear()
        check()

    def arrivals() -> Generator[Any, Any, None]:
        for r in range(op.requests):
            yield env.timeout(float(op.arrival[r]) - env.now)
            send(sched.arrive(r, env.now))

    def end_of_cycle() -> simpy.Event:
        ev = env.event()
        ev._ok, ev._value = True, None  # triggered, and run after every ordinary event of this cycle
        env.schedule(ev, priority=LATE)
        return ev

    def link(s: int) -> Generator[Any, Any, None]:
        while True:
            move = yield links[s].get()
            if move.at > env.now:
                yield env.timeout(move.at - env.now)
            else:
                yield env.timeout(0)
            land(move)  # the scheduler logs when it landed

    def station(s: int) -> Generator[Any, Any, None]:
        while True:
            while not sched.ready(s):
                woken[s] = env.event()
                yield woken[s]
            yield end_of_cycle()
            it = sched.start(s, env.now)
            if it is None:
                continue
            if it.start > env.now:  # the blocks it takes are free when their swap out has left
                yield env.timeout(it.start - env.now)
            yield env.timeout(it.cycles)
            send(sched.finish(s, env.now))

    for s in range(stations):
        env.process(station(s))
        env.process(link(s))
    env.process(arrivals())
    if op.requests:
        yield all_done
    return sched.log()
