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
    served = _Stations(env, Scheduler(op, costs))
    for s in range(served.sched.stations):
        env.process(served.station(s))
        env.process(served.link(s))
    env.process(served.arrivals(op))
    if op.requests:
        yield served.all_done
    return served.sched.log()


class _Stations:
    """The scheduler's stations and the links between them as SimPy processes: a station waits until the
    scheduler has work for it, starts its iteration at the end of the cycle, and hands what it finished
    on; a link delivers the ordered moves of its station one after another, the others land apart."""

    def __init__(self, env: simpy.Environment, sched: Scheduler) -> None:
        self.env, self.sched = env, sched
        self.woken: list[simpy.Event | None] = [None] * sched.stations
        self.links = [simpy.Store(env) for _ in range(sched.stations)]
        self.all_done = env.event()

    def wake(self, s: int) -> None:
        woken = self.woken[s]
        if woken is not None and not woken.triggered:
            woken.succeed()

    def land(self, move: Move) -> None:
        self.sched.land(move, self.env.now)
        self.wake(move.to)

    def check(self) -> None:
        if self.sched.done and not self.all_done.triggered:
            self.all_done.succeed()

    def apart(self, move: Move) -> Generator[Any, Any, None]:
        yield self.env.timeout(move.at - self.env.now)
        self.land(move)

    def send(self, moves: list[Move]) -> None:
        for move in moves:
            if move.ordered:
                self.links[move.source].put(move)
            else:
                self.env.process(self.apart(move))
        for s in list(self.sched.touched):  # stations the scheduler queued work at (admission)
            self.wake(s)
        self.sched.touched.clear()
        self.check()

    def arrivals(self, op: ServeBatches) -> Generator[Any, Any, None]:
        env = self.env
        for r in range(op.requests):
            yield env.timeout(float(op.arrival[r]) - env.now)
            self.send(self.sched.arrive(r, env.now))

    def end_of_cycle(self) -> simpy.Event:
        ev = self.env.event()
        ev._ok, ev._value = True, None  # triggered, and run after every ordinary event of this cycle
        self.env.schedule(ev, priority=LATE)
        return ev

    def link(self, s: int) -> Generator[Any, Any, None]:
        env = self.env
        while True:
            move = yield self.links[s].get()
            if move.at > env.now:
                yield env.timeout(move.at - env.now)
            else:
                yield env.timeout(0)
            self.land(move)  # the scheduler logs when it landed

    def station(self, s: int) -> Generator[Any, Any, None]:
        env, sched = self.env, self.sched
        while True:
            while not sched.ready(s):
                self.woken[s] = env.event()
                yield self.woken[s]
            yield self.end_of_cycle()
            it = sched.start(s, env.now)
            if it is None:
                continue
            if it.start > env.now:  # the blocks it takes are free when their swap out has left
                yield env.timeout(it.start - env.now)
            yield env.timeout(it.cycles)
            self.send(sched.finish(s, env.now))
