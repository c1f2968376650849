"""The SimPy packet fidelity, ``packet-simpy`` (docs/model.md §6): every message is a SimPy process that walks
the links of its route. It is the reference the fast packet fidelity (``packet``, wsesim/fabric/packet.py)
is checked against: same semantics, same cycles (tests/fabric/test_packet.py); it is kept because a
process per message is the plainest statement of those semantics, not for speed.

A message of L wavelets walks the stages of its route: the inject ramp at its source
(``injection_cycles`` of head latency), each mesh link (``hop_cycles``), and the eject ramp of each
receiver (no latency). Its head takes a stage when a lane of it is free and moves on after the stage's
latency; its body follows a wavelet a cycle, so the stage is busy for L cycles from the head's grant. A
lone message takes ``injection + h·hop + (L − 1)`` cycles, as in the flow fidelity.

Contention is first come, first served per directed link; a link has as many lanes as parallel PE
links (1 at PE granularity, up to K at ``block:K``; a block's ramps have one lane per PE). Ties are
broken by the order SimPy schedules events: at cycle 0 the processes start grouped by source (sources
in the order of their first message), each source's messages in issue order; later, of two heads that
reach a link in the same cycle, the one whose previous stage was processed first goes first.

Two modelling choices, and why:

* *A blocked head does not hold the links behind it* (virtual cut-through: the router buffers the
  body). Holding them (wormhole with no buffering) lets a message waiting at one link idle the bisection
  links behind it: an 8 × 8 all-to-all of 256 B per pair (shifted order) took 18,006 cycles that way
  against 9,040 here, for a flow bound of 8,226. The flow fidelity assumes buffered links too.
* *A link is a list of lane free-times, not a* ``simpy.Resource``: with cut-through a FIFO link's grant
  time is known when the head arrives (the earliest free lane, after those who came first), so a stage
  costs one SimPy event (the head's wait plus latency) instead of three (request, release, latency).
  The queueing is the same as a FIFO ``Resource`` whose users release after L cycles.

At block granularity one node-to-node message stands for many PE-to-PE messages, so it is split into
``block`` stripes (one per parallel link it can use), each a process carrying its share of the
wavelets. Units: bytes, cycles.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from .flow import link_loads
from .mesh import EJECT, INJECT, LINKS_PER_NODE, Mesh, check_routing
from .traffic import AnyTraffic, FabricResult, listed, summarise

Link = list[float]  # a directed link: a min-heap of the cycles at which each of its lanes is next free
Stage = tuple[Link, float, int]  # (link, head latency in cycles, receiver index or -1)


def worm(env: simpy.Environment, stages: list[Stage], wavelets: int,
         on_arrival: Callable[[int, float], None]) -> Generator[simpy.Event, Any, None]:
    """One message of ``wavelets`` wavelets through ``stages``; calls ``on_arrival(receiver, cycle)`` with
    the cycle its tail reaches each receiver (the cycle the receiver holds the whole message).

    When the head reaches a stage it takes the lane that frees first, at once or after the messages
    that reached the stage earlier; that lane is then busy for ``wavelets`` cycles while the body
    streams through. The head moves on after the stage's latency: one SimPy event per stage.
    """
    for lanes, latency, receiver in stages:
        now = env.now
        start = lanes[0] if lanes[0] > now else now
        heapq.heapreplace(lanes, start + wavelets)
        if receiver >= 0:
            on_arrival(receiver, start + wavelets - 1)
        delay = start - now + latency
        if delay > 0:
            yield env.timeout(delay)


class SimPyPacketFabric:
    """SimPy packet fidelity: a SimPy process per message (per stripe at block granularity), FIFO links.

    ``simulate`` takes a ``Traffic`` or an ``OuterTraffic`` (listed into messages, at most
    ``max_messages``, else ``ConfigError``). Link loads and route counts are the flow fidelity's (they
    depend on the routes, not on timing); ``cycles`` is the last delivery; ``events`` the SimPy events
    processed; ``bytes_delivered`` is summed as each process reaches its destination.
    """

    mode = "packet-simpy"

    def __init__(self, mesh: Mesh, routing: str = "xy", max_messages: int = 200_000) -> None:
        self.mesh = mesh
        self.routing = check_routing(routing)
        self.max_messages = max_messages

    def simulate(self, traffic: AnyTraffic) -> FabricResult:
        mesh = self.mesh
        traffic = listed(traffic, mesh, self.max_messages, "SimPy packet fidelity",
                         "the packet or flow fidelity, or a smaller mesh")
        src, dst, nbytes, mc = traffic.src, traffic.dst, traffic.nbytes, traffic.is_multicast
        env = simpy.Environment()
        lanes: dict[int, Link] = {}
        latency = {INJECT: mesh.injection_cycles, EJECT: 0.0}
        state = {"delivered": 0.0, "finish": 0.0}
        arrivals: dict[int, list[float]] = {}
        flows: dict[int, list[tuple[list[Stage], int, Callable[[int, float, int], None]]]] = {}

        def on_arrival_of(i: int, last: int, share: float) -> Callable[[int, float, int], None]:
            def on_arrival(receiver: int, cycle: float, wavelets: int) -> None:
                if i in arrivals:
                    arrivals[i][receiver] = max(arrivals[i][receiver], cycle)
                if receiver == last:  # booked through to its destination
                    state["delivered"] += share * wavelets
                    state["finish"] = max(state["finish"], cycle)
            return on_arrival

        for i in range(len(src)):
            s, d, size = int(src[i]), int(dst[i]), float(nbytes[i])
            if s == d or size <= 0:
                state["delivered"] += size  # stays on its node: no fabric involved
                continue
            route = mesh.multicast_route(s, d) if mc[i] else mesh.route(s, d, self.routing)
            stages: list[Stage] = []
            receiver = 0
            for link in route.links:
                kind = link % LINKS_PER_NODE
                if link not in lanes:
                    lanes[link] = [0.0] * int(mesh.link_parallel[link])
                stages.append((lanes[link], latency.get(kind, mesh.hop_cycles),
                               receiver if kind == EJECT else -1))
                receiver += kind == EJECT
            if mc[i]:
                arrivals[i] = [0.0] * len(route.receivers)
            total = math.ceil(size / mesh.wavelet_bytes - 1e-9)
            stripes = min(mesh.block, total)
            for j in range(stripes):
                w = total // stripes + (j < total % stripes)
                flows.setdefault(s, []).append((stages, w, on_arrival_of(i, receiver - 1, size / total)))

        def injector(queue: list[tuple[list[Stage], int, Callable[[int, float, int], None]]]
                     ) -> Generator[simpy.Event, Any, None]:
            # A source's messages queue FIFO for its inject ramp; starting each when a lane frees is the
            # same schedule as starting all at cycle 0, with far fewer events pending at once.
            for stages, w, on_arrival in queue:
                ramp = stages[0][0]
                if ramp[0] > env.now:
                    yield env.timeout(ramp[0] - env.now)
                env.process(worm(env, stages, w, lambda r, t, f=on_arrival, w=w: f(r, t, w)))

        for queue in flows.values():
            env.process(injector(queue))
        events = 0
        try:
            while True:
                env.step()
                events += 1
        except simpy.core.EmptySchedule:
            pass
        live = nbytes > 0
        load = link_loads(mesh, src, dst, nbytes, self.routing, traffic.multicast)
        counts = link_loads(mesh, src[live], dst[live], np.ones(int(live.sum())), self.routing,
                            traffic.multicast[live] if traffic.multicast is not None else None)
        return summarise(mesh, self.mode, cycles=state["finish"], link_load=load,
                         route_counts=counts, messages=len(src), events=events,
                         injected=float(nbytes.sum()), delivered=state["delivered"],
                         arrivals={i: tuple(v) for i, v in arrivals.items()})
