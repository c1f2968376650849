"""Who a ``SERVE_BATCHES`` run's scheduler (``scheduler.Scheduler``) admits, preempts and lets go
(docs/model.md §11.7): admission first come first served with head-of-line blocking, while the
requests in flight fit every stage (or, with a paged cache, while the pool has the blocks of the
next one's prompt); a paged cache's preemption of the latest-arrived when the first stage's decode
tokens need more blocks than are free; a request out of flight when its last output is out. The
state is the scheduler's (its ``__init__`` sets every name annotated here); this is the part of its
rules that moves requests in and out of flight.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ...model.serving import requests_fit
from ..programs.program import Move, ServeBatches
from .kv_pool import KvPool

__all__ = ["Admission"]


class Admission:
    """The scheduler's admission, preemption and release (see the module's docstring)."""

    op: ServeBatches
    kv: KvPool | None
    waiting: deque[int]
    refused: list[bool]
    admitted: list[float]
    finished: list[float]
    since: list[float]
    since_draft: list[float]
    prompt: list[int]
    output: list[int]
    context: list[int]
    target: list[int]
    redo: list[bool]
    flight: list[int]
    prompts_in: dict[int, int]
    fit_args: list[tuple[Any, int, int, int]]
    pieces: list[list[list[int]]]
    kinds: list[deque[bool]]
    touched: set[int]
    entry: int
    draft: int | None
    single: bool
    gone: int
    cached: list[bool]
    width: int

    def arrive(self, r: int, now: float) -> list[Move]:
        """Request r arrives: in line, or refused when it fits no stage even alone."""
        if self.op.fits_alone(r):
            self.waiting.append(r)
            return self.admit(now)
        self.refused[r] = True
        self.gone += 1
        return []

    def admit(self, now: float) -> list[Move]:
        """Admit the requests at the head of the line while they fit; returns the swaps back in."""
        moves: list[Move] = []
        if not self.waiting:
            return moves
        op, prompt, output, flight, prompts_in = (self.op, self.prompt, self.output, self.flight,
                                                  self.prompts_in)
        while self.waiting and flight[0] < op.cap:
            r = self.waiting[0]
            p, o = prompt[r], output[r]
            if self.kv is not None:  # the blocks of its prompt, or of its context when it was preempted
                if not self.kv.take(r, self.kv.blocks(self.target[r])):
                    break
            else:
                longest = max(max(prompts_in), p) if prompts_in else p
                if not all(requests_fit(op.model, mem, layers, rows, cols, op.layout, flight[0] + 1,
                                        flight[1] + p, flight[2] + o, longest)
                           for mem, layers, rows, cols in self.fit_args):
                    break
            self.waiting.popleft()
            flight[0] += 1
            flight[1] += p
            flight[2] += o
            prompts_in[p] = prompts_in.get(p, 0) + 1
            again = self.admitted[r] == self.admitted[r]  # readmitted after a preemption (NaN before)
            if not again:
                self.admitted[r] = now
            if self.kv is not None and self.kv.swapped(r):  # its cache back in, then its decode on
                at = self.kv.back_in(r, now, self.context[r] - 1)
                moves.append(Move(at, 0, [r], [], -1, -1, False))
            else:
                self.pieces[self.entry].append([r, 0, self.target[r]])
                self.since[r] = now
                self.touched.add(self.entry)
                if self.single:
                    self.kinds[self.entry].append(False)
                if self.draft is not None and not again:  # the draft prefills the prompt beside the target
                    # (once: its own cache, on its own wafers, is kept whole while the target's is paged)
                    self.pieces[self.draft].append([r, 0, p])
                    self.since_draft[r] = now
                    self.touched.add(self.draft)
        return moves

    def _leave(self, r: int) -> None:
        """Request r out of flight, its blocks back in the pool."""
        if self.kv is not None:
            self.kv.give_back(r)
        self.flight[0] -= 1
        self.flight[1] -= self.prompt[r]
        self.flight[2] -= self.output[r]
        p = self.prompt[r]
        self.prompts_in[p] -= 1
        if not self.prompts_in[p]:
            del self.prompts_in[p]

    def _release(self, r: int, now: float) -> None:
        self.finished[r] = now
        self.gone += 1
        self._leave(r)

    def _preempt(self, v: int, now: float) -> float:
        """Request v gives up its blocks and is first in line again, its cache dropped (``recompute``)
        or swapped out to MemoryX behind the swaps before it; returns when its blocks are free."""
        self._leave(v)
        self.waiting.appendleft(v)
        c = self.target[v] = self.context[v]
        assert self.kv is not None
        if not self.kv.swap:  # with prefill wafers its cache comes back from them before it verifies again
            self.cached[v] = False
        self.redo[v] = not self.kv.swap
        return self.kv.drop(v, now, c - 1)

    def _grow(self, rs: list[int], now: float) -> tuple[list[int], float]:
        """The blocks ``rs``'s decode tokens need at their contexts, earliest arrived first, preempting the
        latest-arrived not yet served while the pool is short; returns those kept and when their blocks
        are free."""
        ready, queue, pool = now, sorted(rs), self.kv
        assert pool is not None
        i, j = 0, len(queue)
        while i < j:
            r = queue[i]
            need = pool.blocks(self.context[r] + self.width - 1) - pool.held[r]  # a verify pass's K + 1
            while need > pool.free and j - 1 > i:
                j -= 1
                ready = max(ready, self._preempt(queue[j], now))
            if not pool.take(r, need):  # the latest itself
                ready = max(ready, self._preempt(r, now))
                break
            i += 1
        if i == len(queue):
            return rs, ready
        kept = set(queue[:i])
        return [r for r in rs if r in kept], ready
