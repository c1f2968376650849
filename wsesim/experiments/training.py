"""A training step on a wafer, as the one runner (``runner.run``) takes its steps (``TRAINING``): refuse
work that cannot finish here -> B sized against the routed load and the memory checked (``size_step``) ->
mesh, placement and routing into the step's plan and its program -> costed once -> executed -> measured.
The only place that turns a training spec into an engine plan. What varies (the fabric fidelity, the MoE
mapping, the engine) is looked up in tables, as the runner says; the randomness is ``training.seed``'s,
split into independent streams for placement and routing (``random_streams``).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..analysis.results import infeasible, measure
from ..config.specs import ExperimentSpec, HardwareSpec
from ..fabric.fidelity import dispatch_timer
from ..fabric.mesh import Mesh, Region
from ..fabric.placement import Placement
from ..model.memory import TrainingMemory, max_batch_per_tile, training_memory
from ..model.routing import expert_load, route_tokens
from ..model.vocabulary import OpKind
from ..sim.cost.costing import Costs, cost_program
from ..sim.executors.engines import engine_for
from ..sim.programs.builders.training import training_program
from ..sim.programs.cluster import tree_for
from ..sim.programs.plan import StepPlan, Trace
from ..sim.programs.program import Op, Program
from .estimate import check_work, divisors, fewest_micro_batches
from .mappings import moe_mapping
from .runs import Composer, Options, Run, compose


@lru_cache(maxsize=8)
def _mesh(hw: HardwareSpec, granularity: str) -> Mesh:
    return Mesh.from_hardware(hw, granularity)


def make_plan(spec: ExperimentSpec, batch_per_tile: int, tokens: np.ndarray,
              place_rng: np.random.Generator | None = None, micro_batches: int = 1, *,
              placement: Placement | None = None) -> tuple[StepPlan, Mesh, Placement]:
    """The engine's plan for ``spec`` at B = ``batch_per_tile``: mesh, expert placement, how the fabric
    times a dispatch and how the MoE mapping costs an expert op (both asked by the cost pass,
    ``costed_step``), the micro-batches and the cluster's tree. A dense
    model has no experts: no regions, and no fabric phase to time. ``placement``: the one the step was
    sized against (``Sizing.placement``), else drawn from ``place_rng``."""
    hw, m, t = spec.hardware, spec.model, spec.training
    mesh = _mesh(hw, spec.simulation.granularity)
    if placement is None:
        placement = expert_placement(spec, place_rng)
    moe = m.experts > 0
    plan = StepPlan(
        hw=hw, model=m, training=t, batch_per_tile=batch_per_tile, tiles=t.tiles,
        attention_shape=(hw.mesh.rows, hw.mesh.cols),
        expert_regions=tuple((r.rows, r.cols) for r in placement.regions) if moe else (),
        expert_region_of=tuple(placement.expert_region_index), tokens=tokens,
        dispatch=dispatch_timer(spec.simulation.fabric, mesh, placement) if moe else _no_dispatch,
        moe_mapping=spec.simulation.moe_mapping,
        cost_experts=moe_mapping(spec.simulation.moe_mapping).expert_costs,
        micro_batches=micro_batches, tree=tree_for(hw, spec.cluster), compute=spec.simulation.compute,
    )
    return plan, mesh, placement


def _no_dispatch(nbytes: np.ndarray, reverse: bool) -> tuple[float, float]:
    raise AssertionError("a dense model dispatches nothing")


def costed_step(plan: StepPlan) -> tuple[Program, Costs]:
    """The training step of ``plan`` as a program (``builders.training``) and its costs, all of them,
    before an executor runs it (``costing.cost_program``)."""
    program = training_program(plan)
    return program, cost_program(program, plan)


def expert_placement(spec: ExperimentSpec, rng: np.random.Generator) -> Placement:
    """Expert regions tiled in whole PEs (not whole mesh nodes, which would make regions up to a block
    larger or smaller than their neighbours), as ``simulation.moe_mapping`` lays them out: the fabric maps
    each region onto the nodes it covers. A dense model: the whole wafer, and no experts on it."""
    if spec.model.experts == 0:
        return Placement("grid", Region(0, 0, spec.hardware.mesh.rows, spec.hardware.mesh.cols),
                         (Region(0, 0, spec.hardware.mesh.rows, spec.hardware.mesh.cols),), ())
    return moe_mapping(spec.simulation.moe_mapping).placement(spec, rng)


def random_streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent generators for (placement, routing) from the run's seed."""
    place_rng, route_rng = np.random.default_rng(seed).spawn(2)
    return place_rng, route_rng


def _route_draw(route_rng: np.random.Generator) -> np.random.Generator:
    """The routing stream from its start, for one trial of the batch search: every B is routed by the
    same draws, as a run at that B alone would be (``route_rng`` itself is never advanced)."""
    return copy.deepcopy(route_rng)


def one_system_throughput(spec: ExperimentSpec) -> float:
    """Tokens/s of ``spec`` on one system alone (no tree): the same global batch when it is set (its own
    micro-batches), else the same per-system batch; 0 if it cannot run there. The reference of a cluster's
    ``scaling_efficiency``; kept per process, as a sweep's cluster points share it."""
    one = spec.model_copy(update={"cluster": type(spec.cluster)(systems=1)})
    key = one.model_dump_json()
    if key not in _ONE_SYSTEM:
        result = compose(TRAINING, one).result
        _ONE_SYSTEM[key] = result.throughput_tokens_per_s if result.feasible else 0.0
    return _ONE_SYSTEM[key]


_ONE_SYSTEM: dict[str, float] = {}


@dataclass(frozen=True)
class Sizing:
    """B resolved and the step's memory checked against the routed load: what ``wsesim run`` runs and
    ``wsesim memory training`` reports (one function, so the two cannot disagree).

    ``tokens`` are the routed slots per layer and expert at that B (None when not even B=1 fits);
    ``expert_load`` the busiest region's tokens per PE over the mean; ``memory`` the SRAM table;
    ``placement`` the expert placement the load was measured on (the plan's: drawn once a run).
    """

    batch_per_tile: int
    tokens: np.ndarray | None
    expert_load: float
    memory: TrainingMemory
    reason: str  # why it does not fit ('' when it does)
    micro_batches: int = 1  # micro-batches of G·B per step (gradient accumulation)
    placement: Placement | None = None

    @property
    def feasible(self) -> bool:
        return not self.reason


def size_step(spec: ExperimentSpec) -> Sizing:
    """Resolve ``batch_per_tile`` (and ``micro_batches``) and check memory under the load the routing
    actually gives.

    With ``auto``, B is first sized for balanced routing, then for the load the routing gives at that B
    (a hot region holds more per PE), until it fits: auto is the largest B that fits its own routing.
    With ``training.global_batch``, each system's share splits into micro-batches of G tiles: B follows
    from ``micro_batches`` (or the reverse), and with both ``auto`` the fewest micro-batches whose B fits
    (docs/model.md §2.4)."""
    hw, m, t = spec.hardware, spec.model, spec.training
    place_rng, route_rng = random_streams(t.seed)
    placement = expert_placement(spec, place_rng)
    if t.global_batch is not None:
        return _size_for_global_batch(spec, placement, route_rng)
    micro_batches = 1 if t.micro_batches == "auto" else int(t.micro_batches)
    auto = t.batch_per_tile == "auto"
    load, B = 1.0, 0 if auto else int(t.batch_per_tile)
    for _ in range(8 if auto else 1):
        if auto:
            B = max_batch_per_tile(hw, m, t, expert_load=load)
            if B == 0:
                mem = training_memory(hw, m, t, batch_per_tile=1, expert_load=load)
                return Sizing(0, None, load, mem, f"batch_per_tile auto: not even B=1 fits ({mem.reason})",
                              placement=placement)
        size = _routed(spec, placement, route_rng, B, micro_batches)
        if size.feasible:
            break
        load = size.expert_load
    return size


def _routed(spec: ExperimentSpec, placement: Placement, route_rng: np.random.Generator, B: int,
            micro_batches: int) -> Sizing:
    """The step at B routed (the routing stream from its start) and its memory checked under that load."""
    hw, m, t = spec.hardware, spec.model, spec.training
    tokens = route_tokens(m, t, B * t.tiles * t.seq_len, _route_draw(route_rng))
    load = expert_load(tokens, placement.expert_region_index, [r.pes for r in placement.regions], hw.pes)
    mem = training_memory(hw, m, t, batch_per_tile=B, expert_load=load)
    return Sizing(B, tokens, load, mem, mem.reason, micro_batches, placement)


def _size_for_global_batch(spec: ExperimentSpec, placement: Placement,
                           route_rng: np.random.Generator) -> Sizing:
    """``size_step`` with ``training.global_batch`` (validated to split evenly): each micro-batch routes
    as one draw at its own size, and the memory is checked at that B under that draw's load."""
    hw, m, t = spec.hardware, spec.model, spec.training
    assert t.global_batch is not None
    per_tile = t.global_batch // spec.cluster.systems // t.tiles  # sequences per tile over the micro-batches
    if t.batch_per_tile != "auto" or t.micro_batches != "auto":  # B as set, or as the micro-batches give it
        B = int(t.batch_per_tile) if t.batch_per_tile != "auto" else per_tile // int(t.micro_batches)
        return _routed(spec, placement, route_rng, B, per_tile // B)
    bound = max_batch_per_tile(hw, m, t)  # with balanced routing: no larger B can fit
    for B in sorted((d for d in divisors(per_tile) if d <= bound), reverse=True):
        size = _routed(spec, placement, route_rng, B, per_tile // B)
        if size.feasible:
            return size
    mem = training_memory(hw, m, t, batch_per_tile=1)
    why = mem.reason or "the routed load does not fit at any B that divides it"
    return Sizing(0, None, 1.0, mem,
                  f"global_batch {t.global_batch}: no micro-batch of whole tiles fits ({why})",
                  placement=placement)


def _refuse(spec: ExperimentSpec, size: Sizing | None, options: Options) -> None:
    """Work that cannot finish here, refused before anything is built, routing included; and again once
    sized, when the routed load asked for more micro-batches than the fewest the estimate counted."""
    if not options.check:
        return
    if size is None:
        check_work(spec)
    elif size.micro_batches > fewest_micro_batches(spec):
        check_work(spec, micro_batches=size.micro_batches)


def _infeasible(spec: ExperimentSpec, size: Sizing, start: float) -> Run:
    mem = size.memory
    return Run(infeasible(spec, size.batch_per_tile, size.reason, peak_sram=mem.peak_bytes_per_pe,
                          capacity=mem.capacity_bytes_per_pe, binding=mem.binding.phase,
                          expert_load=size.expert_load, wall_s=time.perf_counter() - start,
                          micro_batches=size.micro_batches))


def _build(spec: ExperimentSpec, size: Sizing, options: Options) -> tuple[StepPlan, Program]:
    assert size.tokens is not None
    plan = make_plan(spec, size.batch_per_tile, size.tokens, micro_batches=size.micro_batches,
                     placement=size.placement)[0]
    return plan, training_program(plan)


def _execute(spec: ExperimentSpec, plan: StepPlan, program: Program, costs: Costs) -> tuple[Trace, float]:
    """The step's trace and, for a cluster's scaling efficiency, its cycles on one system alone on the
    same share (no tree): the same costed ops without the reduce tree's drain."""
    execute = engine_for(spec)
    trace = execute(plan, program, costs)
    alone = trace.step_cycles if plan.tree is None else execute(
        replace(plan, tree=None), replace(program, tail=_without_tree(program.tail)), costs).step_cycles
    return trace, alone


def _measure(spec: ExperimentSpec, size: Sizing, plan: StepPlan, program: Program, costs: Costs,
             executed: tuple[Trace, float], start: float) -> Run:
    trace, alone = executed
    mem = size.memory
    one = None if plan.tree is None else one_system_throughput(spec)
    result = measure(spec, size.batch_per_tile, trace, tokens=size.tokens, peak_sram=mem.peak_bytes_per_pe,
                     capacity=mem.capacity_bytes_per_pe, binding=mem.binding.phase,
                     expert_load=size.expert_load, wall_s=time.perf_counter() - start,
                     micro_batches=size.micro_batches, alone_cycles=alone, one_system_throughput=one)
    return Run(result, trace, program, costs, plan, _mesh(spec.hardware, spec.simulation.granularity),
               size.placement)


def _without_tree(tail: tuple[Op, ...]) -> tuple[Op, ...]:
    """A step's tail on one system: no reduce tree to drain."""
    return tuple(op for op in tail if op.kind != OpKind.REDUCE_DRAIN)


TRAINING = Composer(_refuse, lambda spec, options: size_step(spec), _infeasible, _build,
                    lambda spec, plan, program: cost_program(program, plan), _execute, _measure,
                    quiet_collector=True)
"""A training step on a wafer, step by step (``runs.compose``)."""
