"""The scheduler (``sim/executors/scheduler.py``, docs/model.md §11.7) driven by hand, with no executor: the ops it
emits (``Iteration``: which decode tokens and prompt pieces a station's pass takes; ``Move``: where the
work goes after, landing when) for events a test hands it, on one stage whose costs are given in cycles.
The rules are checked here once; the executors only time them (tests/sim/test_batching.py holds them
against each other)."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.inference import load_inference_data
from wsesim.sim.executors.scheduler import Scheduler
from wsesim.sim.programs.mapping import map_stages
from wsesim.sim.programs.program import Iteration, Move, ServeBatches, StageWork

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 8, "output_len": 3}, "grid": "1x1"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
         "hardware.pe.sram": "1 MiB"}
PREFILL, DECODE, HANDOFF = 100.0, 10.0, 0.0


class _Given:
    """A station whose costs are given: a pass with any prompt ``PREFILL``, decode tokens alone
    ``DECODE`` (any batch), each hand-off ``HANDOFF``."""

    def iteration(self, decodes: int, longest: int, pieces, loads=None) -> float:
        return PREFILL if pieces else DECODE

    def handoff(self, values: int, prompt: bool = False) -> float:
        return HANDOFF


def _scheduler(policy: str, arrival: list[float], cap: int = 8, budget: int = 16) -> Scheduler:
    """One stage (the tiny dense model's, so that every request fits), requests of an 8-token prompt and
    3 outputs arriving at ``arrival`` cycles."""
    spec = load_inference_data(TINY, overrides=DENSE).spec
    stage = map_stages(spec).stages[0]
    n = len(arrival)
    op = ServeBatches((StageWork(stage, (), (), None, None),), np.array(arrival, dtype=float),  # type: ignore[arg-type]
                      np.full(n, 8), np.full(n, 3), cap, policy, budget, spec.model, "shift")
    return Scheduler(op, [_Given()])


def _run(sched: Scheduler) -> list[Iteration]:
    """Drive the scheduler by hand as an executor would (events in time order, iterations started at the
    end of their cycle), logging each ``Iteration`` it emits."""
    events: list[tuple[float, int, object]] = []  # (cycle, order, Move or ended station)
    out: list[Iteration] = []
    order = 0
    arrivals = list(enumerate(sched.arrival))

    def send(moves: list[Move], now: float) -> None:
        nonlocal order
        for m in moves:
            if m.at == now:  # lands in this cycle, before the cycle's iterations start
                sched.land(m, now)
            else:
                events.append((m.at, order, m))
                order += 1

    while arrivals or events:
        now = min([a for _, a in arrivals[:1]] + [e[0] for e in events])
        while arrivals and arrivals[0][1] == now:
            r, _ = arrivals.pop(0)
            send(sched.arrive(r, now), now)
        for e in sorted(x for x in events if x[0] == now):
            events.remove(e)
            if isinstance(e[2], Move):
                sched.land(e[2], now)
            else:
                send(sched.finish(e[2], now), now)  # type: ignore[arg-type]
        for s in sorted(sched.touched):
            if sched.ready(s):
                it = sched.start(s, now)
                assert it is not None
                out.append(it)
                events.append((it.start + it.cycles, order, s))
                order += 1
        sched.touched.clear()
    return out


def test_two_requests_together_share_the_prompt_pass_and_then_decode_as_one_batch() -> None:
    """Prefill first, a budget of 16 tokens: both 8-token prompts in one pass (0 to 100), whose end is
    both first tokens; then both decode tokens in each pass (100 to 110, 110 to 120): 3 iterations, each
    a Move home of the values it produced (one token id a request)."""
    sched = _scheduler("prefill_first", [0.0, 0.0])
    its = _run(sched)
    assert [(it.start, it.cycles, it.decodes, it.pieces) for it in its] == [
        (0.0, PREFILL, [], [(0, 0, 8), (1, 0, 8)]), (100.0, DECODE, [0, 1], []), (110.0, DECODE, [0, 1], [])]
    log = sched.log()
    assert log.emitted.tolist() == [100.0, 110.0, 120.0] * 2
    assert log.moved.tolist() == [2, 2, 0]  # the last pass's tokens are the requests' last: nothing home
    assert sched.done and log.waited.tolist() == [0.0]


def test_a_budget_of_one_prompt_takes_them_one_pass_each() -> None:
    """A budget of 8 fits one prompt: the second waits for the next pass (0 to 100, 100 to 200); under
    prefill first the first request's decode token waits too, until no prompt is queued."""
    its = _run(_scheduler("prefill_first", [0.0, 0.0], budget=8))
    assert [(it.start, it.decodes, [p[0] for p in it.pieces]) for it in its][:3] == [
        (0.0, [], [0]), (100.0, [], [1]), (200.0, [0, 1], [])]


def test_chunked_cuts_a_prompt_where_the_budget_ends_and_decodes_ride_beside() -> None:
    """Chunked with a budget of 6: the first pass takes request 0's first 6 prompt tokens; the second its
    last 2 and request 1's first 4; the third request 0's decode token beside request 1's last 4."""
    its = _run(_scheduler("chunked", [0.0, 0.0], budget=6))
    assert [(it.decodes, it.pieces) for it in its][:3] == [
        ([], [(0, 0, 6)]), ([], [(0, 6, 2), (1, 0, 4)]), ([0], [(1, 4, 4)])]


def test_without_batching_one_piece_of_work_a_pass_first_come_first_served() -> None:
    """``none``: each pass one prompt or one decode token, in the order they came: both prompts (0 to
    100, 100 to 200), then request 0's token (it came back at 100, before request 1's at 200), then 1's,
    and so on; the waits by hand: request 1's prompt 100, request 0's tokens 100 and 10 (it came home at
    100, ran at 200; came home at 210, ran at 220), request 1's 10 and 10."""
    sched = _scheduler("none", [0.0, 0.0])
    its = _run(sched)
    assert [(it.start, it.decodes, [p[0] for p in it.pieces]) for it in its] == [
        (0.0, [], [0]), (100.0, [], [1]), (200.0, [0], []), (210.0, [1], []), (220.0, [0], []),
        (230.0, [1], [])]
    assert sched.log().waited.tolist() == [100.0 + 100.0 + 10.0 + 10.0 + 10.0]


def test_admission_is_head_of_line_at_the_cap() -> None:
    """A cap of one: request 1 arrives at 5 and waits until request 0's last token (at 120) frees the
    room; then its prompt runs alone."""
    sched = _scheduler("prefill_first", [0.0, 5.0], cap=1)
    its = _run(sched)
    log = sched.log()
    assert log.admitted.tolist() == [0.0, 120.0]
    assert [(it.start, [p[0] for p in it.pieces]) for it in its if it.pieces] == [(0.0, [0]), (120.0, [1])]


@pytest.mark.parametrize("policy", ["prefill_first", "chunked", "none"])
def test_every_output_is_emitted_once_and_every_request_leaves(policy: str) -> None:
    sched = _scheduler(policy, [0.0, 3.0, 3.0, 250.0], cap=2, budget=10)
    _run(sched)
    log = sched.log()
    assert sched.done and np.isfinite(log.emitted).all() and np.isfinite(log.finished).all()
    assert (np.diff(log.emitted.reshape(4, 3), axis=1) > 0).all()
