"""The cost pass: a program's ops, written as shapes by a builder, turned into cycles once, before an
executor runs them (docs/architecture.md). Both executors read the same ``Costs``, so they cannot
disagree on what an op costs; only on when it runs.

What an op of arithmetic costs is the compute model's (``COMPUTE_MODELS``, the ``simulation.compute``
key), one table for the training step and serving alike:

* ``constant`` — an op's FLOPs over the PEs at the global ``gemm_efficiency``, its weights fed through
  each PE row (``model.costs``, docs/model.md §4);
* ``kernel`` — an op's GEMMs simulated on the PEs that run it (``kernels.step``, docs/model.md §4.1:
  the weight-streaming GEMM of §10.7): the whole wafer, or an expert's region. Serving's kernels (GEMV,
  GEMM, the collectives) are always simulated, since they are what it runs (``kernels.cost.kernel_cost``,
  the kernel layer's one cached front door): serving reads the ``kernel`` entry.

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
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config.specs import HardwareSpec
from ..kernels.cost import KernelCost, kernel_cost, lanes_dtype, whole_blocks
from ..kernels.lines import rotating_reduces
from ..kernels.machine import Machine
from ..kernels.step import kernel_op_cost, kernel_region_expert_costs
from ..model.costs import ExpertCosts, OpCost, op_cost, region_expert_costs
from ..model.energy import EventCounts
from ..model.optimizer import optimizer_step_cycles
from ..model.shapes import LayerShapes
from ..model.vocabulary import Pass, StageOpKind
from .builders.training import training_program
from .handoffs import handoff, move, wafer_handoff
from .plan import StepPlan
from .program import Kernel, Op, Program, Serve, ServeBatches, StageWork, WaferOp
from .software import production_cost

if TYPE_CHECKING:  # serving's own modules are imported where a serving run needs them, not by a training step
    from ..config.inference import InferenceExperimentSpec
    from .batch_costs import BatchCosts
    from .moe_serving import ExpertTrips

__all__ = ["COMPUTE_MODELS", "ComputeModel", "Costs", "StageCosts", "cost_program",
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
    output token), and the hand-offs after a prefill and after a decode step. ``*_counts``: the events
    of the same work (FMACs, SRAM bytes, wavelet-hops, I/O bytes), for its energy."""

    prefill: tuple[KernelCost, ...]
    decode: tuple[KernelCost, ...]
    decode_cycles: tuple[float, ...]
    handoff_prefill: float
    handoff_decode: float
    batches: BatchCosts | None = field(default=None, compare=False)  # under continuous batching
    prefill_counts: EventCounts = EventCounts()
    decode_counts: tuple[EventCounts, ...] = ()  # index t − 1 for the t-th output token, as decode_cycles
    handoff_counts: tuple[EventCounts, EventCounts] = (EventCounts(), EventCounts())  # prefill, decode
    experts: ExpertTrips | None = field(default=None, compare=False)  # sampled routing's per-token trips

    @property
    def prefill_cycles(self) -> float:
        return sum(c.cycles for c in self.prefill)

    def service(self, token: int, request: int = 0) -> float:
        """Cycles the stage works on a request's ``token`` (0: the prefill); with sampled routing, a decode
        token's trips to the further grids its experts are on (``ExpertTrips``) added."""
        if token == 0:
            return self.prefill_cycles
        if self.experts is None:
            return self.decode_cycles[token - 1]
        return self.decode_cycles[token - 1] + float(self.experts.extra[request, token - 1])

    def handoff(self, token: int) -> float:
        return self.handoff_prefill if token == 0 else self.handoff_decode

    def counts(self, token: int) -> EventCounts:
        """The events of the stage's work on a request's ``token`` (0: the prefill) and its hand-off."""
        work = self.prefill_counts if token == 0 else self.decode_counts[token - 1]
        return work + self.handoff_counts[token != 0]

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
    draft: Any = None  # continuous batching with a draft: its station's costs (``speculative.DraftCosts``)
    pool: tuple[Any, ...] = ()  # split prefill under continuous batching: the prefill stages' costs

    def stations(self) -> list[Any]:
        """What the scheduler's stations cost: each stage's ``BatchCosts``, then the prefill pool's or
        the draft's."""
        out: list[Any] = [c.batches for c in self.stages]
        return [*out, *self.pool, *((self.draft,) if self.draft is not None else ())]


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
        runtime = self.hw.runtime  # a kernel's launch under the run's software stack (§11.11)
        self.production = inf.software == "production"
        self.launch = runtime.production_launch_cycles if self.production else runtime.kernel_launch_cycles
        # values -> a token's trip to each of the stage's grids and back (``moe_serving.grid_trips``)
        self.trips: Callable[[int], np.ndarray] | None = None
        # an MoE stage's dispatch and combine on this grid (``expert_dispatch.StageDispatch``)
        self.experts: Any = None
        # kernel costs here and on its regions (shared by ``on``'s copies): kernel_cost's hashes the hardware
        self._memo: dict[tuple, KernelCost] = {}

    def on(self, region: tuple[int, int] | None) -> _Grid:
        """The same kernels on ``region`` (an expert's rectangle of this grid; its problems are this
        grid's list)."""
        if region is None:
            return self
        sub = copy(self)
        sub.rows, sub.cols = region
        return sub

    def cost(self, op: Kernel, context: int = 0, batch: int = 1) -> KernelCost:
        """The kernel's cost on this grid at decode ``context`` (a prefill's kernels have none) and its
        launch (``runtime.kernel_launch``: the call that starts it, its descriptors' set-up, the checks
        between one kernel of the stage's program and the next; ``runtime.fused_launch`` under the
        production stack, whose kernels ``software.production_cost`` costs). ``batch``: the decode
        tokens it serves at once (a GEMV of that many vectors, that many times the values of any other
        kernel: the same hops, ``batch`` times the FMACs and wavelets)."""
        if self.production:
            return production_cost(self, op, context, batch, self.launch)
        c, launch = self._kernel(op, op.at(context), batch), self.launch
        if op.kind == StageOpKind.GRID_TRIPS:  # moves between grids, part of the dispatch: no kernel launched
            return c
        return KernelCost(c.cycles + launch, c.compute, c.communication, c.feasible, c.reason,
                          c.overhead + launch, c.fmacs, c.wavelet_hops)

    def _kernel(self, op: Kernel, dims: tuple[int, ...], batch: int = 1) -> KernelCost:
        kind, m = op.kind, self.machine
        if batch > 1 and kind != StageOpKind.GEMV:  # b tokens' values through the same kernel
            dims = (dims[0] * batch, *dims[1:])
        if kind in (StageOpKind.GEMV, StageOpKind.GEMM):
            shape = whole_blocks(kind, self.algorithm[kind], self.rows, self.cols,  # as kernel_cost rounds:
                                 (batch, *dims) if kind == StageOpKind.GEMV else dims)  # one memo entry
            c = self._layer(kind, self.rows, self.cols, algorithm=self.algorithm[kind], shape=shape)
            if not c.feasible and c.reason not in self.problems:
                self.problems.append(c.reason)
            return c
        # every row of PEs reduces its values to all its PEs, rows in parallel
        if kind == StageOpKind.ALLREDUCE:
            wavelets = m.wavelets(max(dims[0], 1))
            if self.cols < 2:
                return KernelCost(0.0, 0.0, 0.0)
            row = self._layer(kind, 1, self.cols, algorithm=self.algorithm[kind],
                              wavelets=wavelets)
            return KernelCost(row.cycles, row.compute, row.communication, row.feasible, row.reason,
                              row.overhead, row.fmacs, self.rows * row.wavelet_hops)  # each row alike
        if kind == StageOpKind.ROW_REDUCES:  # (values per PE per step): one reduce per step of Q·Kᵀ
            wavelets = m.wavelets(max(dims[0], 1))
            network, issue = rotating_reduces(m, self.cols, wavelets)
            # cols reduces a row, each of cols − 1 chained PEs sending its wavelets one hop
            hops = self.rows * self.cols * (self.cols - 1) * wavelets
            return KernelCost(network + issue, 0.0, network, overhead=issue, wavelet_hops=float(hops))
        if kind == StageOpKind.ELEMENTWISE:  # one vector instruction per op over each PE's share of values
            values, ops = dims
            compute, issue = m.instructions(ops, ceil(values / (self.rows * self.cols)))
            # each op on each value counted as one FMAC of the lanes, with its SRAM traffic
            return KernelCost(compute + issue, compute, 0.0, overhead=issue, fmacs=float(values * ops))
        if kind == StageOpKind.GRID_TRIPS:  # (values, further grids reached): moves between the stage's grids
            assert self.trips is not None, "a stage's grid knows the trips to its further grids"
            values, reached = dims
            from .moe_serving import balanced_trips

            cycles = balanced_trips(self.trips(int(values)), int(reached) + 1)
            return KernelCost(cycles, 0.0, cycles)
        # TRANSFER: (tokens,) an MoE layer's, spread evenly over its experts, to their regions (dispatch)
        assert self.experts is not None, "an MoE stage's grid knows its experts' placement"  # or back
        tokens, back = dims[0], op.name == "combine"
        cycles = self.experts.balanced(tokens, back)
        return KernelCost(cycles, 0.0, cycles, wavelet_hops=self.experts.wavelet_hops(tokens))

    def _layer(self, kind: StageOpKind, rows: int, cols: int, **shape: Any) -> KernelCost:
        """``kernels.cost.kernel_cost`` on this machine, remembered by what varies from call to call."""
        key = (kind, rows, cols, *shape.items())
        c = self._memo.get(key)
        if c is None:
            c = self._memo[key] = kernel_cost(self.hw, kind, rows, cols, dtype=self.dtype, **shape)
        return c

    def transfer(self, values: float, hops: int) -> KernelCost:
        wavelets = self.machine.wavelets(ceil(values / self.rows))
        cycles = float(self.machine.transfer(wavelets, max(hops, 1)))
        return KernelCost(cycles, 0.0, cycles, wavelet_hops=float(self.rows * wavelets * max(hops, 1)))

    def counts(self, costs: Iterable[KernelCost]) -> EventCounts:
        """The events of ``costs``: FMACs on this grid's lanes (with their SRAM traffic), wavelet-hops, and
        each kernel's overhead (issues, launch) on every PE of the grid as instruction cycles (§12.1)."""
        fmacs = hops = issue = 0.0
        for c in costs:
            fmacs, hops, issue = fmacs + c.fmacs, hops + c.wavelet_hops, issue + c.overhead
        return EventCounts.of_fmacs(fmacs, self.dtype, wavelet_hops=hops,
                                    instruction_cycles=issue * self.rows * self.cols)


def one_request(spec: InferenceExperimentSpec, serve: Serve | ServeBatches) -> Serve:
    """What a stage's one-request figures are costed for: the run's own ``Serve``, or under continuous
    batching one request at the spec's lengths (its mapping's; its requests' lengths vary)."""
    if isinstance(serve, ServeBatches):
        return Serve(serve.stages, 1, spec.inference.prompt_len, spec.inference.output_len)
    return serve


def decode_context(serve: Serve) -> int:
    """The context a decode step's kernels are costed at (``StageCosts.decode``): the last decode step's,
    prompt plus all output tokens but the last (at least one)."""
    return serve.prompt_len + max(serve.output_len - 1, 1)


def _stage(spec: InferenceExperimentSpec, serve: Serve | ServeBatches, work: StageWork, problems: list[str],
           draw: Callable[[int], np.ndarray] | None = None, with_batches: bool = False) -> StageCosts:
    from .batch_costs import BatchCosts
    from .moe_serving import grid_trips, sampled_trips

    stage = work.stage
    grid = _Grid(spec, stage.rows, stage.cols, problems)
    home = (stage.wafer, stage.origin)
    grid.trips = lambda values: grid_trips(stage, values,
                                           lambda place, n: move(spec, grid, home, place, n)[0])
    experts = None
    moe = any(not spec.model.is_dense(layer) for layer in stage.layers)
    if moe:
        from .expert_dispatch import StageDispatch

        grid.experts = StageDispatch(spec.hardware, stage.rows, stage.cols, spec.model, stage.grids)
    if draw is not None and isinstance(serve, Serve) and moe:
        experts = sampled_trips(stage, spec.model, draw, grid.trips(spec.model.hidden_size), serve.requests,
                                serve.output_len - 1)

    def cost(op: Kernel, context: int) -> KernelCost:
        if experts is not None and context and op.kind == StageOpKind.GRID_TRIPS:  # at the run's mean;
            return KernelCost(experts.mean[op.layer], 0.0, experts.mean[op.layer])  # ``extra``: each its own
        return grid.on(op.region).cost(op, context)

    prefill = tuple(cost(op, 0) for op in work.prefill)
    batched = isinstance(serve, ServeBatches)
    serve = one_request(spec, serve)
    longest = decode_context(serve)
    decode = tuple(cost(op, longest) for op in work.decode)
    first = stage.layers[0]
    attention = [op for op in work.decode if op.attention and op.layer == first]
    layers = len(stage.layers)

    def attention_costs(context: int) -> list[KernelCost]:
        return [grid.on(op.region).cost(op, context) for op in attention]

    def attention_cycles(context: int) -> float:
        return sum(c.cycles for c in attention_costs(context))

    fixed = sum(c.cycles for c in decode) - layers * attention_cycles(longest)
    # the events of every layer's attention at a token's context are the first layer's, as its cycles
    fixed_counts = grid.counts(c for op, c in zip(work.decode, decode, strict=True) if not op.attention)
    per_token, per_token_counts = [], []
    for context in range(serve.prompt_len + 1, serve.prompt_len + serve.output_len):
        costs = attention_costs(context)
        per_token.append(fixed + layers * sum(c.cycles for c in costs))
        per_token_counts.append(fixed_counts + grid.counts(costs).scaled(layers))
    batches = None
    if batched or with_batches:
        batches = BatchCosts(spec, work, grid, fixed, attention_cycles, serve.prompt_len,
                             sum(c.cycles for c in prefill), lambda h: handoff(spec, grid, h, _last(decode)))
    (after_prefill, prefill_moved), (after_decode, decode_moved) = (
        handoff(spec, grid, work.handoff_prefill, _last(prefill)),
        handoff(spec, grid, work.handoff_decode, _last(decode)))
    return StageCosts(prefill, decode, tuple(per_token), after_prefill, after_decode, batches=batches,
                      prefill_counts=grid.counts(prefill), decode_counts=tuple(per_token_counts),
                      handoff_counts=(prefill_moved, decode_moved), experts=experts)


def _last(costs: tuple[KernelCost, ...]) -> float:
    """The cycles of a stage's last kernel, which an asynchronous hand-off runs beside (§11.11)."""
    return costs[-1].cycles if costs else 0.0


def cost_serving(program: Program, spec: InferenceExperimentSpec,
                 draw: Callable[[int], np.ndarray] | None = None, batches: bool = False) -> Costs:
    """A serving program's costs: every stage's kernels simulated on its grid (the ``kernel`` model);
    with ``draw`` (sampled routing: ``draw(layer)`` each decode token's experts in that layer,
    ``[requests · (output_len − 1), top_k]``, asked for in layer order), each stage's decode tokens'
    trips to its experts' grids one by one; ``batches``: each stage's ``BatchCosts`` too under
    one-request serving (a verify pass's K + 1 vectors, a draft's step at any context)."""
    stages, problems = [], []
    for op in program.distinct():
        if isinstance(op, Serve | ServeBatches):
            for work in op.stages:
                mine: list[str] = []
                stages.append(_stage(spec, op, work, mine, draw, batches))
                problems += [p for p in mine if p not in problems]
    return Costs(stages=tuple(stages), problems=tuple(problems))
