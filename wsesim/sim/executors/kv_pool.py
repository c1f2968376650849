"""A paged KV cache's pool of blocks and its I/O to MemoryX (``ServeBatches.kv_block``, docs/model.md
§11.7), as the scheduler (``scheduler.Scheduler``) uses it: blocks taken and given back, a request's cache
swapped out and back in over the wafer's I/O (one transfer at a time each way), and a row logged for each
preemption and swap (``plan.kv_events``)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["KvPool"]

NAN = float("nan")


class KvPool:
    """``blocks`` blocks of ``block`` tokens for ``requests`` requests; ``swap``: a preempted request's
    cache goes out to MemoryX (else it is dropped, to recompute); ``io(tokens)``: cycles to move a cache
    of that many tokens either way."""

    def __init__(self, block: int, blocks: int, swap: bool, requests: int,
                 io: Callable[[int], float]) -> None:
        self.block, self.free, self.swap, self.io = block, blocks, swap, io
        self.held = [0] * requests  # blocks each request holds
        self.out = [NAN] * requests  # when its cache's swap out ends (NaN: not out)
        self.lanes = [0.0, 0.0]  # when the I/O is next free, out and in
        self.log: list[tuple[float, float, float, float, float]] = []  # (kind, request, start, end, tokens)

    def blocks(self, tokens: int) -> int:
        """The blocks ``tokens`` tokens take."""
        return -(-tokens // self.block)

    def take(self, r: int, need: int) -> bool:
        """Give request r ``need`` more blocks if the pool has them."""
        if need > self.free:
            return False
        self.free -= need
        self.held[r] += need
        return True

    def give_back(self, r: int) -> None:
        self.free += self.held[r]
        self.held[r] = 0

    def drop(self, r: int, now: float, tokens: int) -> float:
        """Request r preempted at ``now``, its cache of ``tokens`` tokens dropped (``recompute``) or swapped
        out behind the swaps before it; returns when its blocks are free (it has given them back)."""
        if not self.swap:
            self.log.append((0.0, r, now, now, tokens))
            return now
        begin = max(now, self.lanes[0])
        self.lanes[0] = self.out[r] = begin + self.io(tokens)
        self.log.append((1.0, r, begin, self.out[r], tokens))
        return self.out[r]

    def swapped(self, r: int) -> bool:
        """Whether request r's cache is out in MemoryX."""
        return self.out[r] == self.out[r]

    def back_in(self, r: int, now: float, tokens: int) -> float:
        """Request r's cache of ``tokens`` tokens back in from MemoryX (after its swap out has left);
        returns when it has landed."""
        begin = max(now, self.lanes[1], self.out[r])
        self.lanes[1] = at = begin + self.io(tokens)
        self.log.append((2.0, r, begin, at, tokens))
        self.out[r] = NAN
        return at
