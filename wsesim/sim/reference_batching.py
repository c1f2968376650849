"""The reference engine's serving, in plain SimPy: one request's token at a time per stage (a ``SERVE``
op, ``serve_requests``), and continuous batching (a ``SERVE_BATCHES`` op, docs/model.md §11.7), written
apart from the fast engine's loop (``batching``) to vouch for it: they share the op's rules and the cost
pass's ``BatchCosts``, never scheduling code.

A process for the arrivals, one per stage and one per link between stages. A stage sleeps on an event
until work lands in its queue, then waits for the end of the cycle (an event scheduled at a priority
after every ordinary event of that cycle, so that all work landing in it is queued), takes its batch,
holds a timeout of the iteration's cycles, and puts the iteration's tokens into its link's
``simpy.Store``; the link process takes them one at a time and lands each after its hand-off's delay
(so a hand-off never overtakes the one before it). Admission is a check run on every arrival and every
departure, over the requests in flight as a list. A paged cache's blocks are a count in a list, a swap
back in a process that puts the request's decode token on the first stage when it has landed.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from ..model.serving import requests_fit
from ..model.speculative import accepted
from .costing import StageCosts
from .plan import BatchLog, StageLog, Trace, kv_events
from .program import Serve, ServeBatches

__all__ = ["serve_batches", "serve_requests"]

LATE = 2
"""The end-of-cycle event's priority: after SimPy's URGENT (0) and NORMAL (1) events of the same cycle."""


def serve_requests(env: simpy.Environment, op: Serve, costs: tuple[StageCosts, ...],
                   trace: Trace) -> Generator[Any, Any, None]:
    """A process per request; a stage (a ``simpy.Resource``) serves one request's token at a time, first
    come first served; every visit is logged in ``trace``."""
    S, T = len(op.stages), op.output_len
    stages = [simpy.Resource(env, capacity=1) for _ in range(S)]
    trace.stages = StageLog(np.zeros((op.requests, T)), np.zeros(S), np.zeros(S))

    def request(r: int) -> Generator[Any, Any, None]:
        for t in range(T):
            for s in range(S):
                arrived = env.now
                with stages[s].request() as turn:
                    yield turn
                    start = env.now
                    yield env.timeout(costs[s].service(t, r))
                trace.stage_visit(s, t, r, arrived, start, env.now, last=s == S - 1, split=costs[s].split(t))
                if s == S - 1 and t + 1 == T:
                    return
                yield env.timeout(costs[s].handoff(t))

    yield simpy.AllOf(env, [env.process(request(r)) for r in range(op.requests)])


def serve_batches(env: simpy.Environment, op: ServeBatches,
                  costs: list[Any]) -> Generator[Any, Any, BatchLog]:
    """Serve ``op``'s requests as processes (see the module's docstring); returns their log. ``costs``:
    each stage's ``BatchCosts``, then with a draft its station's (``speculative.DraftCosts``), served by a
    process of its own after the last stage."""
    S, n, pool = len(op.stages), op.requests, op.prefill_pool
    entry, last_pool = (S if pool else 0), S + pool - 1  # split prefill: prompts through stations S …
    D = S + pool if op.speculative else None
    stations, width, e = S + pool + (D is not None), op.width, op.tokens_per_pass
    experts = op.stage_experts() + [None] * (stations - S)  # sampled routing's draws, stage by stage
    nan = np.nan
    admitted, started, first, finished = (np.full(n, nan) for _ in range(4))
    refused = np.zeros(n, dtype=bool)
    outputs = op.outputs()
    offset = (np.cumsum(outputs) - outputs).astype(np.int64)
    emitted = np.full(int(np.sum(outputs)), nan)  # request r's output t at offset[r] + t
    busy = np.zeros(stations)
    iterations: list[list[Any]] = []  # stage, start, end, decodes, prompt tokens, longest, pieces, reach,
    # ends, values moved after it
    decodes: list[list[tuple[int, int]]] = [[] for _ in range(stations)]
    prompts: list[list[tuple[int, int, int]]] = [[] for _ in range(stations)]
    woken: list[simpy.Event | None] = [None] * stations
    links = [simpy.Store(env) for _ in range(stations)]

    def context(r: int, t: int) -> int:
        """The context output t of request r starts from: its prompt, its first token and those accepted
        by its t − 1 passes before (one each without a draft)."""
        return int(op.prompt[r]) + 1 + accepted(t - 1, int(op.output[r]), e)
    waiting: list[int] = []
    flight: list[int] = []  # the requests in flight
    all_done = env.event()
    gone = [0]

    paged = op.kv_block is not None
    block, blocks, kind = op.kv_block if op.kv_block is not None else (1, 0, "")
    free, held, io = [blocks], [0] * n, [0.0, 0.0]  # the pool's free blocks, each request's; the I/O out, in
    target = [int(p) for p in op.prompt]  # tokens a request's next prefill covers
    redo: dict[int, int] = {}  # a recompute's request -> the output its prefill's end gives
    out: dict[int, tuple[int, float]] = {}  # a request swapped out -> (its decode's output, when it is out)
    kv_log: list[tuple[float, float, float, float, float]] = []

    def alone(r: int) -> bool:
        if not paged:
            return fits([r])
        return (int(op.prompt[r]) + int(op.output[r]) - 1 + block - 1) // block <= blocks

    def preempt(r: int, t: int) -> float:
        """Request r (its decode token for output t) out of flight, first in line; when its blocks free."""
        flight.remove(r)
        free[0], held[r] = free[0] + held[r], 0
        waiting.insert(0, r)
        c = target[r] = context(r, t)
        if kind == "recompute":
            redo[r] = t
            kv_log.append((0.0, r, env.now, env.now, c - 1))
            return env.now
        begin = max(env.now, io[0])
        io[0] = begin + costs[0].swap(op.swap_bytes(c - 1))
        out[r] = (t, io[0])
        kv_log.append((1.0, r, begin, io[0], c - 1))
        return io[0]

    def grow(ds: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], float]:
        """Blocks for each decode's context, earliest arrived first; the latest preempted while short."""
        ready, queue, kept = env.now, sorted(ds), []
        while queue:
            r, t = queue[0]
            need = (context(r, t) + block - 1) // block - held[r]
            while need > free[0] and len(queue) > 1:
                ready = max(ready, preempt(*queue.pop()))
            if need > free[0]:
                ready = max(ready, preempt(r, t))
                break
            free[0] -= need
            held[r] += need
            kept.append(queue.pop(0))
        return [d for d in ds if d in kept], ready

    def swap_in(r: int, t: int, at: float) -> Generator[Any, Any, None]:
        yield env.timeout(at - env.now)
        put(entry, [(r, t)], [])

    def fits(rs: list[int]) -> bool:
        p, o = [int(op.prompt[r]) for r in rs], [int(op.output[r]) for r in rs]
        return all(requests_fit(op.model, w.stage.memory, len(w.stage.layers), w.stage.rows, w.stage.cols,
                                op.layout, len(rs), sum(p), sum(o), max(p)) for w in op.stages)

    drafted = np.zeros(n, dtype=bool)  # the draft has prefilled the request's prompt
    unprefilled: dict[int, tuple[int, int]] = {}  # first tokens at the draft before it prefilled their prompt
    joins = bool(pool) and D is not None  # a verify pass needs the drafts and the prompt's KV cache both
    cached = np.zeros(n, dtype=bool)  # with both: the KV cache has landed on the decode wafers
    early: dict[int, tuple[int, int]] = {}  # with both: drafts at the first stage before the cache

    def put(s: int, ds: list[tuple[int, int]], ps: list[tuple[int, int, int]], source: int = -1) -> None:
        if s == D:  # a round waits for the draft's prefill of its prompt
            ds = [(r, t) for r, t in ds if t < int(outputs[r])]
            unprefilled.update((r, (r, t)) for r, t in ds if not drafted[r])
            ds = [(r, t) for r, t in ds if drafted[r]]
        elif s == 0 and joins:  # the drafts and the KV cache meet at the first decode stage
            if source == last_pool:
                cached[[r for r, _ in ds]] = True
                ds = [early.pop(r) for r, _ in ds if r in early]
            else:
                early.update((r, (r, t)) for r, t in ds if not cached[r])
                ds = [(r, t) for r, t in ds if cached[r]]
        decodes[s].extend(ds)
        prompts[s].extend(ps)
        if woken[s] is not None and not woken[s].triggered:
            woken[s].succeed()

    def admit() -> None:
        while waiting and len(flight) < op.cap:
            r = waiting[0]
            if paged:
                need = (target[r] + block - 1) // block
                if need > free[0]:
                    break
                free[0], held[r] = free[0] - need, need
            elif not fits([*flight, r]):
                break
            waiting.pop(0)
            flight.append(r)
            if np.isnan(admitted[r]):
                admitted[r] = env.now
            if r in out:  # its cache back in from MemoryX, after it has gone out
                t, gone = out.pop(r)
                begin = max(env.now, io[1], gone)
                io[1] = begin + costs[0].swap(op.swap_bytes(context(r, t) - 1))
                kv_log.append((2.0, r, begin, io[1], context(r, t) - 1))
                env.process(swap_in(r, t, io[1]))
            else:
                put(entry, [], [(r, 0, target[r])])
                if D is not None:  # the draft prefills the prompt beside the target
                    put(D, [], [(r, 0, int(op.prompt[r]))])

    def leave(r: int) -> None:
        finished[r] = env.now
        flight.remove(r)
        free[0], held[r] = free[0] + held[r], 0
        count(1)

    def count(k: int) -> None:
        gone[0] += k
        if gone[0] == n and not all_done.triggered:
            all_done.succeed()

    def arrivals() -> Generator[Any, Any, None]:
        for r in range(n):
            yield env.timeout(float(op.arrival[r]) - env.now)
            if alone(r):
                waiting.append(r)
                admit()
            else:
                refused[r] = True
                count(1)

    def end_of_cycle() -> simpy.Event:
        ev = env.event()
        ev._ok, ev._value = True, None  # triggered, and run after every ordinary event of this cycle
        env.schedule(ev, priority=LATE)
        return ev

    def first_tokens(at: float, tokens: list[tuple[int, int]]) -> Generator[Any, Any, None]:
        yield env.timeout(at - env.now)
        put(D, tokens, [])

    def link(s: int) -> Generator[Any, Any, None]:
        while True:
            at, to, ds, ps, record = yield links[s].get()
            if at > env.now:
                yield env.timeout(at - env.now)
            else:
                yield env.timeout(0)
            record[10] = env.now
            put(to, ds, ps, s)

    def stage(s: int) -> Generator[Any, Any, None]:
        cost, last = costs[s], s == S - 1
        while True:
            while not (decodes[s] or prompts[s]):
                woken[s] = env.event()
                yield woken[s]
            yield end_of_cycle()
            ds: list[tuple[int, int]] = []
            if op.policy == "chunked" or not prompts[s]:
                ds, decodes[s] = decodes[s], []
            ready = env.now
            if paged and s == entry and ds:
                ds, ready = grow(ds)
                if not ds and not prompts[s]:
                    continue
            ps: list[tuple[int, int, int]] = []
            room = op.budget - width * len(ds)
            while prompts[s] and room > 0:
                r, begin, tokens = prompts[s][0]
                if op.policy == "chunked":
                    take = min(tokens, room)
                elif tokens <= room or not ps:
                    take = tokens
                else:  # prefill first: whole prompts, the next one in the next iteration
                    break
                ps.append((r, begin, take))
                if take == tokens:
                    prompts[s].pop(0)
                else:
                    prompts[s][0] = (r, begin + take, tokens - take)
                room -= take
            ends = [begin + tokens == target[r] for r, begin, tokens in ps]
            taken = [(tokens, begin, e) for (_, begin, tokens), e in zip(ps, ends, strict=True)]
            longest = max((context(r, t) for r, t in ds), default=0)
            drawn = None
            if experts[s] is not None and ds and not ps:  # sampled routing: this batch's experts
                drawn = experts[s].loads(width * len(ds))
                cycles = cost.iteration(len(ds), longest, taken, drawn)
            else:
                cycles = cost.iteration(len(ds), longest, taken)
            if ready > env.now:  # the blocks it takes are free when their swap out has left
                yield env.timeout(ready - env.now)
            if s == entry:
                for r, begin, _ in ps:
                    if begin == 0 and np.isnan(started[r]):
                        started[r] = env.now
            record = [s, env.now, env.now + cycles, len(ds), sum(p[2] for p in ps), longest, len(ps),
                      max((begin + tokens for r, begin, tokens in ps), default=0), sum(ends), 0, np.nan,
                      cost.experts(len(ds), taken, drawn)]
            iterations.append(record)
            busy[s] += cycles
            yield env.timeout(cycles)
            if s == last_pool and pool:  # first tokens out, the finished prompts' KV to the decode wafers
                on: list[tuple[int, int]] = []
                for (r, _, _), end in zip(ps, ends, strict=True):
                    if end:
                        first[r] = emitted[offset[r]] = env.now
                        if int(outputs[r]) > 1:
                            on.append((r, 1))
                        else:
                            leave(r)
                admit()
                if joins and any(ends):  # every first token to the draft too, on a link of its own
                    tokens = [(r, 1) for (r, _, _), end in zip(ps, ends, strict=True) if end]
                    env.process(first_tokens(env.now + costs[D].receive(len(tokens)), tokens))
                if on:
                    record[9] = sum(int(op.prompt[r]) for r, _ in on)
                    links[s].put((env.now + cost.handoff(record[9]), 0, on, [], record))
                continue
            if not last:
                values = (width * len(ds) + sum(p[2] for p in ps)) * op.model.hidden_size
                record[9] = values
                links[s].put((env.now + cost.handoff(values), s + 1, ds, ps, record))
                continue
            home: list[tuple[int, int]] = []
            for r, t in ds:
                emitted[offset[r] + t] = env.now
                if t + 1 < int(outputs[r]):
                    home.append((r, t + 1))
                else:
                    leave(r)
            for (r, _, _), end in zip(ps, ends, strict=True):
                if end and r in redo:  # a recompute: the output its preempted decode would have given
                    t = redo.pop(r)
                    emitted[offset[r] + t] = env.now
                    if t + 1 < int(outputs[r]):
                        home.append((r, t + 1))
                    else:
                        leave(r)
                elif end:
                    first[r] = emitted[offset[r]] = env.now
                    if int(outputs[r]) == 1:
                        leave(r)
                    else:
                        home.append((r, 1))
            admit()
            if home:
                values = width * len(ds) + sum(ends)
                record[9] = values
                to, move = (0, cost.handoff) if D is None else (D, costs[D].receive)
                links[s].put((env.now + move(values), to, home, [], record))

    def drafter() -> Generator[Any, Any, None]:
        """The draft's station: every queued prompt and round in one iteration, then the rounds' drafts to
        the first stage (K values a request); a first token held for its prompt's prefill joins the next."""
        assert D is not None
        cost = costs[D]
        while True:
            while not (decodes[D] or prompts[D]):
                woken[D] = env.event()
                yield woken[D]
            yield end_of_cycle()
            ds, decodes[D] = decodes[D], []
            ps, prompts[D] = prompts[D], []
            ends = [begin + tokens == int(op.prompt[r]) for r, begin, tokens in ps]
            longest = max((context(r, t) for r, t in ds), default=0)
            cycles = cost.iteration(len(ds), longest, [(tokens, begin, end) for (_, begin, tokens), end
                                                       in zip(ps, ends, strict=True)])
            values = (op.width - 1) * len(ds)  # K drafted tokens each
            reach = max((begin + tokens for r, begin, tokens in ps), default=0)
            record = [D, env.now, env.now + cycles, len(ds), sum(p[2] for p in ps), longest, len(ps),
                      reach, sum(ends), values, np.nan, cost.experts(len(ds), [], None)]
            iterations.append(record)
            busy[D] += cycles
            yield env.timeout(cycles)
            for r, _, _ in ps:
                drafted[r] = True
                if r in unprefilled:
                    decodes[D].append(unprefilled.pop(r))
            if ds:
                links[D].put((env.now + cost.handoff(values), 0, ds, [], record))

    for s in range(S + pool):
        env.process(stage(s))
    for s in range(stations):
        env.process(link(s))
    if D is not None:
        env.process(drafter())
    env.process(arrivals())
    if n:
        yield all_done
    order = sorted(range(len(iterations)), key=lambda i: (iterations[i][1], iterations[i][0]))
    it = [iterations[i] for i in order]
    col = [np.array([x[k] for x in it]) for k in range(11)]
    return BatchLog(admitted, started, first, finished, refused, busy, col[0].astype(np.int32),
                    col[1].astype(float), col[2].astype(float), col[3].astype(np.int32),
                    col[4].astype(np.int32), emitted, *(c.astype(np.int64) for c in col[5:10]),
                    col[10].astype(float), op.stations(), op.width, kv_events(kv_log),
                    np.array([x[11] for x in it], dtype=float).reshape(-1, 3))
