"""What a stage's iteration-level batches cost under continuous batching (docs/model.md §11.7): the cost
pass (``costing``) builds one ``BatchCosts`` per stage from its grid's kernels, and both executors ask it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...model.energy import EventCounts
from ...model.vocabulary import StageOpKind
from ..programs.program import Handoff, Kernel, StageWork

if TYPE_CHECKING:
    from ...config.inference import InferenceExperimentSpec
    from .moe_serving import Draw

__all__ = ["BatchCosts"]

_EXPERT_FFN = frozenset({"gate_up", "activation", "down"})
"""An MoE layer's prefill kernels that stand for its experts' work (§11.2's dense approximation)."""


def _part(op: Kernel, moe: Sequence[int] | None) -> int | None:
    """Which of (dispatch, experts, combine) ``op`` is, or None: a ``TRANSFER`` is the dispatch or the
    combine; an expert's kernel runs on its region (decode, ``moe`` None) or, in a prefill, is an MoE
    layer's FFN kernel (a composed kernel by the kernel it was built on)."""
    if op.kind == StageOpKind.TRANSFER:
        return 2 if op.name == "combine" else 0
    if moe is None:
        return 1 if op.region else None
    return 1 if op.layer in moe and op.name.split("+")[0].split("|")[0] in _EXPERT_FFN else None


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
    prompt of the run's ``prompt_len`` are the one-request pipeline's figures (§11.4) to the bit.
    ``counts`` and ``handoff_counts`` are the same work's events (FMACs, SRAM bytes, wavelet-hops, I/O
    bytes), for its energy."""

    def __init__(self, spec: InferenceExperimentSpec, work: StageWork, grid: Any, fixed: float,
                 attention_cycles: Callable[[int], float], prompt_len: int, whole_prompt: float,
                 move: Callable[[Handoff], tuple[float, EventCounts]],
                 move_prompt: Callable[[Handoff], tuple[float, EventCounts]] | None = None) -> None:
        self.spec, self.work, self.grid, self.whole_prompt = spec, work, grid, whole_prompt
        # a hand-off's cycles and events (``handoffs.handoff``: the one formula), after decode tokens
        # alone and after an iteration with prompt tokens (an asynchronous hand-off hides beside the
        # iteration's last kernel: the decode step's, or the prefill's)
        self.move, self.move_prompt = move, move_prompt or move
        self.layers = len(work.stage.layers)
        self.per_expert = (spec.model.top_k, spec.model.experts) if spec.model.experts else (1, 1)
        self._attention_cycles, self.prompt_len = attention_cycles, prompt_len
        self._decode: dict[int, float] = {1: fixed}
        self._attention: dict[int, float] = {}
        self._batch_attention: dict[tuple[int, int], float] = {}
        self._prefill: dict[tuple[int, int, bool], float] = {}
        self._mixed: dict[tuple[int, int, int, int, int], float] = {}
        self._last_draw: tuple[int, Any, Any] = (0, None, None)  # (batch, draw, figures) of the last draw
        self._expert_parts: dict[tuple[bool, int], tuple[float, float, float]] = {}
        self.moe_layers = [i for i in work.stage.layers if not spec.model.is_dense(i)]
        # the first layer's attention kernels (a decode batch's attention: theirs, every layer alike)
        first = work.stage.layers[0]
        self._first_attention = [op for op in work.decode if op.attention and op.layer == first]
        self._fixed: dict[int, tuple[float, float, float]] = {}  # sampled routing's (``_drawn``)
        self._region: dict[tuple[int, int], float] = {}  # (kind of layer, load) -> its expert kernels'
        kinds: dict[tuple[tuple[Any, ...], ...], int] = {}  # an MoE layer's expert kernels, by what they are
        self._region_ops: list[tuple[Kernel, ...]] = []
        self._region_kind: list[int] = []  # each MoE layer's, in order
        for layer in self.moe_layers:
            ops = tuple(op for op in work.decode if op.region and op.layer == layer)
            kind = kinds.setdefault(tuple((op.kind, op.name, op.dims, op.region) for op in ops), len(kinds))
            if kind == len(self._region_ops):
                self._region_ops.append(ops)
            self._region_kind.append(kind)
        self._handoff: dict[tuple[int, bool], tuple[float, EventCounts]] = {}
        self._kernels: dict[tuple, Any] = {}
        self._counts: dict[tuple[int, int, int, int, int, int], EventCounts] = {}
        # decode-only iterations by (decodes, longest, width): the executors' commonest question, answered
        # with one lookup (the cost is a pure function of the key: the stage's kernels at that batch and
        # context, the grid and width fixed)
        self._decoding: dict[tuple[int, int, int], float] = {}
        # (FMACs, wavelet-hops, issue cycles) of a batch's kernels, attention aside (``counts``)
        self._decode_folds: dict[int, tuple[float, float, float]] = {}
        # positions each decode token carries: K + 1 when a draft's tokens are verified (§11.9), its b
        # tokens then K + 1 vectors each, attending up to K positions past their context
        self.width = 1

    def decode(self, batch: int) -> float:
        """Cycles of the stage's kernels, attention aside, on ``batch`` decode tokens at once (the LM
        head's on the last stage)."""
        if batch not in self._decode:
            top_k, experts = self.per_expert
            self._decode[batch] = sum(
                self._kernel(op, 0, -(-batch * top_k // experts) if op.region else batch)
                for op in self.work.decode if not op.attention)
        return self._decode[batch]

    def decode_sampled(self, batch: int, loads: Draw) -> float:
        """``decode(batch)`` with each MoE layer's expert kernels at its busiest expert's tokens and its
        dispatch and combine moving each expert's drawn tokens (``loads``: sampled routing,
        ``moe_serving.BatchExperts``). Each draw is new, so nothing is kept but the last (``experts``
        asks for the same one next)."""
        return self._drawn(batch, loads)[0]

    def _drawn(self, batch: int, draw: Draw) -> tuple[float, tuple[float, float, float]]:
        """(``decode_sampled``, ``experts``) of ``batch`` decode tokens under ``draw``: the kernels that do
        not depend on the draw kept by batch, each MoE layer's expert kernels by the layer's kernels and
        load, the dispatch and combine once each through the fabric model (every MoE layer's alike)."""
        if self._last_draw[0] == batch and self._last_draw[1] is draw:
            return self._last_draw[2]
        fixed = self._fixed.get(batch)
        if fixed is None:  # (the rest, trips between grids aside; the dispatches' launches; the combines')
            sums = [0.0, 0.0, 0.0]
            for op in self.work.decode:
                if not op.attention and not op.region and op.kind != StageOpKind.GRID_TRIPS:
                    c = self._cost(op, 0, batch)
                    if op.kind == StageOpKind.TRANSFER:  # its launch; the fabric's part is the draw's
                        sums[2 if op.name == "combine" else 1] += c.cycles - c.communication
                    else:
                        sums[0] += c.cycles
            fixed = self._fixed[batch] = (sums[0], sums[1], sums[2])
        compute = 0.0
        for kind, load in zip(self._region_kind, draw.loads, strict=True):
            c = self._region.get((kind, load))
            if c is None:
                c = self._region[kind, load] = sum(self._kernel(op, 0, load) for op in self._region_ops[kind])
            compute += c
        moves = len(self.moe_layers)
        there = fixed[1] + moves * self.grid.experts.drawn(draw.counts, False)
        back = fixed[2] + moves * self.grid.experts.drawn(draw.counts, True)
        trips = sum(map(self._trips, draw.reach))  # to the further grids the tokens reach, and back
        out = (fixed[0] + trips + there + compute + back, (there, compute, back))
        self._last_draw = (batch, draw, out)
        return out

    def experts(self, decodes: int, pieces: Sequence[tuple[int, int, bool]] = (),
                loads: Draw | None = None) -> tuple[float, float, float]:
        """The cycles of an iteration (as ``iteration``'s arguments) spent on the stage's MoE layers'
        dispatch, experts and combine, each summed over those layers (0 on a dense stage): a decode
        batch's dispatch and combine kernels and its expert kernels on their regions (sampled: ``loads``'
        tokens); with prompt pieces, the one pass's dispatch and combine of its tokens and the MoE layers'
        FFN kernels (the dense approximation of a prefill's routed work, §11.2). For the trace."""
        if not self.moe_layers:
            return (0.0, 0.0, 0.0)
        if decodes and self.width > 1:  # as ``iteration``
            decodes = decodes * self.width
        if loads is not None and not pieces:
            return self._drawn(decodes, loads)[1]
        rows = decodes + sum(p[0] for p in pieces)
        key = (bool(pieces), rows)
        c = self._expert_parts.get(key)
        if c is None:
            parts = [0.0, 0.0, 0.0]
            if pieces:  # a pass of ``rows`` tokens: its kernels but attention's (alike at any context)
                for ops, n in self._runs(rows, rows):
                    for op in ops:
                        part = None if op.attention else _part(op, self.moe_layers)
                        if part is not None:
                            parts[part] += n * self._kernel(op, 0, 1)
            else:
                top_k, experts = self.per_expert
                for op in self.work.decode:
                    part = _part(op, None)
                    if part is not None and not op.attention:
                        parts[part] += self._kernel(op, 0, -(-rows * top_k // experts) if op.region else rows)
            c = self._expert_parts[key] = (parts[0], parts[1], parts[2])
        return c

    def _trips(self, reach: tuple[int, ...]) -> float:
        """A layer's trips to its further grids, grid g + 1 taking ``reach[g]`` tokens' hidden vectors and
        sending as many back, one grid after another (``moe_serving.grid_trips``)."""
        hid, trips = self.spec.model.hidden_size, self.grid.trips
        return float(sum(trips(n * hid)[g + 1] for g, n in enumerate(reach) if n))

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
            c = self._batch_attention[key] = self.layers * sum(
                self._kernel(op, context, batch) for op in self._first_attention)
        return c

    def prefill(self, tokens: int, start: int, ends: bool) -> float:
        """Cycles of ``tokens`` prompt tokens from token ``start`` on (attending to ``start + tokens``),
        ``ends``: the piece ends its prompt (the last stage's LM head then runs for its last token)."""
        key = (tokens, start, ends)
        if key not in self._prefill:
            if start == 0 and tokens == self.prompt_len and ends:  # the whole prompt of §11.4
                c = self.whole_prompt
            else:
                c = self._prefill_cycles(tokens, start + tokens, None)
                if ends:
                    c += sum(self._kernel(op, 0, 1) for op in self.work.lm_head)
            self._prefill[key] = c
        return self._prefill[key]

    def iteration(self, decodes: int, longest: int, pieces: list[tuple[int, int, bool]],
                  loads: Draw | None = None) -> float:
        """Cycles of one iteration: ``decodes`` decode tokens, the longest at context ``longest`` (one
        request's: its context), and prompt pieces (tokens, start, ends its prompt). Decode tokens alone
        are a batch of GEMVs (with sampled routing, ``loads``: ``BatchExperts.loads``, each MoE layer's
        busiest expert's tokens and further grids' tokens); one piece alone is its prefill; anything
        more is one pass (``mixed``)."""
        if not pieces and loads is None:
            key = (decodes, longest, self.width)
            c = self._decoding.get(key)
            if c is None:
                c = self._decoding[key] = self._iteration(decodes, longest, pieces, None)
            return c
        return self._iteration(decodes, longest, pieces, loads)

    def _iteration(self, decodes: int, longest: int, pieces: list[tuple[int, int, bool]],
                   loads: Draw | None) -> float:
        if decodes and self.width > 1:  # verify passes: K + 1 vectors each, the last K past the context
            decodes, longest = decodes * self.width, longest + self.width - 1
        if not pieces:
            if not decodes:
                return 0.0
            kernels = self.decode(decodes) if loads is None else self.decode_sampled(decodes, loads)
            attention = self.attention(longest) if decodes == 1 else self.batch_attention(decodes, longest)
            return kernels + attention
        if len(pieces) == 1 and not decodes:
            return self.prefill(*pieces[0])
        tokens = sum(p[0] for p in pieces)
        context = max(start + n for n, start, _ in pieces)
        ends = sum(1 for p in pieces if p[2])
        return self.mixed(tokens, context, ends, decodes, longest if decodes else 0)

    def mixed(self, tokens: int, context: int, ends: int, decodes: int, longest: int) -> float:
        """Cycles of one pass over ``tokens`` prompt tokens of several pieces, ``ends`` of which end their
        prompts, and ``decodes`` decode tokens (the longest at context ``longest``), as production servers
        pack them (vLLM's token budget, Sarathi-Serve's stall-free batches; docs/model.md §11.7):

        * every kernel but attention's once, on tokens + decodes rows: the prompt GEMMs' M is the
          iteration's, a decode token one more row of them;
        * the prompts' attention as one prefill's of ``tokens`` queries against ``context`` keys, the
          longest piece's reach: each piece's keys are spread over the grid as its own, so a PE does its
          share of every piece's scores at most at the longest's (as a decode batch's attention, above);
        * the decode tokens' attention as a decode batch's;
        * on the last stage the LM head once, a GEMV of one vector per decode and per prompt ending."""
        key = (tokens, context, ends, decodes, longest)
        c = self._mixed.get(key)
        if c is None:
            c = self._prefill_cycles(tokens + decodes, context, False)
            c += self._prefill_cycles(tokens, context, True)
            if decodes:
                c += self.attention(longest) if decodes == 1 else self.batch_attention(decodes, longest)
            if decodes + ends:
                c += sum(self._kernel(op, 0, decodes + ends) for op in self.work.lm_head)
            self._mixed[key] = c
        return c

    def _runs(self, tokens: int, context: int) -> tuple[tuple[tuple[Kernel, ...], int], ...]:
        """A piece's prefill kernels as runs (one layer's kernels, the layers in a row like it), in layer
        order (``StageWork.prefill_runs``; without it, every kernel once)."""
        runs = self.work.prefill_runs
        return runs(tokens, context) if runs is not None else ((self.work.prefill_of(tokens, context), 1),)

    def _prefill_cycles(self, tokens: int, context: int, attention: bool | None) -> float:
        """The cycles of a piece's prefill kernels (``attention``: only attention's, or only the others;
        None: all) summed kernel by kernel in layer order, as over ``prefill_of``: one layer's looked up,
        its figures repeated for the layers like it (the same numbers added in the same order)."""
        seq: list[float] = []
        for ops, n in self._runs(tokens, context):
            seq += [self._kernel(op, 0, 1) for op in ops
                    if attention is None or op.attention == attention] * n
        return sum(seq)

    def swap(self, nbytes: float) -> float:
        """Cycles to move ``nbytes`` of a preempted request's KV cache between the stage's wafer and
        MemoryX over the system's I/O (``io.bandwidth``, one direction), out or back in."""
        return nbytes / self.spec.hardware.io_bytes_per_cycle

    def handoff(self, values: int, prompt: bool = False) -> float:
        """Cycles to hand ``values`` (activations, or tokens from the last stage) to the next stage after
        an iteration (``prompt``: one that carried prompt tokens)."""
        moved = self._handoff.get((values, prompt))
        return (moved if moved is not None else self._moved(values, prompt))[0]

    def handoff_counts(self, values: int) -> EventCounts:
        """The events of handing ``values`` to the next stage."""
        return self._moved(values, False)[1]

    def _moved(self, values: int, prompt: bool) -> tuple[float, EventCounts]:
        key = (values, prompt)
        if key not in self._handoff:
            h = self.work.handoff_decode
            self._handoff[key] = (self.move_prompt if prompt else self.move)(
                Handoff(h.source, h.target, values)) if values else (0.0, EventCounts())
        return self._handoff[key]

    def counts(self, decodes: int, longest: int, pieces: int, tokens: int, reach: int,
               ends: int) -> EventCounts:
        """The events of an iteration of ``decodes`` decode tokens (the longest at context ``longest``) and
        ``pieces`` prompt pieces of ``tokens`` tokens in all, reaching context ``reach`` at most, ``ends``
        of them ending their prompts: the kernels ``iteration`` times, each with its batch."""
        if decodes and self.width > 1:  # as ``iteration``
            decodes, longest = decodes * self.width, longest + self.width - 1
        key = (decodes, longest, pieces, tokens, reach, ends)
        c = self._counts.get(key)
        if c is None:
            if pieces:
                fmacs, hops, issue = self._fold((0.0, 0.0, 0.0), self._items(*key))
            else:  # decodes alone: the batch's kernels' sums (kept per batch), then its attention's
                fold = self._decode_folds.get(decodes)
                if fold is None:
                    fold = self._fold((0.0, 0.0, 0.0), [(self._decode_items(decodes), 1)])
                    self._decode_folds[decodes] = fold
                fmacs, hops, issue = self._fold(fold, [(self._attention_items(decodes, longest), 1)])
            # the instruction streams' cycles on every PE of the grid (as ``costing._Grid.counts``)
            c = self._counts[key] = EventCounts.of_fmacs(
                fmacs, self.grid.dtype, wavelet_hops=hops,
                instruction_cycles=issue * self.grid.rows * self.grid.cols)
        return c

    def _decode_items(self, decodes: int) -> list[tuple[Kernel, int, int, int]]:
        """(kernel, context, batch, times) of ``decodes`` decode tokens' kernels, attention aside."""
        top_k, experts = self.per_expert
        return [(op, 0, -(-decodes * top_k // experts) if op.region else decodes, 1)
                for op in self.work.decode if not op.attention]

    def _attention_items(self, decodes: int, longest: int) -> list[tuple[Kernel, int, int, int]]:
        """(kernel, context, batch, times) of ``decodes`` decode tokens' attention, the longest at
        ``longest``."""
        return [(op, longest, decodes, self.layers) for op in self._first_attention] if decodes else []

    def _items(self, decodes: int, longest: int, pieces: int, tokens: int, reach: int,
               ends: int) -> list[tuple[Kernel, int, int, int]]:
        """(kernel, context, batch, times) of an iteration, as ``iteration`` and its helpers cost them."""
        attention = [(self._attention_items(decodes, longest), 1)]
        if not pieces:
            return [(self._decode_items(decodes), 1), *attention]
        head = [([(op, 0, decodes + ends, 1) for op in self.work.lm_head] if decodes + ends else [], 1)]
        if pieces == 1 and not decodes:
            return self._piece_items(tokens, reach, None) + head
        return (self._piece_items(tokens + decodes, reach, False) + self._piece_items(tokens, reach, True)
                + attention + head)

    def _piece_items(self, tokens: int, reach: int,
                     attention: bool | None) -> list[tuple[list[tuple[Kernel, int, int, int]], int]]:
        """A piece's prefill kernels (as ``_prefill_cycles`` picks them) as (items, times in a row)."""
        return [([(op, 0, 1, 1) for op in ops if attention is None or op.attention == attention], n)
                for ops, n in self._runs(tokens, reach)]

    def _fold(self, start: tuple[float, float, float],
              segments: list[tuple[list[tuple[Kernel, int, int, int]], int]]) -> tuple[float, float, float]:
        """``start``'s FMACs, wavelet-hops and issue cycles with those of each segment's items (each segment
        ``n`` times in a row) added in order: a sum carried on from a kept prefix, or over a repeated
        segment's figures, is the whole list's, to the bit."""
        fmacs, hops, issue = start
        for items, n in segments:
            figures = []
            for op, context, batch, times in items:
                c = self._cost(op, context, batch)
                figures.append((times * c.fmacs, times * c.wavelet_hops, times * c.overhead))
            for _ in range(n):
                for f, h, i in figures:
                    fmacs += f
                    hops += h
                    issue += i
        return fmacs, hops, issue

    def _kernel(self, op: Kernel, context: int, batch: int) -> float:
        return self._cost(op, context, batch).cycles

    def _cost(self, op: Kernel, context: int, batch: int) -> Any:
        """``op`` at decode ``context`` (0: a prefill's, or a kernel whose sizes do not grow with it) with
        ``batch`` vectors; kept by what it is (a composed kernel's name says what it carries)."""
        key = (op.kind, op.name, op.at(context), op.region, batch)
        c = self._kernels.get(key)
        if c is None:
            c = self._kernels[key] = self.grid.on(op.region).cost(op, context, batch)
        return c
