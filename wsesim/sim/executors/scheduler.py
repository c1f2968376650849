"""The iteration-level scheduler of a ``SERVE_BATCHES`` op (docs/model.md §11.7), written once: which
work each station takes next, what an ended iteration sends on, who is admitted, preempted, done. It
emits the ops of a serving run (``program.Iteration``, ``program.Move``) and logs what they did; both
executors drive it, each timing the ops with its own mechanism (``batching.run_batches``: one loop over
event times; ``reference_batching.serve_batches``: SimPy processes), so no rule is written twice.

The rules are the op's (``program.ServeBatches`` states them whole). Admission is first come first
served with head-of-line blocking (``admit``; one that fits no stage even alone is refused,
``ServeBatches.fits_alone``); an iteration takes its station's queued decode tokens in the order they
came, then its prompt pieces in order (``take_pieces``), all through one pass of the station's kernels
(under ``none``, one decode token or one whole prompt, the first to come); at the last stage a decode
token is an output, a piece ending its prompt the first one, and a request whose last token is out
leaves (``_outputs``); a draft and a prefill pool are more stations (``land``: where their work waits
for the other half of it); a paged cache gives each decode token of the first stage the
blocks of its context, earliest arrived first, preempting the latest-arrived while short (``_grow``).
Admission, preemption and release are ``admission.Admission``'s, a part of the class written apart.
A request has one piece of work in flight at a time, so a decode token queued is its request's index
alone: the request's next context (``context[r]``) and outputs still to come (``left[r]``) say the rest.
"""

from __future__ import annotations

from array import array
from collections import deque
from itertools import accumulate, repeat
from typing import Any

import numpy as np

from ...model.speculative import accepted
from ..cost.moe_serving import stage_experts
from ..programs.plan import ITERATION_TIMES, BatchLog, iteration_columns, kv_events
from ..programs.program import Iteration, Move, ServeBatches
from .admission import Admission
from .kv_pool import KvPool
from .run_ahead import RunAhead

__all__ = ["Scheduler", "take_pieces"]

_NAN = float("nan")
# a row of the log's times (``plan.iteration_columns``): its width, where the values moved and the landing go
_ROW, _MOVED, _LANDED = len(ITERATION_TIMES), ITERATION_TIMES.index("moved"), ITERATION_TIMES.index("landed")


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


class Scheduler(Admission, RunAhead):
    """The state of one ``ServeBatches`` run and its rules (see the module's docstring). An executor
    calls ``arrive`` at each arrival, ``land`` when a ``Move`` lands (an ordered one's landing is
    logged), ``start`` at the end of a cycle for each station in ``touched`` that is idle with work
    queued, and ``finish`` when an ``Iteration`` ends; ``log`` gives the run's ``BatchLog``. ``costs``:
    each stage's ``BatchCosts``, then with a draft its station's (``speculative.DraftCosts``)."""

    def __init__(self, op: ServeBatches, costs: list[Any]) -> None:
        n, S = op.requests, len(op.stages)
        self.op, self.costs, self.S, self.hid = op, costs, S, op.model.hidden_size
        pool = self.pool = op.prefill_pool  # split prefill: the prefill wafers' stages, S … S + pool − 1
        self.entry, self.last_pool = (S if pool else 0), S + pool - 1  # where a prompt starts; the pool's end
        self.draft = S + pool if op.speculative else None  # the draft's station, after the last stage
        self.stations = S + pool + (self.draft is not None)
        self.k = op.speculative[0] if op.speculative else 0  # tokens a draft round proposes
        self.e, self.width = op.tokens_per_pass, op.width
        self.experts = stage_experts(op) + [None] * (self.stations - S)  # sampled routing's draws
        self.arrival, self.prompt, self.output = op.arrival.tolist(), op.prompt.tolist(), op.output.tolist()
        self.outputs = op.outputs().tolist()  # each request's outputs: tokens, or first + verify passes
        self.context = [p + 1 for p in self.prompt]  # the first decode token's context
        self.left = [o - 1 for o in self.outputs]  # decode outputs to come
        self.passes = [0] * n  # verify passes done (with a draft)
        # the draft has prefilled the request's prompt; with a prefill pool too, its cache reached stage 0
        self.drafted, self.cached = [False] * n, [False] * n
        self.joins = bool(pool) and self.draft is not None  # a verify pass needs the drafts and the cache
        # first tokens at the draft before it prefilled their prompt; drafts at stage 0 before their cache
        self.unprefilled, self.waiting_cache = set[int](), set[int]()
        nan = float("nan")
        self.admitted, self.started, self.first, self.finished = ([nan] * n for _ in range(4))
        self.refused = [False] * n
        self.stop = list(accumulate(self.outputs))  # request r's outputs end before stop[r] in ``emitted``
        self.emitted = array("d", [nan]) * (self.stop[-1] if n else 0)
        self.busy = [0.0] * self.stations
        self.moe = bool(op.model.experts)  # an MoE model: each iteration's expert figures logged (3 a row)
        self.expert_rows = array("d")
        self.members: list[tuple[tuple[int, ...], tuple[tuple[int, int, int], ...]]] | None = (
            [] if op.members else None)  # each iteration's decode requests and prompt pieces
        # cycles work queued at each station before an iteration took it; when a request's work landed at
        # its station (its own at the draft: a request has a prefill there beside the target's)
        self.waited = [0.0] * self.stations
        self.since, self.since_draft = [0.0] * n, [0.0] * n
        # the iterations' log, a row each (``plan.iteration_columns``): its counts (stage, decodes, prompt
        # tokens, longest, pieces, reach, ends), and its times (start, end) and values moved and landing
        self.counts, self.times = array("i"), array("d")
        self.decodes: list[list[int]] = [[] for _ in range(self.stations)]  # requests whose decode is queued
        self.pieces: list[list[list[int]]] = [[] for _ in range(self.stations)]  # [request, start, tokens]
        self.running: list[Iteration | None] = [None] * self.stations
        self.chunked = op.policy == "chunked"
        # ``none``: a decode token or a whole prompt an iteration, in the order they came (True: a decode)
        self.single = op.policy == "none"
        self.kinds: list[deque[bool]] = [deque() for _ in range(self.stations)]
        self.waiting: deque[int] = deque()
        self.flight = [0, 0, 0]  # requests in flight, their prompt tokens, their output tokens
        self.prompts_in: dict[int, int] = {}  # prompt length -> requests in flight with it (the longest)
        self.touched = set[int]()  # the stations work landed at or left from in this cycle
        self.gone = 0  # requests finished or refused
        self.fit_args = [(w.stage.memory, len(w.stage.layers), w.stage.rows, w.stage.cols) for w in op.stages]
        self.kv = (KvPool(op.kv_block[0], op.kv_block[1], op.kv_block[2] == "swap", n,
                             lambda tokens: costs[0].swap(op.swap_bytes(tokens))) if op.kv_block else None)
        self.target = list(self.prompt)  # tokens its next prefill covers: its prompt, or its context
        self.redo = [False] * n  # that prefill is a recompute: its end is its next output, not its first
        self.grows = 0 if self.kv is not None else -1  # the station giving decode tokens their blocks
        # one station alone, its tokens home to itself: decode iterations can be run ahead (``run_ahead``)
        self.loops = (self.stations == 1 and self.kv is None and self.experts[0] is None and not self.single
                      and self.e == 1.0)

    @property
    def done(self) -> bool:
        """Every request has finished or been refused."""
        return self.gone == self.op.requests

    # ------------------------------------------------------------------------------------- stations
    def land(self, move: Move, now: float) -> None:
        """A move's work lands at its station: at the draft, a request whose prompt it has not prefilled
        yet waits for that (``unprefilled``; one with nothing left to draft is dropped); with a draft and
        prefill wafers, its drafts wait at the first stage for its KV cache, and the cache for its drafts
        (``cached``, ``waiting_cache``)."""
        to, rs, ps = move.to, move.decodes, move.pieces
        if move.ordered and move.index >= 0:  # an iteration's hand-off: when it landed, in its log row
            self.times[move.index * _ROW + _LANDED] = now
        if to == self.draft and rs:
            rs = [r for r in rs if self.left[r]]
            ready = [r for r in rs if self.drafted[r]]
            self.unprefilled.update(r for r in rs if not self.drafted[r])
            rs = ready
        elif to == 0 and self.joins and rs:
            if move.source == self.last_pool:  # the KV cache: the drafts that came first now verify
                for r in rs:
                    self.cached[r] = True
                rs = [r for r in rs if r in self.waiting_cache]
                self.waiting_cache.difference_update(rs)
            else:
                self.waiting_cache.update(r for r in rs if not self.cached[r])
                rs = [r for r in rs if self.cached[r]]
        self.decodes[to] += rs
        self.touched.add(to)
        since = self.since_draft if to == self.draft else self.since
        for r in rs:
            since[r] = now
        if ps:
            self.pieces[to] += ps
            for p in ps:
                since[p[0]] = now
        if self.single:
            self.kinds[to] += [True] * len(rs) + [False] * len(ps)

    def ready(self, s: int) -> bool:
        """Whether station s is idle with work queued (it starts an iteration at this cycle's end)."""
        return self.running[s] is None and bool(self.decodes[s] or self.pieces[s])

    def _take(self, s: int, now: float) -> tuple[list[int], list, float] | None:
        """Station s's batch: its decode tokens (not under prefill first while prompts wait; with a paged
        cache, those given their blocks) and prompt pieces (``take_pieces``; the draft takes all), and
        when it can start (after a swap out freeing its blocks); None when preemption left nothing."""
        if self.chunked or not self.pieces[s] or s == self.draft:
            rs = self.decodes[s]
            self.decodes[s] = []
        else:  # prefill first: the decodes wait for an iteration without prompts
            rs = []
        t0 = now
        if self.kv is not None and s == 0 and rs:
            rs, ready = self._grow(rs, now)
            if not rs and not self.pieces[s]:
                return None
            t0 = now + (ready - now)  # as a SimPy timeout lands
        if s == self.draft:  # the draft takes every prompt and every round queued
            ps = [(r, begin, tokens) for r, begin, tokens in self.pieces[s]]
            self.pieces[s] = []
        elif self.pieces[s]:
            ps = take_pieces(self.pieces[s], self.op.budget - self.width * len(rs), not self.chunked)
        else:
            ps = []
        return rs, ps, t0

    def start(self, s: int, now: float) -> Iteration | None:
        """Station s's next iteration, from ``now`` (later when the blocks it takes are still being
        swapped out); None when preemption left it nothing to do."""
        context, target = self.context, self.target
        if not self.pieces[s] and s != self.grows and not self.single:  # decode tokens alone: the most
            rs = self.decodes[s]
            self.decodes[s] = []
            return self._decoding(s, rs, max(map(context.__getitem__, rs)), now)
        if self.single:  # one at a time, the first to come: a decode token, or a whole prompt
            rs, ps, t0 = (([self.decodes[s].pop(0)], [], now) if self.kinds[s].popleft()
                          else ([], [tuple(self.pieces[s].pop(0))], now))
        else:
            taken_now = self._take(s, now)
            if taken_now is None:
                return None
            rs, ps, t0 = taken_now
        longest = max(map(context.__getitem__, rs)) if rs else 0
        loads, index = None, len(self.times) // _ROW
        if ps:
            taken = [(tokens, begin, begin + tokens == target[r]) for r, begin, tokens in ps]
            cycles = self.costs[s].iteration(len(rs), longest, taken)
            if s == self.entry:
                for r, begin, _ in ps:
                    if begin == 0 and self.started[r] != self.started[r]:  # its first (a recompute's not)
                        self.started[r] = t0
            self.counts.extend((s, len(rs), sum(p[2] for p in ps), longest, len(ps),
                                max(begin + tokens for tokens, begin, _ in taken),
                                sum(1 for t in taken if t[2])))
            self.times.extend((t0, t0 + cycles, 0.0, _NAN))
        else:  # decodes alone after a paged cache's preemptions, or under ``none``
            return self._decoding(s, rs, longest, t0)
        it = Iteration(s, t0, cycles, rs, ps, longest, loads, index)
        if self.moe:  # its MoE layers' dispatch, experts and combine, for the trace
            self.expert_rows.extend(self.costs[s].experts(len(rs), taken, loads))
        if self.members is not None:
            self.members.append((tuple(rs), tuple(tuple(p) for p in ps)))  # type: ignore[misc]
        self.busy[s] += cycles
        since = self.since_draft if s == self.draft else self.since
        self.waited[s] += (len(rs) + len(ps)) * t0 - sum(map(since.__getitem__, rs)) - sum(
            since[p[0]] for p in ps)
        if ps and self.pieces[s] and self.pieces[s][0][0] == ps[-1][0]:  # cut: its rest waits from the end
            since[ps[-1][0]] = t0 + cycles
        self.running[s] = it
        return it

    def _decoding(self, s: int, rs: list[int], longest: int, t0: float, landed: bool = False) -> Iteration:
        """Station s's iteration of decode tokens alone (``rs``, the longest at context ``longest``) from
        ``t0``: ``start``'s, with no piece to look at (``landed``: every token came at ``t0``, as in
        ``run_ahead``; its wait summed as for tokens logged as landed then)."""
        drawn, costs, b = self.experts[s], self.costs[s], len(rs)
        if drawn is None:
            loads, cycles = None, costs.iteration(b, longest, ())
        else:
            loads = drawn.loads(self.width * b)
            cycles = costs.iteration(b, longest, (), loads)
        index = len(self.times) // _ROW
        self.counts.extend((s, b, 0, longest, 0, 0, 0))
        self.times.extend((t0, t0 + cycles, 0.0, _NAN))
        if self.moe:  # its MoE layers' dispatch, experts and combine, for the trace
            self.expert_rows.extend(costs.experts(b, (), loads))
        if self.members is not None:
            self.members.append((tuple(rs), ()))
        self.busy[s] += cycles
        since = self.since_draft if s == self.draft else self.since
        self.waited[s] += b * t0 - (sum(repeat(t0, b)) if landed else sum(map(since.__getitem__, rs)))
        it = self.running[s] = Iteration(s, t0, cycles, rs, [], longest, loads, index)
        return it

    def finish(self, s: int, now: float) -> list[Move]:
        """Station s's iteration ends at ``now``: its tokens on, out or home. Returns the moves it sends:
        its hand-off on its outbound link (``ordered``), and with a draft and prefill wafers the first
        tokens to the draft on a link of their own."""
        it = self.running[s]
        assert it is not None
        self.running[s] = None
        self.touched.add(s)
        if s == self.S - 1:
            return self._finish_last(it, now)
        rs, ps = it.decodes, it.pieces
        S, pool, draft = self.S, self.pool, self.draft
        # a stage's hand-off, after an iteration with prompt tokens or without (``BatchCosts.handoff``)
        move = self.costs[s].handoff
        prompt = bool(ps)
        moves: list[Move] = []
        if s == draft:  # the drafts of every round in it to the first stage, K values each
            to, out_r, out_p, prompt = 0, rs, [], False
            values = self.k * len(out_r)
            for r, _, _ in ps:  # prompts prefilled: a first token already back starts its round
                self.drafted[r] = True
                if r in self.unprefilled:
                    self.unprefilled.discard(r)
                    self.decodes[s].append(r)
                    self.since_draft[r] = now
        elif pool and S <= s < self.last_pool:  # a prefill stage: the prompts' activations to the next
            to, out_r, out_p = s + 1, [], ps
            values = sum(p[2] for p in ps) * self.hid
        elif pool and s == self.last_pool:  # the first tokens out; the finished prompts' KV to decode
            to, out_r, out_p, values, prompt = 0, [], [], 0, False
            ended = []
            for r, begin, tokens in ps:
                if begin + tokens == self.target[r]:
                    ended.append(r)
                    if self._prompt_done(r, now):
                        out_r.append(r)
                        values += self.target[r]  # its cache: its prompt, or a recompute's context
            moves += self.admit(now)
            if self.joins and ended:  # and every first token to the draft (its own link: a value each)
                assert draft is not None
                moves.append(Move(now + self.costs[draft].receive(len(ended)), draft, ended, [], s, -1,
                                  False))
        else:  # a stage before the last
            values = (self.width * len(rs) + (sum(p[2] for p in ps) if ps else 0)) * self.hid
            to, out_r, out_p = s + 1, rs, ps
        if out_r or out_p:
            self.times[it.index * _ROW + _MOVED] = values
            moves.append(Move(now + (move(values, True) if prompt else move(values)), to, out_r, out_p, s,
                              it.index, True))
        return moves

    def _finish_last(self, it: Iteration, now: float) -> list[Move]:
        """The last stage's iteration ends: its outputs, and the requests with more to come home (or to
        the draft)."""
        s = self.S - 1
        home: list[int] = []
        values = self._outputs(it, now, home)
        sent = self.admit(now)
        if home:
            self.times[it.index * _ROW + _MOVED] = values
            if self.draft is not None:
                at = self.costs[self.draft].receive(values)
            else:  # after an iteration with prompt tokens or without (``BatchCosts.handoff``)
                at = self.costs[s].handoff(values, True) if it.pieces else self.costs[s].handoff(values)
            sent.append(Move(now + at, 0 if self.draft is None else self.draft, home, [], s, it.index, True))
        return sent

    def _emit(self, r: int, now: float) -> bool:
        """Request r's next output at ``now`` (a verify pass: the tokens it accepted); whether more come
        (else it leaves)."""
        left = self.left
        self.emitted[self.stop[r] - left[r]] = now  # its output outputs − left (left counts this one)
        if self.e == 1.0:
            self.context[r] += 1
        else:  # a verify pass: the tokens it accepted
            self.passes[r] += 1
            self.context[r] = self.prompt[r] + 1 + accepted(self.passes[r], self.output[r], self.e)
        if left[r] > 1:
            left[r] -= 1
            return True
        self._release(r, now)
        return False

    def _prompt_done(self, r: int, now: float) -> bool:
        """Request r's prompt (or, recomputed after a preemption, its context) has been prefilled: its
        first token (a recompute's: the output its preempted decode would have given); whether more
        come (else it leaves)."""
        if self.redo[r]:
            self.redo[r] = False
            return self._emit(r, now)
        self.first[r] = self.emitted[self.stop[r] - self.outputs[r]] = now
        if self.left[r]:
            return True
        self._release(r, now)
        return False

    def _outputs(self, it: Iteration, now: float, out_r: list[int]) -> int:
        """The last stage's iteration: each decode token an output, each piece ending its prompt a first
        token; those with more to come in ``out_r`` (to the first stage, or to the draft for their next
        K drafts). Returns the values sent home."""
        emit, target = self._emit, self.target
        out_r += [r for r in it.decodes if emit(r, now)]
        values = self.width * len(it.decodes)
        for r, begin, tokens in it.pieces:
            if begin + tokens == target[r]:  # its prompt's last piece: the first token is out
                values += 1
                if self._prompt_done(r, now):
                    out_r.append(r)
        return values

    # ------------------------------------------------------------------------------------------ log
    def log(self) -> BatchLog:
        """The run's log, its iterations in the order they started (then by station)."""
        f = np.array
        cols, order = iteration_columns(self.counts, self.times)
        experts = (np.frombuffer(self.expert_rows).reshape(-1, 3)[order] if self.moe
                   else np.zeros((len(order), 3)))
        members = tuple(self.members[i] for i in order.tolist()) if self.members is not None else ()
        return BatchLog(f(self.admitted), f(self.started), f(self.first), f(self.finished),
                        f(self.refused, dtype=bool), f(self.busy), cols["stage"], cols["start"], cols["end"],
                        cols["decodes"], cols["prompt_tokens"], np.frombuffer(self.emitted),
                        cols["longest"], cols["pieces"], cols["reach"], cols["ends"], cols["moved"],
                        cols["landed"], self.op.stations(), self.width,
                        kv_events(self.kv.log if self.kv else []),
                        waited=f(self.waited), members=members, experts=experts,
                        expert_use=tuple(e.use() if e is not None else None for e in self.experts))
