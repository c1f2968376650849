"""The cost pass: a program's ops, written as shapes by a builder, turned into cycles once, before an
executor runs them (docs/architecture.md). Both executors read the same ``Costs``, so they cannot
disagree on what an op costs; only on when it runs.

What an op of arithmetic costs is the compute model's (``COMPUTE_MODELS``, the ``simulation.compute``
key: ``constant``, FLOPs at the global ``gemm_efficiency``; ``kernel``, its GEMMs simulated by
``kernels.step``). Serving's kernels are always simulated, through ``kernels.cost.kernel_cost``, since
they are what it runs. The ``in_place`` MoE mapping keeps its lane model under either: an in-place op is
every expert's copies side by side in SIMD lanes, not a GEMM of a shape of its own
(``experiments.mappings``). A training step's dispatch and combine are the fabric fidelity's
(``StepPlan.dispatch``), timed here on a layer's routed bytes, known before the step runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from copy import copy
from dataclasses import dataclass, field, replace
from math import ceil
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ...config.specs import HardwareSpec
from ...kernels.cost import KernelCost, kernel_cost, lanes_dtype, whole_blocks
from ...kernels.lines import rotating_reduces
from ...kernels.machine import Machine
from ...kernels.step import kernel_op_cost, kernel_region_expert_costs
from ...model.costs import ExpertCosts, OpCost, op_cost, region_expert_costs
from ...model.energy import EventCounts
from ...model.optimizer import optimizer_step_cycles
from ...model.shapes import LayerShapes
from ...model.vocabulary import Pass, StageOpKind
from ..programs.plan import StepPlan
from ..programs.program import Kernel, Op, Program, ServeBatches, StageWork, Transfer, WaferOp
from .batch_costs import BatchCosts
from .expert_dispatch import StageDispatch
from .handoffs import handoff, move, wafer_handoff
from .moe_serving import balanced_trips, grid_trips
from .software import production_cost

if TYPE_CHECKING:  # a serving spec is only read here, never built
    from ...config.inference import InferenceExperimentSpec

__all__ = ["COMPUTE_MODELS", "ComputeModel", "Costs", "FabricCost", "StageCosts", "cost_program",
           "cost_serving", "wafer_handoff"]


@dataclass(frozen=True)
class ComputeModel:
    """One compute model: ``wafer(hw, rows, cols, op, bytes_per_value)`` a whole-wafer op's cost;
    ``region_experts(hw, shapes, tokens, rows, cols)`` every expert op's cycles on its region (the
    ``regions`` mapping), for the routed ``tokens[layer, expert]``; ``pipelined``: an op consumes its
    weights as they arrive (``links.consume``: from the first bytes, ending no earlier than the last),
    else it starts once they are in — the one thing the model changes in how an executor runs a step."""

    description: str
    wafer: Callable[[HardwareSpec, int, int, WaferOp, int], OpCost]
    region_experts: Callable[[HardwareSpec, LayerShapes, np.ndarray, np.ndarray, np.ndarray], ExpertCosts]
    pipelined: bool = False


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
                           kernel_region_expert_costs, pipelined=True),
}
"""Compute models by name (the ``simulation.compute`` key)."""


@dataclass(frozen=True)
class StageCosts:
    """One stage's costs for one request at the spec's lengths (its figures): every prefill kernel's and
    every decode kernel's (at the run's longest context), its last decode step's cycles
    (``decode_step``; 0 with one output token, which has none), the hand-offs after a prefill and after a
    decode step; and ``batches``, what the scheduler's iterations on it cost (``BatchCosts``)."""

    prefill: tuple[KernelCost, ...]
    decode: tuple[KernelCost, ...]
    decode_step: float
    handoff_prefill: float
    handoff_decode: float
    batches: BatchCosts | None = field(default=None, compare=False)

    @property
    def prefill_cycles(self) -> float:
        return sum(c.cycles for c in self.prefill)


def split_costs(costs: Iterable[KernelCost]) -> dict[str, float]:
    """Kernels' cycles by what they are: instruction issue and kernel launches (``overhead``),
    arithmetic (the rest of the PE's work, waiting on a neighbour included), wavelets on the fabric."""
    issue = compute = comm = 0.0
    for c in costs:
        issue += c.overhead
        comm += c.communication
        compute += c.cycles - c.communication - c.overhead
    return {"instructions": issue, "compute": compute, "communication": comm}


class FabricCost(NamedTuple):
    """A dispatch or combine over the fabric: its cycles, the busiest link's bytes, the bytes moved."""

    cycles: float
    max_link_load_bytes: float
    nbytes: float


_NO_EXPERTS = ExpertCosts({}, {})


@dataclass
class Costs:
    """What a program's ops cost: each whole-wafer op's (keyed by the op), every expert op's, each
    layer's dispatch and combine (``fabric[layer, reverse]``), MemoryX's optimizer step and whether ops
    consume their weights as they arrive (the compute model's ``pipelined``); each serving stage's, and
    the kernels that do not fit (``problems``, once each)."""

    wafer: dict[Op, OpCost] = field(default_factory=dict)
    optimizer_cycles: float = 0.0
    experts: ExpertCosts = _NO_EXPERTS
    fabric: dict[tuple[int, bool], FabricCost] = field(default_factory=dict)
    pipelined: bool = False
    stages: tuple[StageCosts, ...] = ()
    problems: tuple[str, ...] = ()
    draft: Any = None  # continuous batching with a draft: its station's costs (``speculative.DraftCosts``)
    pool: tuple[Any, ...] = ()  # split prefill under continuous batching: the prefill stages' costs

    def stations(self) -> list[Any]:
        """What the scheduler's stations cost: each stage's ``BatchCosts``, then the prefill pool's or
        the draft's."""
        out: list[Any] = [c.batches for c in self.stages]
        return [*out, *self.pool, *((self.draft,) if self.draft is not None else ())]


def cost_program(program: Program, plan: StepPlan) -> Costs:
    """A training program's costs, all of them before it runs: its whole-wafer ops under
    ``plan.compute``, its experts' ops (the MoE mapping's, which costs a region's through the same table),
    each layer's dispatch and combine (the fabric's timer on the layer's routed bytes: forward,
    recompute and backward move the same bytes, timed once) and MemoryX's optimizer step."""
    model = COMPUTE_MODELS[plan.compute]
    rows, cols = plan.attention_shape
    m = plan.model
    costs = Costs(optimizer_cycles=optimizer_step_cycles(plan.hw, m), pipelined=model.pipelined,
                  experts=plan.cost_experts(plan) if m.experts else _NO_EXPERTS)
    for op in program.distinct():
        if isinstance(op, WaferOp):
            costs.wafer[op] = model.wafer(plan.hw, rows, cols, op, m.bytes_per_value)
        elif isinstance(op, Transfer) and (op.layer, op.reverse) not in costs.fabric:
            nbytes = plan.tokens[op.layer].astype(float) * m.hidden_size * m.bytes_per_value
            costs.fabric[op.layer, op.reverse] = FabricCost(*plan.dispatch(nbytes, op.reverse),
                                                            float(nbytes.sum()))
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
        return replace(c, cycles=c.cycles + launch, overhead=c.overhead + launch)

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
            return replace(row, wavelet_hops=self.rows * row.wavelet_hops)  # each row alike
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


def decode_context(prompt_len: int, output_len: int) -> int:
    """The context a decode step's kernels are costed at (``StageCosts.decode``): the last decode step's,
    prompt plus all output tokens but the last (at least one)."""
    return prompt_len + max(output_len - 1, 1)


def _stage(spec: InferenceExperimentSpec, work: StageWork, problems: list[str]) -> StageCosts:
    stage = work.stage
    grid = _Grid(spec, stage.rows, stage.cols, problems)
    home = (stage.wafer, stage.origin)
    grid.trips = lambda values: grid_trips(stage, values,
                                           lambda place, n: move(spec, grid, home, place, n)[0])
    if any(not spec.model.is_dense(layer) for layer in stage.layers):
        grid.experts = StageDispatch(spec.hardware, stage.rows, stage.cols, spec.model, stage.grids)
    prefill = tuple(grid.on(op.region).cost(op, 0) for op in work.prefill)
    prompt_len, output_len = spec.inference.load.prompt_len, spec.inference.load.output_len
    longest = decode_context(prompt_len, output_len)
    decode = tuple(grid.on(op.region).cost(op, longest) for op in work.decode)
    first = stage.layers[0]
    attention = [op for op in work.decode if op.attention and op.layer == first]
    layers = len(stage.layers)

    def attention_cycles(context: int) -> float:
        return sum(grid.on(op.region).cost(op, context).cycles for op in attention)

    fixed = sum(c.cycles for c in decode) - layers * attention_cycles(longest)
    step = fixed + layers * attention_cycles(prompt_len + output_len - 1) if output_len > 1 else 0.0
    batches = BatchCosts(spec, work, grid, fixed, attention_cycles, prompt_len,
                         sum(c.cycles for c in prefill), lambda h: handoff(spec, grid, h, _last(decode)),
                         lambda h: handoff(spec, grid, h, _last(prefill)))
    return StageCosts(prefill, decode, step, handoff(spec, grid, work.handoff_prefill, _last(prefill))[0],
                      handoff(spec, grid, work.handoff_decode, _last(decode))[0], batches)


def _last(costs: tuple[KernelCost, ...]) -> float:
    """The cycles of a stage's last kernel, which an asynchronous hand-off runs beside (§11.11)."""
    return costs[-1].cycles if costs else 0.0


def cost_serving(program: Program, spec: InferenceExperimentSpec) -> Costs:
    """A serving program's costs: every stage's kernels simulated on its grid (the ``kernel`` model), for
    one request's figures and for the scheduler's iterations (``StageCosts.batches``)."""
    stages, problems = [], []
    for op in program.distinct():
        if isinstance(op, ServeBatches):
            for work in op.stages:
                mine: list[str] = []
                stages.append(_stage(spec, work, mine))
                problems += [p for p in mine if p not in problems]
    return Costs(stages=tuple(stages), problems=tuple(problems))
