"""The cost pass: a program's ops, written as shapes by a builder, turned into cycles once, before an
executor runs them (docs/architecture.md). Both executors read the same ``Costs``, so they cannot
disagree on what an op costs; only on when it runs.

What an op of arithmetic costs is the compute model's (``COMPUTE_MODELS``, the ``simulation.compute``
key), one table for the training step and serving alike:

* ``constant`` — an op's FLOPs over the PEs at the global ``gemm_efficiency``, its weights fed through
  each PE row (``model.costs``, docs/model.md §4);
* ``kernel`` — an op's GEMMs simulated on the PEs that run it (``kernels.step``, docs/model.md §4.1:
  the weight-streaming GEMM of §10.7):
  the whole wafer, or an expert's region. Serving's kernels (GEMV, GEMM, the collectives) are always
  simulated, since they are what it runs (``kernels.cost.kernel_cost``, the kernel layer's one cached
  front door): serving reads the ``kernel`` entry.

The ``in_place`` MoE mapping keeps its lane model under either: an in-place op is every expert's copies
side by side in SIMD lanes, paced by the column holding the most copies of one expert — not a GEMM of a
shape of its own that the kernel layer could simulate (``experiments.mappings``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from copy import copy
from dataclasses import dataclass, field
from functools import cached_property
from math import ceil

import numpy as np

from ..config.inference import InferenceExperimentSpec
from ..config.specs import HardwareSpec
from ..kernels.cost import KernelCost, kernel_cost, lanes_dtype
from ..kernels.lines import rotating_reduces
from ..kernels.machine import Machine
from ..kernels.step import kernel_op_cost, kernel_region_expert_costs
from ..model.costs import ExpertCosts, OpCost, op_cost, region_expert_costs
from ..model.optimizer import optimizer_step_cycles
from ..model.shapes import LayerShapes
from ..model.vocabulary import Pass, StageOpKind
from .builders.training import training_program
from .plan import StepPlan
from .program import Handoff, Kernel, Op, Program, Serve, ServeBatches, StageWork, WaferOp

__all__ = ["COMPUTE_MODELS", "BatchCosts", "ComputeModel", "Costs", "StageCosts", "cost_program",
           "cost_serving", "wafer_handoff", "with_defaults"]


@dataclass(frozen=True)
class ComputeModel:
    """One compute model: ``wafer(hw, rows, cols, op, bytes_per_value)`` a whole-wafer op's cost;
    ``region_experts(hw, shapes, tokens, rows, cols)`` every expert op's cycles on its region (the
    ``regions`` mapping), for the routed ``tokens[layer, expert]``."""

    description: str
    wafer: Callable[[HardwareSpec, int, int, WaferOp, int], OpCost]
    region_experts: Callable[[HardwareSpec, LayerShapes, np.ndarray, np.ndarray, np.ndarray], ExpertCosts]


def _constant_wafer(hw: HardwareSpec, rows: int, cols: int, op: WaferOp, bytes_per_value: int) -> OpCost:
    return op_cost(hw, rows, cols, op.flops, op.weight_bytes)


def _kernel_wafer(hw: HardwareSpec, rows: int, cols: int, op: WaferOp, bytes_per_value: int) -> OpCost:
    """An op's GEMMs simulated on the wafer; a copy has no GEMM and keeps the constant model."""
    if not op.matmuls:
        return _constant_wafer(hw, rows, cols, op, bytes_per_value)
    return kernel_op_cost(hw, rows, cols, op.kind, op.pass_ == Pass.BWD, op.matmuls, op.flops,
                          op.weight_bytes, bytes_per_value)


COMPUTE_MODELS: dict[str, ComputeModel] = {
    "constant": ComputeModel("FLOPs at the global gemm_efficiency (docs/model.md §4)", _constant_wafer,
                             region_expert_costs),
    "kernel": ComputeModel("each op's GEMMs simulated on its PEs (docs/model.md §4.1)", _kernel_wafer,
                           kernel_region_expert_costs),
}
"""Compute models by name (the ``simulation.compute`` key)."""


@dataclass(frozen=True)
class StageCosts:
    """One stage's costs: every prefill kernel's and every decode kernel's (at the run's longest
    context), the decode step's cycles at every context the run reaches (index t − 1 for the t-th
    output token), and the hand-offs after a prefill and after a decode step."""

    prefill: tuple[KernelCost, ...]
    decode: tuple[KernelCost, ...]
    decode_cycles: tuple[float, ...]
    handoff_prefill: float
    handoff_decode: float
    batches: BatchCosts | None = field(default=None, compare=False)  # under continuous batching
    # the hand-off after each decode step when they differ (speculative decoding's last stage: the
    # draft's work between verify passes, docs/model.md §11.8); empty: ``handoff_decode`` after each
    handoff_steps: tuple[float, ...] = ()
    # cycles of a request's first token spent on other wafers before this stage (split prefill, §11.9)
    elsewhere: float = 0.0

    @property
    def prefill_cycles(self) -> float:
        return sum(c.cycles for c in self.prefill)

    def service(self, token: int) -> float:
        """Cycles the stage works on a request's ``token`` (0: the prefill)."""
        return self.prefill_cycles + self.elsewhere if token == 0 else self.decode_cycles[token - 1]

    def handoff(self, token: int) -> float:
        if token == 0:
            return self.handoff_prefill
        return self.handoff_steps[token - 1] if self.handoff_steps else self.handoff_decode

    def split(self, token: int) -> dict[str, float]:
        """Shares of the stage's work on ``token`` (0: the prefill; a decode step: its kernels at the
        run's longest context): ``split_costs`` of its kernels over their cycles."""
        return self._splits[token != 0]

    @cached_property
    def _splits(self) -> tuple[dict[str, float], dict[str, float]]:
        def shares(costs: tuple[KernelCost, ...]) -> dict[str, float]:
            part = split_costs(costs)
            total = sum(part.values()) or 1.0
            return {k: round(v / total, 6) for k, v in part.items()}

        return shares(self.prefill), shares(self.decode)


def split_costs(costs: Iterable[KernelCost]) -> dict[str, float]:
    """Kernels' cycles by what they are: instruction issue and kernel launches (``overhead``),
    arithmetic (the rest of the PE's work, waiting on a neighbour included), wavelets on the fabric."""
    issue = compute = comm = 0.0
    for c in costs:
        issue += c.overhead
        comm += c.communication
        compute += c.cycles - c.communication - c.overhead
    return {"instructions": issue, "compute": compute, "communication": comm}


@dataclass
class Costs:
    """What a program's ops cost: each whole-wafer op's (keyed by the op), MemoryX's optimizer step,
    each serving stage's, and the kernels that do not fit (``problems``, once each)."""

    wafer: dict[Op, OpCost] = field(default_factory=dict)
    optimizer_cycles: float = 0.0
    stages: tuple[StageCosts, ...] = ()
    problems: tuple[str, ...] = ()


def with_defaults(plan: StepPlan | None, program: Program | None,
                  costs: Costs | None) -> tuple[Program, Costs]:
    """What an executor runs when it is given only part of it: by default the training step of
    ``plan`` (``builders.training``), costed by this pass."""
    if program is None:
        assert plan is not None, "without a program, the step's plan"
        program = training_program(plan)
    if costs is None:
        assert plan is not None, "a program without costs is costed from the step's plan"
        costs = cost_program(program, plan)
    return program, costs


def cost_program(program: Program, plan: StepPlan) -> Costs:
    """A training program's costs under ``plan.compute`` (the experts' are the plan's, costed by the MoE
    mapping through the same table)."""
    model = COMPUTE_MODELS[plan.compute]
    rows, cols = plan.attention_shape
    bytes_per_value = plan.model.bytes_per_value
    costs = Costs(optimizer_cycles=optimizer_step_cycles(plan.hw, plan.model))
    for op in program.distinct():
        if isinstance(op, WaferOp):
            costs.wafer[op] = model.wafer(plan.hw, rows, cols, op, bytes_per_value)
    return costs


class _Grid:
    """A stage's grid (or an expert's region of it): its kernels' costs, and the problems met."""

    def __init__(self, spec: InferenceExperimentSpec, rows: int, cols: int, problems: list[str]) -> None:
        inf = spec.inference
        self.hw, self.rows, self.cols, self.problems = spec.hardware, rows, cols, problems
        self.dtype = lanes_dtype(spec.model.bytes_per_value)
        self.machine = Machine.of(self.hw, self.dtype)
        self.algorithm = {StageOpKind.GEMV: inf.gemv, StageOpKind.GEMM: inf.gemm,
                          StageOpKind.ALLREDUCE: inf.allreduce}

    def on(self, region: tuple[int, int] | None) -> _Grid:
        """The same kernels on ``region`` (an expert's rectangle of this grid; its problems are this
        grid's list)."""
        if region is None:
            return self
        sub = copy(self)
        sub.rows, sub.cols = region
        return sub

    def cost(self, op: Kernel, dims: tuple[int, ...], batch: int = 1) -> KernelCost:
        """The kernel's cost on this grid and its launch (``runtime.kernel_launch``: the call that starts
        it, its descriptors' set-up, the checks between one kernel of the stage's program and the next).
        ``batch``: the decode tokens it serves at once (a GEMV of that many vectors, that many times the
        values of any other kernel: the same hops, ``batch`` times the FMACs and wavelets)."""
        c, launch = self._kernel(op, dims, batch), self.hw.runtime.kernel_launch_cycles
        return KernelCost(c.cycles + launch, c.compute, c.communication, c.feasible, c.reason,
                          c.overhead + launch)

    def _kernel(self, op: Kernel, dims: tuple[int, ...], batch: int = 1) -> KernelCost:
        kind, m = op.kind, self.machine
        if batch > 1 and kind != StageOpKind.GEMV:  # b tokens' values through the same kernel
            dims = (dims[0] * batch, *dims[1:])
        if kind in (StageOpKind.GEMV, StageOpKind.GEMM):
            shape = (batch, *dims) if kind == StageOpKind.GEMV else dims
            c = kernel_cost(self.hw, kind, self.rows, self.cols, dtype=self.dtype,
                            algorithm=self.algorithm[kind], shape=shape)
            if not c.feasible and c.reason not in self.problems:
                self.problems.append(c.reason)
            return c
        # every row of PEs reduces its values to all its PEs, rows in parallel
        if kind == StageOpKind.ALLREDUCE:
            wavelets = m.wavelets(max(dims[0], 1))
            if self.cols < 2:
                return KernelCost(0.0, 0.0, 0.0)
            return kernel_cost(self.hw, kind, 1, self.cols, dtype=self.dtype, algorithm=self.algorithm[kind],
                               wavelets=wavelets)
        if kind == StageOpKind.ROW_REDUCES:  # (values per PE per step): one reduce per step of Q·Kᵀ
            network, issue = rotating_reduces(m, self.cols, m.wavelets(max(dims[0], 1)))
            return KernelCost(network + issue, 0.0, network, overhead=issue)
        if kind == StageOpKind.ELEMENTWISE:  # one vector instruction per op over each PE's share of values
            values, ops = dims
            compute, issue = m.instructions(ops, ceil(values / (self.rows * self.cols)))
            return KernelCost(compute + issue, compute, 0.0, overhead=issue)
        values, hops = dims  # TRANSFER: values spread over the rows, moved ``hops`` along them in parallel
        return self.transfer(values, hops)

    def transfer(self, values: float, hops: int) -> KernelCost:
        cycles = float(self.machine.transfer(self.machine.wavelets(ceil(values / self.rows)), max(hops, 1)))
        return KernelCost(cycles, 0.0, cycles)


def _handoff(spec: InferenceExperimentSpec, grid: _Grid, h: Handoff) -> float:
    """Cycles to move a hand-off's values from its stage's grid to the next: over the fabric on one
    wafer, over the wafers' I/O links and one interconnect node between wafers."""
    a, b = h.source, h.target
    if a.wafer == b.wafer:
        hops = abs(a.origin[0] - b.origin[0]) + abs(a.origin[1] - b.origin[1])
        return grid.transfer(h.values, hops).cycles if a.index != b.index else 0.0
    return wafer_handoff(spec, h.values * spec.model.bytes_per_value)


def wafer_handoff(spec: InferenceExperimentSpec, nbytes: float) -> float:
    """Cycles to move ``nbytes`` from one wafer to another: through the system's I/O link at
    ``io.bandwidth`` (``io_bytes_per_cycle``), then one node of ``inference.interconnect`` (its
    latency): nbytes / io_bytes_per_cycle + latency_s · clock."""
    hw, ic = spec.hardware, spec.inference.interconnect
    latency = ic.latency_s * hw.clock_hz if ic is not None else 0.0
    return nbytes / hw.io_bytes_per_cycle + latency


def _stage(spec: InferenceExperimentSpec, serve: Serve | ServeBatches, work: StageWork,
           problems: list[str], with_batches: bool = False) -> StageCosts:
    grid = _Grid(spec, work.stage.rows, work.stage.cols, problems)
    prefill = tuple(grid.on(op.region).cost(op, op.at(0)) for op in work.prefill)
    batched = isinstance(serve, ServeBatches)
    if batched:  # the one-request figures at the spec's lengths (its mapping's); its requests' vary
        serve = Serve(serve.stages, 1, spec.inference.prompt_len, spec.inference.output_len)
    longest = serve.prompt_len + max(serve.output_len - 1, 1)  # the last decode step's context
    decode = tuple(grid.on(op.region).cost(op, op.at(longest)) for op in work.decode)
    first = work.stage.layers[0]
    attention = [op for op in work.decode if op.attention and op.layer == first]
    layers = len(work.stage.layers)

    def attention_cycles(context: int) -> float:
        return sum(grid.on(op.region).cost(op, op.at(context)).cycles for op in attention)

    fixed = sum(c.cycles for c in decode) - layers * attention_cycles(longest)
    per_token = tuple(fixed + layers * attention_cycles(context)
                      for context in range(serve.prompt_len + 1, serve.prompt_len + serve.output_len))
    batches = None
    if batched or with_batches:
        batches = BatchCosts(spec, work, grid, fixed, attention_cycles, serve.prompt_len,
                             sum(c.cycles for c in prefill))
    return StageCosts(prefill, decode, per_token, _handoff(spec, grid, work.handoff_prefill),
                      _handoff(spec, grid, work.handoff_decode), batches=batches)


def cost_serving(program: Program, spec: InferenceExperimentSpec, batches: bool = False) -> Costs:
    """A serving program's costs: every stage's kernels simulated on its grid (the ``kernel`` model);
    ``batches``: each stage's ``BatchCosts`` too under one-request serving (a verify pass's K + 1
    vectors, a draft's step at any context)."""
    stages, problems = [], []
    for op in program.distinct():
        if isinstance(op, Serve | ServeBatches):
            for work in op.stages:
                mine: list[str] = []
                stages.append(_stage(spec, op, work, mine, batches))
                problems += [p for p in mine if p not in problems]
    return Costs(stages=tuple(stages), problems=tuple(problems))


class BatchCosts:
    """What one stage's iteration-level batches cost (docs/model.md §11.7), each figure computed the
    first time an executor asks and kept: both executors ask the same object, so they cannot disagree.

    An iteration of b decode tokens at contexts c₁ … c_b costs ``decode(b) + attention(b, max cᵢ)``:
    the layers' kernels with b vectors (``_Grid.cost``'s ``batch``; an MoE layer's experts each see
    ⌈b·top_k / experts⌉ of them, the mean load of a batch spread evenly), and the attention kernels
    with b vectors too, each against its own request's cache: every request's cache is spread over the
    same grid the same way, so each PE does its share of every request's scores and context and each row
    reduces them all in one allreduce — the same hops, b times the FMACs and wavelets — at the batch's
    longest context (for the shorter ones a PE's share is at most that). A piece of a prompt
    (``prefill``) costs its layers' prefill kernels at its length and context, and the LM head once
    on the last stage when the piece ends its prompt; ``handoff`` moves an iteration's values to the
    next stage. At one request, ``decode(1) + attention(c)`` and a whole
    prompt of the run's ``prompt_len`` are the one-request pipeline's figures (§11.4) to the bit."""

    def __init__(self, spec: InferenceExperimentSpec, work: StageWork, grid: _Grid, fixed: float,
                 attention_cycles: Callable[[int], float], prompt_len: int, whole_prompt: float) -> None:
        self.spec, self.work, self.grid, self.whole_prompt = spec, work, grid, whole_prompt
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
            self._handoff[values] = _handoff(self.spec, self.grid, Handoff(h.source, h.target, values)) \
                if values else 0.0
        return self._handoff[values]

    def _kernel(self, op: Kernel, dims: tuple, batch: int) -> float:
        key = (op.kind, dims, op.region, batch)
        c = self._kernels.get(key)
        if c is None:
            c = self._kernels[key] = self.grid.on(op.region).cost(op, dims, batch).cycles
        return c
