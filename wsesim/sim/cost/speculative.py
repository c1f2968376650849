"""Speculative decoding as a station of the iteration-level scheduler (docs/model.md §11.9): the draft
model's wafers, which prefill each prompt beside the target and draft K tokens a request between the
target's verify passes (``DraftCosts``); ``model.speculative`` says how many tokens a pass yields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...model.energy import EventCounts
from .batch_costs import BatchCosts
from .costing import Costs, StageCosts, wafer_handoff

if TYPE_CHECKING:
    from ...config.inference import InferenceExperimentSpec

__all__ = ["DraftCosts", "prefill_path"]


def prefill_path(costs: Costs) -> float:
    """Cycles of one request's prefill through every stage and the hand-offs between them (not the
    last stage's, which returns the first token)."""
    stages = costs.stages
    return sum(c.prefill_cycles for c in stages) + sum(c.handoff_prefill for c in stages[:-1])


def _batches(c: StageCosts) -> BatchCosts:
    assert c.batches is not None, "a stage costed by cost_serving"
    return c.batches


class DraftCosts:
    """The draft's wafers as one station of the scheduler under continuous batching (docs/model.md §11.9):
    what an iteration of it costs, with the ``BatchCosts`` interface the executors ask.

    A request's prompt reaches the draft when it is admitted, as it reaches the target's first stage: the
    draft prefills it beside the target's prefill (its own wafers are free to). An iteration takes every
    piece of work queued: the prompts (one pass of them all, ``BatchCosts.iteration`` on each draft
    stage and the hand-offs between them), then a round for each request whose first token or last verify
    pass has come back and whose prompt the draft has prefilled: K draft steps, each through every draft
    stage with b vectors at contexts c … c + K − 1 (c the longest request's), its stages' hand-offs
    between, and K − 1 from its last stage back to its first. The iteration's drafts go to the target's
    first stage over the wafers' links (``handoff``: K values a request, ``wafer_handoff``); the target's
    last stage sends back what it verified (``receive``)."""

    def __init__(self, spec: InferenceExperimentSpec, draft: Costs, k: int) -> None:
        self.spec, self.k = spec, k
        self.stages = [_batches(c) for c in draft.stages]
        self.bpv, self.hid = spec.model.bytes_per_value, spec.inference.speculative.draft.hidden_size \
            if spec.inference.speculative else spec.model.hidden_size
        self._iteration: dict[tuple, float] = {}
        self._counts: dict[tuple, EventCounts] = {}
        self._moved: dict[int, float] = {}

    def _parts(self, decodes: int, longest: int, pieces: list[tuple[int, int, bool]]):
        """(stage costs, decodes, longest, pieces, hand-off values) of each pass the iteration makes, in
        order: the prompts' one pass, then each draft step's for the ``decodes`` requests' rounds."""
        last = len(self.stages) - 1
        if pieces:
            tokens = sum(p[0] for p in pieces)
            for s, st in enumerate(self.stages):
                yield st, 0, 0, pieces, tokens * self.hid if s < last else 0
        for i in range(self.k if decodes else 0):
            for s, st in enumerate(self.stages):
                back = decodes if (s == last and i < self.k - 1 and last) else 0
                yield st, decodes, longest + i, [], decodes * self.hid if s < last else back

    def iteration(self, decodes: int, longest: int, pieces: list[tuple[int, int, bool]]) -> float:
        key = (decodes, longest, tuple(pieces))
        c = self._iteration.get(key)
        if c is None:
            c = self._iteration[key] = sum(st.iteration(d, ctx, ps) + st.handoff(moved)
                                           for st, d, ctx, ps, moved in self._parts(decodes, longest, pieces))
        return c

    def counts(self, decodes: int, longest: int, pieces: int, tokens: int, reach: int,
               ends: int) -> EventCounts:
        """The events of an iteration (as ``BatchCosts.counts``): its prompts' pieces counted as one
        piece of ``tokens`` reaching ``reach`` on each draft stage (the draft's prefill pass)."""
        key = (decodes, longest, pieces, tokens, reach, ends)
        c = self._counts.get(key)
        if c is None:
            one = [(tokens, reach - tokens, bool(ends))] if pieces else []
            total = EventCounts()
            for st, d, ctx, ps, moved in self._parts(decodes, longest, one):
                total = total + st.counts(d, ctx, len(ps), tokens if ps else 0, reach if ps else 0,
                                          int(bool(ends)) if ps else 0) + st.handoff_counts(moved)
            c = self._counts[key] = total
        return c

    def handoff(self, values: int) -> float:
        """Cycles to send ``values`` drafted tokens to the target's first stage (between wafers);
        remembered by ``values`` (a pure function of it, asked at every iteration's end)."""
        c = self._moved.get(values)
        if c is None:
            c = self._moved[values] = wafer_handoff(self.spec, values * self.bpv) if values else 0.0
        return c

    def handoff_counts(self, values: int) -> EventCounts:
        return EventCounts(io_bytes=2.0 * values * self.bpv)

    def experts(self, decodes: int, pieces: Any = (), loads: Any = None) -> tuple[float, float, float]:
        """The draft's MoE work in an iteration, for the trace (``BatchCosts.experts``): none shown (its
        stages' passes are summed into the draft's one span)."""
        return (0.0, 0.0, 0.0)

    receive = handoff  # the target's verified tokens back to the draft: the same move the other way
    receive_counts = handoff_counts
