"""The fast executor's shortcut on a run of one station alone (``Scheduler.loops``: no draft, no prefill
pool, no paged cache, no sampled routing; docs/model.md §11.7): its decode tokens come home to it, so an
iteration of decode tokens with nothing else queued is followed by the same tokens one position on, and
nothing but an arrival (or a request leaving) can change that. ``RunAhead.run_ahead`` runs those
iterations at once and logs them as the scheduler's ``finish``, ``land`` and ``start`` would one by one,
bit for bit (the reference executor, which never takes it, checks that). The state is the scheduler's
(its ``__init__`` sets every name annotated here).
"""

from __future__ import annotations

from array import array
from itertools import repeat
from typing import TYPE_CHECKING, Any

from ..programs.plan import ITERATION_COUNTS, ITERATION_TIMES
from ..programs.program import Iteration

__all__ = ["RunAhead"]

# a row of the log's times and of its counts (``plan.iteration_columns``): their widths, where the values
# moved, the landing and the longest context go
_ROW, _MOVED, _COUNTS = len(ITERATION_TIMES), ITERATION_TIMES.index("moved"), len(ITERATION_COUNTS)
_LONGEST = ITERATION_COUNTS.index("longest")


class RunAhead:
    """The scheduler's decode iterations run ahead (see the module's docstring)."""

    costs: list[Any]
    width: int
    pieces: list[list[list[int]]]
    decodes: list[list[int]]
    left: list[int]
    context: list[int]
    since: list[float]
    stop: list[int]
    emitted: array
    times: array
    counts: array
    busy: list[float]
    waited: list[float]
    moe: bool
    expert_rows: array
    members: list | None

    if TYPE_CHECKING:  # the scheduler's: one iteration of decode tokens alone, logged
        def _decoding(self, s: int, rs: list[int], longest: int, t0: float,
                      landed: bool = False) -> Iteration: ...

    def run_ahead(self, it: Iteration, until: float) -> Iteration:
        """The iterations after ``it`` (just started) on a run of one station (``loops``: no draft, no
        prefill pool, no paged cache, no sampled routing), run ahead while nothing else can happen: ``it``
        carries decode tokens alone with nothing else queued, so each next iteration takes the same tokens
        one position on (its longest context one more), as ``finish``, ``land`` and ``start`` would
        give it. One is run ahead while it starts before ``until`` (the executor's next other event) and
        no request of it would leave before it (the admission's state is then unchanged: ``admit`` admits
        nobody new). Those that end in the window are logged together, as ``_decoding`` logs one, their
        outputs ``_emit``'s (a request's in one slice); returns the last one started, running."""
        s, rs = it.station, it.decodes
        if it.pieces or self.pieces[s] or self.decodes[s]:
            return it
        costs, b = self.costs[s], len(rs)
        values, cycles = self.width * b, costs.iteration
        home = costs.handoff(values)
        rows, spent = array("d"), []  # the times rows of ``it`` and those after it that end; their cycles
        t0, c, longest = it.start, it.cycles, it.longest
        for _ in range(min(map(self.left.__getitem__, rs)) - 1):  # iterations whose outputs all have more
            end = t0 + c
            landed = end + home  # the station's own hand-off home: nothing ahead of it on its link
            if landed >= until:
                break
            rows.extend((t0, end, values, landed))
            t0, longest = landed, longest + 1
            c = cycles(b, longest, ())
            spent.append(c)
        n = len(spent)
        if not n:
            return it
        self.times[it.index * _ROW + _MOVED:it.index * _ROW + _ROW] = rows[_MOVED:_ROW]
        self.times.extend(rows[_ROW:])
        block = array("i", (s, b, 0, 0, 0, 0, 0)) * (n - 1)  # ``_decoding``'s counts, each at its longest
        block[_LONGEST::_COUNTS] = array("i", range(it.longest + 1, longest))
        self.counts.extend(block)
        busy, waited = self.busy[s], self.waited[s]
        for k in range(1, n):  # in order, as an iteration at a time adds them
            busy += spent[k - 1]
            waited += b * rows[k * _ROW] - sum(repeat(rows[k * _ROW], b))
        self.busy[s], self.waited[s] = busy, waited
        if self.moe:
            self.expert_rows.extend(costs.experts(b, (), None) * (n - 1))
        if self.members is not None:
            self.members.extend([(tuple(rs), ())] * (n - 1))
        ends = rows[1::_ROW]  # each request's n outputs (``_emit``: e is 1, none the last)
        emitted, stop, left, context, since = self.emitted, self.stop, self.left, self.context, self.since
        for r in rs:
            at = stop[r] - left[r]
            emitted[at:at + n] = ends
            context[r] += n
            left[r] -= n
            since[r] = t0
        return self._decoding(s, rs, longest, t0, True)
