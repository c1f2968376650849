"""What a stage's iteration-level batches cost under continuous batching (docs/model.md §11.7): the cost
pass (``costing``) builds one ``BatchCosts`` per stage from its grid's kernels, and both executors ask it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config.inference import InferenceExperimentSpec
from .program import Handoff, Kernel, StageWork

__all__ = ["BatchCosts"]


class BatchCosts:
    """What one stage's iteration-level batches cost (docs/model.md §11.7), each figure computed the
    first time an executor asks and kept: both executors ask the same object, so they cannot disagree.

    An iteration of b decode tokens at contexts c₁ … c_b costs ``decode(b) + attention(b, max cᵢ)``:
    the layers' kernels with b vectors (``costing._Grid.cost``'s ``batch``; an MoE layer's experts each see
    ⌈b·top_k / experts⌉ of them, the mean load of a batch spread evenly), and the attention kernels
    with b vectors too, each against its own request's cache: every request's cache is spread over the
    same grid the same way, so each PE does its share of every request's scores and context and each row
    reduces them all in one allreduce — the same hops, b times the FMACs and wavelets — at the batch's
    longest context (for the shorter ones a PE's share is at most that). A piece of a prompt
    (``prefill``) costs its layers' prefill kernels at its length and context, and the LM head once
    on the last stage when the piece ends its prompt; ``handoff`` moves an iteration's values to the
    next stage (``move``, the cost pass's hand-off). At one request, ``decode(1) + attention(c)`` and a whole
    prompt of the run's ``prompt_len`` are the one-request pipeline's figures (§11.4) to the bit."""

    def __init__(self, spec: InferenceExperimentSpec, work: StageWork, grid: Any, fixed: float,
                 attention_cycles: Callable[[int], float], prompt_len: int, whole_prompt: float,
                 move: Callable[[Handoff], float]) -> None:
        self.spec, self.work, self.grid, self.whole_prompt = spec, work, grid, whole_prompt
        self.move = move  # a hand-off's cycles (``costing._handoff``: the one formula)
        self.layers = len(work.stage.layers)
        self.per_expert = (spec.model.top_k, spec.model.experts) if spec.model.experts else (1, 1)
        self._attention_cycles, self.prompt_len = attention_cycles, prompt_len
        self._decode: dict[int, float] = {1: fixed}
        self._attention: dict[int, float] = {}
        self._batch_attention: dict[tuple[int, int], float] = {}
        self._prefill: dict[tuple[int, int, bool], float] = {}
        self._handoff: dict[int, float] = {}
        self._kernels: dict[tuple, float] = {}

    def decode(self, batch: int) -> float:
        """Cycles of the stage's kernels, attention aside, on ``batch`` decode tokens at once (the LM
        head's on the last stage)."""
        if batch not in self._decode:
            top_k, experts = self.per_expert
            self._decode[batch] = sum(
                self._kernel(op, op.dims, -(-batch * top_k // experts) if op.region else batch)
                for op in self.work.decode if not op.attention)
        return self._decode[batch]

    def attention(self, context: int) -> float:
        """Cycles of one request's attention, every layer of the stage, at ``context`` tokens cached."""
        c = self._attention.get(context)
        if c is None:
            c = self._attention[context] = self.layers * self._attention_cycles(context)
        return c

    def batch_attention(self, batch: int, context: int) -> float:
        """Cycles of ``batch`` requests' attention at once, every layer of the stage, at ``context``."""
        key = (batch, context)
        c = self._batch_attention.get(key)
        if c is None:
            first = self.work.stage.layers[0]
            c = self._batch_attention[key] = self.layers * sum(
                self._kernel(op, op.at(context), batch) for op in self.work.decode
                if op.attention and op.layer == first)
        return c

    def prefill(self, tokens: int, start: int, ends: bool) -> float:
        """Cycles of ``tokens`` prompt tokens from token ``start`` on (attending to ``start + tokens``),
        ``ends``: the piece ends its prompt (the last stage's LM head then runs for its last token)."""
        key = (tokens, start, ends)
        if key not in self._prefill:
            if start == 0 and tokens == self.prompt_len and ends:  # the whole prompt of §11.4
                c = self.whole_prompt
            else:
                c = sum(self._kernel(op, op.dims, 1) for op in self.work.prefill_of(tokens, start + tokens))
                if ends:
                    c += sum(self._kernel(op, op.dims, 1) for op in self.work.lm_head)
            self._prefill[key] = c
        return self._prefill[key]

    def iteration(self, decodes: int, longest: int, pieces: list[tuple[int, int, bool]]) -> float:
        """Cycles of one iteration: ``decodes`` decode tokens, the longest at context ``longest`` (one
        request's: its context), and prompt pieces (tokens, start, ends its prompt)."""
        cycles = 0.0
        if decodes:
            cycles = self.decode(decodes)
            cycles += self.attention(longest) if decodes == 1 else self.batch_attention(decodes, longest)
        for tokens, start, ends in pieces:
            cycles += self.prefill(tokens, start, ends)
        return cycles

    def handoff(self, values: int) -> float:
        """Cycles to hand ``values`` (activations, or tokens from the last stage) to the next stage."""
        if values not in self._handoff:
            h = self.work.handoff_decode
            self._handoff[values] = self.move(Handoff(h.source, h.target, values)) if values else 0.0
        return self._handoff[values]

    def _kernel(self, op: Kernel, dims: tuple, batch: int) -> float:
        key = (op.kind, dims, op.region, batch)
        c = self._kernels.get(key)
        if c is None:
            c = self._kernels[key] = self.grid.on(op.region).cost(op, dims, batch).cycles
        return c
