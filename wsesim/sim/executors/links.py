"""The off-wafer links as SimPy resources (docs/model.md §2). Simulated time is in clock cycles.

``WeightStream`` is the inbound link: a SimPy process that moves weight chunks, in order of first use,
into a bounded SRAM staging buffer at the I/O bandwidth, and waits while the buffer is full. A chunk
reserves its room when it starts to arrive and gives it back when its last user frees it — possibly at
a cycle in the future that the consumer already knows (``free_at``), so that a consumer can lay out a
whole phase without one event per op. The timeline is the same as a ``simpy.Container`` put/get per
chunk: a chunk starts at ``max(link free, room available)``, and the stream decides a chunk's start
only at a cycle by which every free up to that cycle has been registered (a free is always registered
at or before its own cycle).

``GradientLink`` is the outbound link: a FIFO server at the I/O bandwidth; gradients wait in their own
staging buffer until they have left.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from collections.abc import Generator, Sequence
from typing import Any

import numpy as np
import simpy

from ...model.vocabulary import Phase, Track
from ..programs.plan import LinkSchedule, Span, Trace

Pending = tuple[float, float, float, dict[str, Any]]
"""A pipelined weights wait (``compute: kernel``): its start, its first bytes' arrival, its last's, its
op's args; open until a whole-wafer op consumes it (``consume``) or something else comes first."""


def close_wait(trace: Trace, pending: Pending | None) -> None:
    """A weights wait that no whole-wafer op consumed as it arrived: a stall, as unpipelined."""
    if pending is not None and pending[2] > pending[0]:
        trace.spans.append(Span(Track.STEP, Phase.WEIGHT_STALL, pending[0], pending[2], pending[3]))


def consume(free: Any, head: Any, arrival: Any, cycles: Any, pipelined: bool) -> tuple[Any, Any, Any]:
    """(begin, end, waited) of ``cycles`` of work on a chunk of weights whose first bytes reach the wafer
    at ``head`` and its last at ``arrival``, on PEs free from ``free`` (floats, or arrays alike).

    Not ``pipelined`` (``compute: constant``, whose op cost is a rate over its FLOPs): the work starts once
    the chunk is in. ``pipelined`` (``compute: kernel``, docs/model.md §4.1): the weight-streaming GEMM
    consumes weight rows as they arrive, so the work starts with the first bytes and ends no earlier than
    the last — the slower of the stream and the GEMM sets the pace (the last row's own FMACs, one
    output's pace, are not added). ``waited``: the cycles the PEs spent not computing."""
    if not pipelined:
        begin = np.maximum(free, arrival) if isinstance(free, np.ndarray) else max(free, arrival)
        return begin, begin + cycles, begin - free
    if isinstance(free, np.ndarray):
        begin = np.maximum(free, head)
        end = np.maximum(begin + cycles, arrival)
    else:
        begin = max(free, head)
        end = max(begin + cycles, arrival)
    return begin, end, end - cycles - free


class WeightStream:
    """The inbound I/O link and the staging buffer it fills.

    ``sizes[i]`` is chunk i's bytes, in stream order; ``arrival[i]`` its arrival cycle (NaN until the
    stream has scheduled it); capacity in bytes, rate in bytes per cycle.
    """

    def __init__(self, env: simpy.Environment, names: Sequence[Any], sizes: np.ndarray, capacity_bytes: float,
                 bytes_per_cycle: float, latency: float = 0.0) -> None:
        self.env, self.names, self.capacity, self.rate = env, names, capacity_bytes, bytes_per_cycle
        self.latency = latency  # cycles between a chunk's last byte leaving the source and arriving (a tree)
        self.sizes = np.asarray(sizes, dtype=float)
        self._sizes = self.sizes.tolist()  # plain floats for the scheduling loop
        self.arrival = np.full(len(self.sizes), np.nan)
        self.start = np.full(len(self.sizes), np.nan)
        self.level = 0.0  # bytes reserved and not yet freed
        self.next = 0  # index of the next chunk to schedule
        self.link_free_at = 0.0
        self.bytes_in = 0.0
        # heap of free batches: (next cycle, batch id, sorted cycles, running byte sums, position)
        self._frees: list[tuple[float, int, list[float], list[float], int]] = []
        self._batch = 0
        self._freed: list[tuple[np.ndarray, np.ndarray]] = []  # every free as registered, for the trace
        self._waiters: dict[int, list[simpy.Event]] = {}
        self._wake: simpy.Event | None = None
        self._wake_at = float("inf")
        self._clock = 0.0  # the stream's own clock: how far its decisions have run (≥ env.now)

    # ---------------------------------------------------------------------------------- the process
    def process(self) -> Generator[Any, Any, None]:
        env, n = self.env, len(self.sizes)
        while self.next < n:
            self._advance(until=env.peek())
            if self.next >= n:
                break
            self._wake, self._wake_at = env.event(), float("inf")
            if self._frees:
                self._arm(self._frees[0][0])
            yield self._wake
            self._wake = None

    def _advance(self, until: float) -> None:
        """Schedule every chunk whose start can be decided now.

        No other process acts before cycle ``until`` (the next event in the queue), so no free earlier
        than ``until`` can still be registered: the stream may run ahead on its own clock through the
        frees it knows, up to ``until``, and its decisions are the ones it would take at those cycles.

        One chunk at a time (a start depends on the room the frees before it gave back), in one loop
        over plain floats: at 512 experts a step streams ~150,000 chunks.
        """
        sizes, n, limit = self._sizes, len(self._sizes), self.capacity * (1 + 1e-12)
        heap, waiting, rate, latency = self._frees, self._waiters, self.rate, self.latency
        level, i, link_free, bytes_in = self.level, self.next, self.link_free_at, self.bytes_in
        first, start, arrival = i, [], []  # this call's decisions, copied into the arrays at the end
        started, arrived = start.append, arrival.append  # bound once: the loop runs per chunk and per free
        pop, replace, after = heapq.heappop, heapq.heapreplace, bisect.bisect_right
        clock = max(self.env.now, self._clock)
        while True:
            while heap and heap[0][0] <= clock:  # the frees due by the clock give their room back
                _, bid, times, cumulative, pos = heap[0]
                end = after(times, clock, lo=pos)
                level -= cumulative[end] - cumulative[pos]
                if end < len(times):  # the batch's later frees back in the heap (ids are unique: one order)
                    replace(heap, (times[end], bid, times, cumulative, end))
                else:
                    pop(heap)
            while i < n and level + sizes[i] <= limit:  # reserve room; start when the link is free
                nbytes = sizes[i]
                level += nbytes
                begin = clock if clock > link_free else link_free  # max(link_free, clock), inline
                link_free = begin + nbytes / rate
                started(begin)
                arrived(link_free + latency)  # (a cluster's tree: docs/model.md §9)
                bytes_in += nbytes
                if i in waiting:
                    self._notify(i, link_free + latency)
                    # a consumer wakes at that arrival and may free room then: decide no further ahead
                    until = min(until, link_free + latency)
                i += 1
            if i >= n or not heap or heap[0][0] > until:
                break
            clock = heap[0][0]
        self.start[first:i], self.arrival[first:i] = start, arrival
        self.level, self.next, self.link_free_at, self.bytes_in, self._clock = (level, i, link_free,
                                                                                bytes_in, clock)

    def _notify(self, i: int, arrival: float) -> None:
        """Wake the consumers waiting for chunk ``i`` at its arrival."""
        for waiter in self._waiters.pop(i):
            self.env.timeout(arrival - self.env.now).callbacks.append(lambda _, w=waiter: w.succeed())

    def _arm(self, at: float) -> None:
        """Wake the blocked stream at cycle ``at`` (unless an earlier wake is already armed)."""
        if self._wake is None or at >= self._wake_at:
            return
        self._wake_at = at
        wake = self._wake

        def fire(_: Any) -> None:
            if not wake.triggered:
                wake.succeed()

        if at <= self.env.now:
            fire(None)
        else:
            self.env.timeout(at - self.env.now).callbacks.append(fire)

    # ----------------------------------------------------------------------------------- consumers
    def free_at(self, times: np.ndarray, nbytes: np.ndarray) -> None:
        """Give room back: ``nbytes[j]`` at cycle ``times[j]`` (each ≥ now)."""
        if len(times) == 0:
            return
        order = np.argsort(times, kind="stable")
        sorted_times = np.asarray(times, dtype=float)[order].tolist()
        cumulative = [0.0, *np.cumsum(np.asarray(nbytes, dtype=float)[order]).tolist()]
        self._freed.append((np.asarray(times, dtype=float), np.asarray(nbytes, dtype=float)))
        heapq.heappush(self._frees, (sorted_times[0], self._batch, sorted_times, cumulative, 0))
        self._batch += 1
        self._arm(sorted_times[0])

    def free(self, nbytes: float) -> None:
        """Give ``nbytes`` of room back now."""
        self.free_at(np.array([self.env.now]), np.array([nbytes]))

    def held_after_all_frees(self) -> float:
        """Bytes still reserved once every registered free has taken effect (0 after a whole step)."""
        return self.level - sum(cumulative[-1] - cumulative[pos] for _, _, _, cumulative, pos in self._frees)

    def wait(self, i: int) -> simpy.Event:
        """An event that fires when chunk ``i`` (not yet scheduled) has arrived."""
        event = self.env.event()
        self._waiters.setdefault(i, []).append(event)
        return event

    def schedule(self) -> LinkSchedule:
        """The link's schedule so far, as plain data (copies: the trace outlives the stream)."""
        freed = (np.concatenate([t for t, _ in self._freed] or [np.zeros(0)]),
                 np.concatenate([b for _, b in self._freed] or [np.zeros(0)]))
        return LinkSchedule(tuple(self.names), self.sizes.copy(), self.start.copy(), self.arrival.copy(),
                            freed)


class GradientLink:
    """The outbound link: FIFO at ``bytes_per_cycle``; a buffer of ``capacity_bytes`` holds gradients
    until they have left. Gradients are handed over in batches, each in order of hand-over cycle."""

    def __init__(self, capacity_bytes: float, bytes_per_cycle: float) -> None:
        self.capacity, self.rate = capacity_bytes, bytes_per_cycle
        self.link_free_at = 0.0
        self.bytes_out = 0.0
        self.batches: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (start, left, bytes) per batch
        self._held: deque[tuple[np.ndarray, np.ndarray]] = deque()  # (left, bytes) not known to have left

    def send(self, at: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hand over gradients of ``nbytes[j]`` at cycles ``at[j]`` (non-decreasing, ≥ any earlier batch).

        FIFO at a constant rate: ``left_j = max(left_{j-1}, at_j) + d_j`` with ``d = nbytes / rate``, whose
        closed form is ``S_j + max_{i≤j}(at_i − S_{i−1})`` over the running sum ``S`` of ``d``.
        Returns (start, left) cycles.
        """
        at, nbytes = np.asarray(at, dtype=float), np.asarray(nbytes, dtype=float)
        d = nbytes / self.rate
        running = np.cumsum(d)
        floor = np.full(len(at), -np.inf)
        floor[:1] = self.link_free_at  # the link is free from then on; later gradients wait for those before
        ready = np.maximum(at, floor)
        left = running + np.maximum.accumulate(ready - (running - d))
        start = left - d
        if len(left):
            self.link_free_at = float(left[-1])
        self.bytes_out += float(nbytes.sum())
        self.batches.append((start, left, nbytes))
        self._held.append((left, nbytes))
        return start, left

    def room_at(self, at: float, incoming: float = 0.0) -> float:
        """The earliest cycle ≥ ``at`` at which the gradients still buffered, plus ``incoming`` bytes,
        fit in the buffer."""
        while self._held and self._held[0][0][-1] <= at:
            self._held.popleft()
        if not self._held:
            return at
        left = np.concatenate([b[0] for b in self._held])
        nbytes = np.concatenate([b[1] for b in self._held])
        waiting = left > at
        limit = max(self.capacity - incoming, 0.0) * (1 + 1e-12)
        held = nbytes[waiting].sum()
        if held <= limit:
            return at
        # gradients leave in order: find the first at which what remains fits
        remaining = held - np.cumsum(nbytes[waiting])
        j = int(np.argmax(remaining <= limit))
        return float(left[waiting][j])
