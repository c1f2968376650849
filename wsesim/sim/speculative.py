"""Speculative decoding on the one-request pipeline (docs/model.md §11.9), as costs the executors run
unchanged: a request's decode tokens become verify rounds, each the draft's K steps and the target's
pass over K + 1 positions, and ``model.speculative`` says how many rounds an output takes.

A round j starting from context c_j (``round_contexts``):

* the draft, on its own wafers, runs K decode steps at contexts c_j … c_j + K − 1, each through its
  stages (``BatchCosts.decode(1) + attention(c)``: the one-request step of §11.4 at that context) and
  their hand-offs, with K − 1 hand-offs from its last stage back to its first between steps;
* the K drafted tokens go to the target's first stage (K values between wafers: ``wafer_handoff``);
* each target stage verifies K + 1 positions in one pass: its decode kernels with K + 1 vectors and its
  attention with K + 1 vectors at context c_j + K (``BatchCosts``: a GEMV of K + 1 vectors, the skinny
  GEMM of §11.7; each query against a cache at most that long) and hands K + 1 activations on;
* the target's last stage sends the K + 1 verified tokens back to the draft (between wafers).

So the last target stage's hand-off after round j is: back to the draft + the draft's round j + 1 + the
drafts to the target. After the prefill it is the first token back, the draft's first round, and the
time the draft's own prefill (on its wafers, started with the target's) runs past the target's.
"""

from __future__ import annotations

from dataclasses import replace

from ..config.inference import InferenceExperimentSpec
from ..model.energy import EventCounts
from ..model.speculative import expected_tokens, round_contexts
from .batch_costs import BatchCosts
from .costing import Costs, StageCosts, wafer_handoff
from .program import Serve

__all__ = ["DraftCosts", "prefill_path", "speculative_costs"]


def prefill_path(costs: Costs) -> float:
    """Cycles of one request's prefill through every stage and the hand-offs between them (not the
    last stage's, which returns the first token)."""
    stages = costs.stages
    return sum(c.prefill_cycles for c in stages) + sum(c.handoff_prefill for c in stages[:-1])


def _batches(c: StageCosts) -> BatchCosts:
    assert c.batches is not None, "costed with cost_serving(..., batches=True)"
    return c.batches


def speculative_costs(spec: InferenceExperimentSpec, serve: Serve, costs: Costs,
                      draft: Costs) -> tuple[Serve, Costs, dict[str, float]]:
    """The one-request pipeline of ``serve`` with speculative decoding: the op of its rounds (a token
    per round), the target stages' costs per round, and the round's figures (at its first round)."""
    sp = spec.inference.speculative
    assert sp is not None
    k, bpv, hid = sp.tokens, spec.model.bytes_per_value, spec.model.hidden_size
    contexts = round_contexts(serve.prompt_len, serve.output_len, k, sp.acceptance)
    target = costs.stages

    def verify(s: int, context: int) -> float:
        return _batches(target[s]).decode(k + 1) + _batches(target[s]).batch_attention(k + 1, context + k)

    def draft_round(context: int) -> float:
        steps = sum(_batches(d).decode(1) + _batches(d).attention(context + i)
                    for i in range(k) for d in draft.stages)
        inner = sum(d.handoff_decode for d in draft.stages[:-1])
        return steps + k * inner + (k - 1) * draft.stages[-1].handoff_decode

    back, ahead = wafer_handoff(spec, (k + 1) * bpv), wafer_handoff(spec, k * bpv)
    late = max(0.0, prefill_path(draft) - prefill_path(costs))  # the draft's prefill past the target's
    last = len(target) - 1
    stages = []
    for s, c in enumerate(target):
        rounds = tuple(verify(s, ctx) for ctx in contexts)
        if s < last:
            stages.append(replace(c, decode_cycles=rounds, handoff_decode=_batches(c).handoff((k + 1) * hid)))
            continue
        after = tuple(back + draft_round(ctx) + ahead for ctx in contexts[1:]) + (back,)
        first = wafer_handoff(spec, bpv) + late + draft_round(contexts[0]) + ahead
        stages.append(replace(c, decode_cycles=rounds, handoff_prefill=first, handoff_decode=back,
                              handoff_steps=after))
    figures = {"expected_tokens_per_verify": expected_tokens(k, sp.acceptance), "rounds": len(contexts),
               "draft_cycles_per_round": draft_round(contexts[0]),
               "verify_cycles_per_round": sum(verify(s, contexts[0]) for s in range(len(target))),
               "handoff_cycles_per_round": back + ahead + sum(
                   stages[s].handoff_decode for s in range(last)),
               "draft_prefill_cycles": prefill_path(draft), "draft_prefill_late_cycles": late}
    return replace(serve, output_len=len(contexts) + 1), replace(costs, stages=tuple(stages)), figures


class DraftCosts:
    """The draft's wafers as one station of the scheduler under continuous batching (docs/model.md §11.9):
    what an iteration of it costs, with the ``BatchCosts`` interface the executors ask.

    An iteration takes every request queued: prompt pieces (a request whose first token is out: its
    prompt prefilled on the draft's stages, one pass of them all, ``BatchCosts.iteration`` on each draft
    stage and the hand-offs between them), then a round for each request in it, those just prefilled and
    those whose last verify pass came back: K draft steps, each through every draft stage with b vectors
    at contexts c … c + K − 1 (c the longest request's: a prefilled one's is its prompt + 1), its stages'
    hand-offs between, and K − 1 from its last stage back to its first. The
    iteration's drafts go to the target's first stage over the wafers' links (``handoff``: K values a
    request, ``wafer_handoff``); the target's last stage sends back what it verified (``receive``)."""

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
        order: the pieces' one pass, then each draft step's, for the decodes and the pieces' requests."""
        last = len(self.stages) - 1
        if pieces:
            tokens = sum(p[0] for p in pieces)
            for s, st in enumerate(self.stages):
                yield st, 0, 0, pieces, tokens * self.hid if s < last else 0
            decodes += len(pieces)
            longest = max(longest, max(start + n for n, start, _ in pieces) + 1)
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
            if pieces > 1:  # every piece's request drafts a round: one request more each
                decodes += pieces - 1
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

    receive = handoff  # the target's verified tokens back to the draft: the same move the other way
    receive_counts = handoff_counts
