"""The fast engine's continuous batching (a ``SERVE_BATCHES`` op, docs/model.md §11.7): one loop over
event times, each stage advancing a whole iteration at a time, never a SimPy event per layer or per
token. The costs are the cost pass's (``costing.BatchCosts``: per batch size, per context, per prompt
piece, each computed once); the rules are the op's (``program.ServeBatches``):

* at each event time every event of that time is handled — arrivals, iterations ending, hand-offs
  landing — and only then does each idle stage with work queued start its next iteration, so work that
  lands in the cycle a stage frees joins that stage's next batch;
* admission is first come first served with head-of-line blocking: a request waits while it would not
  fit beside those in flight (``model.serving.requests_fit`` on every stage) or ``cap`` are in flight,
  and those behind it wait too; one that fits no stage even alone is refused;
* an iteration takes its stage's queued decode tokens in the order they came, then its prompt pieces
  in order (``take_pieces``), all through one pass of the stage's kernels; its values leave for the next
  stage over a link that delivers in order (no hand-off lands before the one ahead of it on that link);
* at the last stage a decode token is an output token, a piece ending its prompt the first one; a
  request whose last token is out leaves, and its KV cache room is given to the next in line; a draft
  and a prefill pool are more stations (``land``: where their work waits for the other half of it);
* with a paged cache (``op.kv_block``) admission takes the prompt's blocks from the pool instead, and an
  iteration of the first stage first gives each of its decode tokens the blocks of its context, earliest
  arrived first; when the pool is short the latest-arrived of those not yet served is preempted (the one
  asking, when it is the latest), first in line again: its cache dropped, a readmission prefilling its
  prompt and outputs so far, whose end is its next output (``recompute``), or swapped out to MemoryX over
  the I/O, the iteration starting when it has left, and back in before its decode goes on (``swap``).

``reference_batching.py`` runs the same rules as SimPy processes; both agree exactly (tests/sim).
"""

from __future__ import annotations

import heapq
from array import array
from collections import deque
from itertools import accumulate
from typing import Any

import numpy as np

from ..model.serving import requests_fit
from ..model.speculative import accepted
from .plan import BatchLog, kv_events
from .program import ServeBatches

__all__ = ["fits_alone", "run_batches", "take_pieces"]


def fits_alone(op: ServeBatches, r: int) -> bool:
    """Whether request r's KV cache fits every stage with no other request (paged: its last decode's
    prompt + output − 1 tokens, in the pool's blocks)."""
    p, o = int(op.prompt[r]), int(op.output[r])
    if op.kv_block is not None:
        return -(-(p + o - 1) // op.kv_block[0]) <= op.kv_block[1]
    return all(requests_fit(op.model, w.stage.memory, len(w.stage.layers), w.stage.rows, w.stage.cols,
                            op.layout, 1, p, o, p) for w in op.stages)


def take_pieces(queue: list[list[int]], room: int, whole: bool) -> list[tuple[int, int, int]]:
    """Prompt pieces ``[request, start, tokens]`` taken from the front of ``queue`` (removed) as
    (request, start, tokens), at most ``room`` tokens in all: ``whole`` (prefill first) whole prompts
    while they fit, the first one always; else the last one cut where the room ends."""
    taken: list[tuple[int, int, int]] = []
    while queue and room > 0:
        r, start, n = queue[0]
        if n > room:
            if whole and taken:
                break
            if not whole:
                taken.append((r, start, room))
                queue[0] = [r, start + room, n - room]
                break
        taken.append((r, start, n))
        queue.pop(0)
        room -= n
    return taken


def run_batches(op: ServeBatches, costs: list[Any]) -> BatchLog:
    """Serve ``op``'s requests (see the module's docstring); returns their log. A request has one piece
    of work in flight at a time, so a decode token queued is its request's index alone: the request's
    next context (``context[r]``) and outputs still to come (``left[r]``) say the rest. ``costs``: each
    stage's ``BatchCosts``, then with a draft the draft's station (``speculative.DraftCosts``)."""
    n, S, hid = op.requests, len(op.stages), op.model.hidden_size
    pool = op.prefill_pool  # split prefill: the prefill wafers' stages, stations S … S + pool − 1
    entry, last_pool = (S if pool else 0), S + pool - 1  # where a prompt starts; the pool's last station
    draft = S + pool if op.speculative else None  # the draft's station, after the last stage
    stations = S + pool + (draft is not None)
    k, e, width = (op.speculative[0] if op.speculative else 0), op.tokens_per_pass, op.width
    experts = op.stage_experts() + [None] * (stations - S)  # sampled routing's draws, stage by stage
    arrival, prompt, output = op.arrival.tolist(), op.prompt.tolist(), op.output.tolist()
    outputs = op.outputs().tolist()  # each request's outputs: its tokens, or its first and verify passes
    context = [p + 1 for p in prompt]  # the first decode token's context
    left = [o - 1 for o in outputs]  # decode outputs to come
    passes = [0] * n  # verify passes done (with a draft)
    # the draft has prefilled the request's prompt; with a prefill pool too, its cache has reached stage 0
    drafted, cached = [False] * n, [False] * n
    joins = bool(pool) and draft is not None  # a verify pass needs the drafts and the KV cache both
    # first tokens at the draft before it prefilled their prompt; drafts at stage 0 before their cache
    unprefilled, waiting_cache = set[int](), set[int]()
    nan = float("nan")
    admitted, started, first, finished, refused = [nan] * n, [nan] * n, [nan] * n, [nan] * n, [False] * n
    stop = list(accumulate(outputs))  # request r's outputs' cycles end before stop[r] in ``emitted``
    emitted = array("d", [nan]) * (stop[-1] if n else 0)
    busy = [0.0] * stations
    it_stage, it_decodes, it_prompt = array("i"), array("i"), array("i")
    it_start, it_end, it_landed, it_experts = (array("d") for _ in range(4))  # experts: 3 a row
    it_longest, it_pieces, it_reach, it_ends, it_moved = (array("q") for _ in range(5))
    decodes: list[list[int]] = [[] for _ in range(stations)]  # the requests whose decode token is queued
    pieces: list[list[list[int]]] = [[] for _ in range(stations)]  # prompt pieces: [request, start, tokens]
    running: list[tuple | None] = [None] * stations  # the iteration a stage runs
    link = [0.0] * stations  # the last hand-off's landing on each stage's outbound link
    chunked = op.policy == "chunked"
    waiting: deque[int] = deque()
    flight = [0, 0, 0]  # requests in flight, their prompt tokens, their output tokens
    prompts_in: dict[int, int] = {}  # prompt length -> requests in flight with it (for the longest)
    heap: list[tuple[float, int, int, tuple]] = []  # (cycle, order, stage, work): ends and hand-offs
    touched, order = set[int](), 0  # the stations work landed at or left from in this cycle; heap order
    fit_args = [(w.stage.memory, len(w.stage.layers), w.stage.rows, w.stage.cols) for w in op.stages]
    paged = op.kv_block is not None
    block, free, swap = ((op.kv_block[0], [op.kv_block[1]], op.kv_block[2] == "swap") if op.kv_block
                         else (1, [0], False))
    held = [0] * n  # blocks each request holds (paged)
    target = list(prompt)  # tokens its next prefill covers: its prompt, or its context when preempted
    redo = [False] * n  # that prefill is a recompute: its end is its next output, not its first
    swapped = [nan] * n  # when its cache's swap out to MemoryX ends (NaN: not out)
    io = [0.0, 0.0]  # when the I/O to MemoryX is next free, out and in
    kv_log: list[tuple[float, float, float, float, float]] = []

    def admit(now: float) -> None:
        nonlocal order
        while waiting and flight[0] < op.cap:
            r = waiting[0]
            p, o = prompt[r], output[r]
            if paged:  # the blocks of its prompt, or of its context when it was preempted
                need = -(-target[r] // block)
                if need > free[0]:
                    return
                free[0] -= need
                held[r] = need
            else:
                longest = max(max(prompts_in), p) if prompts_in else p
                if not all(requests_fit(op.model, mem, layers, rows, cols, op.layout, flight[0] + 1,
                                        flight[1] + p, flight[2] + o, longest)
                           for mem, layers, rows, cols in fit_args):
                    return
            waiting.popleft()
            flight[0] += 1
            flight[1] += p
            flight[2] += o
            prompts_in[p] = prompts_in.get(p, 0) + 1
            if admitted[r] != admitted[r]:  # its first admission (NaN before)
                admitted[r] = now
            if swapped[r] == swapped[r]:  # its cache back in from MemoryX, then its decode token on
                begin = max(now, io[1], swapped[r])
                io[1] = at = begin + costs[0].swap(op.swap_bytes(context[r] - 1))
                kv_log.append((2.0, r, begin, at, context[r] - 1))
                swapped[r] = nan
                heapq.heappush(heap, (now + (at - now), order, entry, ([r], [], -1)))  # as a SimPy timeout
                order += 1
            else:
                pieces[entry].append([r, 0, target[r]])
                touched.add(entry)
                if draft is not None:  # the draft prefills the prompt beside the target
                    pieces[draft].append([r, 0, p])
                    touched.add(draft)

    def preempt(v: int, now: float) -> float:
        """Request v gives up its blocks and is first in line again, its cache dropped (``recompute``)
        or swapped out to MemoryX behind the swaps before it; returns when its blocks are free."""
        leave(v)
        waiting.appendleft(v)
        target[v] = context[v]
        if not swap:
            redo[v] = True
            kv_log.append((0.0, v, now, now, context[v] - 1))
            return now
        begin = max(now, io[0])
        io[0] = swapped[v] = begin + costs[0].swap(op.swap_bytes(context[v] - 1))
        kv_log.append((1.0, v, begin, swapped[v], context[v] - 1))
        return swapped[v]

    def grow(rs: list[int], now: float) -> tuple[list[int], float]:
        """The blocks ``rs``'s decode tokens need at their contexts, earliest arrived first, preempting the
        latest-arrived not yet served while the pool is short; returns those kept and when their blocks
        are free."""
        ready, queue = now, sorted(rs)
        i, j = 0, len(queue)
        while i < j:
            r = queue[i]
            need = -(-context[r] // block) - held[r]
            while need > free[0] and j - 1 > i:
                j -= 1
                ready = max(ready, preempt(queue[j], now))
            if need > free[0]:  # the latest itself
                ready = max(ready, preempt(r, now))
                break
            free[0] -= need
            held[r] += need
            i += 1
        if i == len(queue):
            return rs, ready
        kept = set(queue[:i])
        return [r for r in rs if r in kept], ready

    def land(to: int, rs: list[int], ps: list, source: int) -> None:
        """Work from station ``source`` lands at station ``to``: at the draft, a request whose prompt it
        has not prefilled yet waits for that (``unprefilled``; one with nothing left to draft is dropped);
        with a draft and prefill wafers, its drafts wait at the first stage for its KV cache, and the cache
        for its drafts (``cached``, ``waiting_cache``)."""
        if to == draft and rs:
            rs = [r for r in rs if left[r]]
            ready = [r for r in rs if drafted[r]]
            unprefilled.update(r for r in rs if not drafted[r])
            rs = ready
        elif to == 0 and joins and rs:
            if source == last_pool:  # the KV cache: the drafts that came first now verify
                for r in rs:
                    cached[r] = True
                rs = [r for r in rs if r in waiting_cache]
                waiting_cache.difference_update(rs)
            else:
                waiting_cache.update(r for r in rs if not cached[r])
                rs = [r for r in rs if cached[r]]
        decodes[to] += rs
        pieces[to] += ps
        touched.add(to)

    def release(r: int, now: float) -> None:
        finished[r] = now
        leave(r)

    def leave(r: int) -> None:
        """Request r out of flight, its blocks back in the pool."""
        free[0] += held[r]
        held[r] = 0
        flight[0] -= 1
        flight[1] -= prompt[r]
        flight[2] -= output[r]
        p = prompt[r]
        prompts_in[p] -= 1
        if not prompts_in[p]:
            del prompts_in[p]

    def finish(s: int, now: float) -> None:
        """Stage s's iteration ends at ``now``: its tokens on, out or home."""
        nonlocal order
        rs, ps, index = running[s]  # type: ignore[misc]
        running[s] = None
        touched.add(s)
        move = costs[s].handoff
        if s == draft:  # the drafts of every round in it to the first stage, K values each
            to, out_r, out_p = 0, rs, []
            values = k * len(out_r)
            for r, _, _ in ps:  # prompts prefilled: a first token already back starts its round
                drafted[r] = True
                if r in unprefilled:
                    unprefilled.discard(r)
                    decodes[s].append(r)
        elif pool and S <= s < last_pool:  # a prefill stage: the prompts' activations to the next
            to, out_r, out_p = s + 1, [], ps
            values = sum(p[2] for p in ps) * hid
        elif pool and s == last_pool:  # the first tokens out; the finished prompts' KV to the decode wafers
            to, out_r, out_p, values = 0, [], [], 0
            ended = []
            for r, begin, tokens in ps:
                if begin + tokens == prompt[r]:
                    first[r] = emitted[stop[r] - outputs[r]] = now
                    ended.append(r)
                    if left[r]:
                        out_r.append(r)
                        values += prompt[r]
                    else:
                        release(r, now)
            admit(now)
            if joins and ended:  # and every first token to the draft (its own link: a value each)
                heapq.heappush(heap, (now + costs[draft].receive(len(ended)), order, draft, (ended, [], s)))
                order += 1
        elif s < S - 1:
            values = (width * len(rs) + (sum(p[2] for p in ps) if ps else 0)) * hid
            to, out_r, out_p = s + 1, rs, ps
        else:
            to, out_r, out_p = (0 if draft is None else draft), [], []
            for r in rs:
                emitted[stop[r] - left[r]] = now  # its output outputs − left (left counts this one)
                if e == 1.0:
                    context[r] += 1
                else:  # a verify pass: the tokens it accepted
                    passes[r] += 1
                    context[r] = prompt[r] + 1 + accepted(passes[r], output[r], e)
                if left[r] > 1:
                    left[r] -= 1
                    out_r.append(r)
                else:
                    release(r, now)
            values = width * len(rs)
            for r, begin, tokens in ps:
                if begin + tokens == target[r]:  # its prompt's last piece: the first token is out
                    values += 1
                    if redo[r]:  # a recompute's: the output its preempted decode would have given
                        redo[r] = False
                        emitted[stop[r] - left[r]] = now
                        context[r] += 1
                        if left[r] > 1:
                            left[r] -= 1
                            out_r.append(r)
                        else:
                            release(r, now)
                        continue
                    first[r] = emitted[stop[r] - outputs[r]] = now
                    if not left[r]:
                        release(r, now)
                    else:  # to the first stage, or to the draft for its first K drafts
                        out_r.append(r)
            if draft is not None:
                move = costs[draft].receive
            admit(now)
        if out_r or out_p:
            it_moved[index] = values
            at = max(now + move(values), link[s])
            link[s] = it_landed[index] = at
            if at == now:
                land(to, out_r, out_p, s)
            else:
                heapq.heappush(heap, (at, order, to, (out_r, out_p, s)))
                order += 1

    def start(s: int, now: float) -> None:
        nonlocal order
        if chunked or not pieces[s] or s == draft:
            rs = decodes[s]
            decodes[s] = []
        else:  # prefill first: the decodes wait for an iteration without prompts
            rs = []
        t0 = now  # when the iteration starts: after a swap out freeing the blocks it takes
        if paged and s == entry and rs:
            rs, ready = grow(rs, now)
            if not rs and not pieces[s]:
                return
            t0 = now + (ready - now)  # as a SimPy timeout lands
        if s == draft:  # the draft takes every prompt and every round queued
            ps = [(r, begin, tokens) for r, begin, tokens in pieces[s]]
            pieces[s] = []
        elif pieces[s]:
            ps = take_pieces(pieces[s], op.budget - width * len(rs), not chunked)
        else:
            ps = []
        longest = max(map(context.__getitem__, rs)) if rs else 0
        if ps:
            taken = [(tokens, begin, begin + tokens == target[r]) for r, begin, tokens in ps]
            cycles = costs[s].iteration(len(rs), longest, taken)
            if s == entry:
                for r, begin, _ in ps:
                    if begin == 0 and started[r] != started[r]:  # its first (a recompute's is not)
                        started[r] = t0
            it_reach.append(max(begin + tokens for tokens, begin, _ in taken))
            it_ends.append(sum(1 for t in taken if t[2]))
            it_prompt.append(sum(p[2] for p in ps))
        else:  # decodes alone (the most iterations by far): no piece to look at
            drawn = experts[s].loads(width * len(rs)) if experts[s] is not None else None
            cycles = costs[s].iteration(len(rs), longest, (), *((drawn,) if drawn else ()))
            it_reach.append(0)
            it_ends.append(0)
            it_prompt.append(0)
        it_experts.extend(costs[s].experts(len(rs), *((taken, None) if ps else ((), drawn))))
        end = t0 + cycles
        busy[s] += cycles
        running[s] = (rs, ps, len(it_stage))
        it_longest.append(longest)
        it_pieces.append(len(ps))
        it_moved.append(0)
        it_landed.append(nan)
        it_stage.append(s)
        it_start.append(t0)
        it_end.append(end)
        it_decodes.append(len(rs))
        heapq.heappush(heap, (end, order, -1 - s, ()))
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
            r = next_arrival
            next_arrival += 1
            if fits_alone(op, r):
                waiting.append(r)
            else:
                refused[r] = True
        if waiting:
            admit(now)
        while heap and heap[0][0] == now:
            _, _, to, work = heapq.heappop(heap)
            if to < 0:
                finish(-1 - to, now)
            else:
                land(to, work[0], [list(p) for p in work[1]], work[2])
        # only a station whose queue grew or whose iteration ended now can start one, in station order
        for s in sorted(touched):
            if running[s] is None and (decodes[s] or pieces[s]):
                start(s, now)
        touched.clear()

    f = np.array
    log = BatchLog(f(admitted), f(started), f(first), f(finished), f(refused, dtype=bool), f(busy),
                   np.frombuffer(it_stage, dtype=np.int32).copy(), np.frombuffer(it_start).copy(),
                   np.frombuffer(it_end).copy(), np.frombuffer(it_decodes, dtype=np.int32).copy(),
                   np.frombuffer(it_prompt, dtype=np.int32).copy(),
                   np.frombuffer(emitted),
                   *(np.frombuffer(a, dtype=np.int64) for a in (it_longest, it_pieces, it_reach, it_ends,
                                                                it_moved)),
                   np.frombuffer(it_landed), op.stations(), width, kv_events(kv_log), it_experts)
    if swap and len(log.kv_events):  # an iteration that waited for a swap out starts after later-logged ones
        order_ = np.lexsort((log.stage, log.start))
        for name in ("stage", "start", "end", "decodes", "prompt_tokens", "longest", "pieces", "reach",
                     "ends", "moved", "landed", "experts"):
            setattr(log, name, getattr(log, name)[order_])
    return log
