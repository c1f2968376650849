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
from ..model.speculative import expected_tokens, round_contexts
from .batch_costs import BatchCosts
from .costing import Costs, StageCosts, wafer_handoff
from .program import Serve

__all__ = ["prefill_path", "speculative_costs"]


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
