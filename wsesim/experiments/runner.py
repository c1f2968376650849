"""Composition: a validated experiment -> memory check -> mesh, placement, routing -> simulated step
-> result. The only place that turns specs into an engine plan.

Randomness comes from one ``numpy.random.Generator`` seeded by ``training.seed``, split into
independent streams for placement and routing, so a run is a pure function of its inputs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..analysis.results import RunResult, infeasible, measure
from ..config.specs import ExperimentSpec, HardwareSpec
from ..fabric.dispatch import DispatchModel, dispatch_traffic, make_fabric
from ..fabric.mesh import Mesh, Placement, place
from ..model.memory import max_batch_per_tile, training_memory
from ..model.routing import expert_load, route_tokens
from ..sim.engine import simulate
from ..sim.plan import StepPlan, Trace


@lru_cache(maxsize=8)
def _flow_models(mesh: Mesh, placement: Placement) -> dict[bool, DispatchModel]:
    """Dispatch and combine models of a mesh and placement, built once per process (a tuner or a sweep
    worker runs many steps on the same wafer and placement)."""
    return {False: DispatchModel(mesh, placement), True: DispatchModel(mesh, placement, reverse=True)}


@lru_cache(maxsize=8)
def _mesh(hw: HardwareSpec, granularity: str) -> Mesh:
    return Mesh.from_hardware(hw, granularity)


def _dispatch_fn(spec: ExperimentSpec, mesh: Mesh, placement: Placement) -> Callable[[np.ndarray, bool], tuple[float, float]]:
    """The fabric as the engine sees it: (bytes per expert, reverse) -> (cycles, busiest link's bytes)."""
    if spec.simulation.fabric == "flow":
        models = _flow_models(mesh, placement)
        return lambda nbytes, reverse: models[reverse].cycles(nbytes)
    fabric = make_fabric("packet", mesh)

    def packet(nbytes: np.ndarray, reverse: bool) -> tuple[float, float]:
        traffic = dispatch_traffic(mesh, placement, nbytes)
        result = fabric.simulate(traffic.reversed() if reverse else traffic)
        return result.cycles, result.max_link_load_bytes

    return packet


def make_plan(spec: ExperimentSpec, batch_per_tile: int, tokens: np.ndarray,
              place_rng: np.random.Generator) -> tuple[StepPlan, Mesh, Placement]:
    """The engine's plan for ``spec`` at B = ``batch_per_tile``: mesh, expert placement, fabric timing."""
    hw, m, t = spec.hardware, spec.model, spec.training
    mesh = _mesh(hw, spec.simulation.granularity)
    placement = expert_placement(spec, place_rng)
    plan = StepPlan(
        hw=hw, model=m, training=t, batch_per_tile=batch_per_tile, tiles=t.tiles,
        attention_shape=(hw.mesh.rows, hw.mesh.cols),
        expert_regions=tuple((r.rows, r.cols) for r in placement.regions),
        expert_region_of=tuple(placement.expert_region_index), tokens=tokens,
        dispatch=_dispatch_fn(spec, mesh, placement),
    )
    return plan, mesh, placement


def expert_placement(spec: ExperimentSpec, rng: np.random.Generator) -> Placement:
    """Expert regions tiled in whole PEs (not whole mesh nodes, which would make regions up to a block
    larger or smaller than their neighbours): the fabric maps each region onto the nodes it covers."""
    return place(spec.hardware, spec.model.experts, spec.simulation.placement, rng)


def engine_for(spec: ExperimentSpec) -> Callable[[StepPlan], Trace]:
    """The event engine ``simulation.engine`` names: ``fast`` (default) or ``reference``, the plain-SimPy
    engine that exists to vouch for the fast one (same plan, same trace records, much slower)."""
    if spec.simulation.engine == "reference":
        from ..sim.reference import simulate as simulate_reference

        return simulate_reference
    return simulate


def random_streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent generators for (placement, routing) from the run's seed."""
    place_rng, route_rng = np.random.default_rng(seed).spawn(2)
    return place_rng, route_rng


@dataclass(frozen=True)
class Run:
    """A run's result, and (when it ran) the trace and plan it came from, for traces and pictures."""

    result: RunResult
    trace: Trace | None = None
    plan: StepPlan | None = None
    mesh: Mesh | None = None
    placement: Placement | None = None


def run_experiment(spec: ExperimentSpec) -> RunResult:
    """Simulate one training step of ``spec``. An infeasible configuration is a result with
    ``feasible=False`` and a reason, never an exception."""
    return simulate_experiment(spec).result


def simulate_experiment(spec: ExperimentSpec) -> Run:
    """``run_experiment``, keeping the trace and the plan.

    With ``batch_per_tile: auto``, B is first sized for balanced routing, then for the load the routing
    actually gives (a hot region holds more per PE) until it fits: auto is the largest B that fits."""
    wall = time.perf_counter()
    hw, m, t = spec.hardware, spec.model, spec.training
    placement = expert_placement(spec, random_streams(t.seed)[0])
    load, B = 1.0, 0 if t.batch_per_tile == "auto" else int(t.batch_per_tile)
    for _ in range(8 if t.batch_per_tile == "auto" else 1):
        if t.batch_per_tile == "auto":
            B = max_batch_per_tile(hw, m, t, expert_load=load)
            if B == 0:
                mem = training_memory(hw, m, t, batch_per_tile=1, expert_load=load)
                return Run(infeasible(spec, 0, f"batch_per_tile auto: not even B=1 fits ({mem.reason})",
                                      peak_sram=mem.peak_bytes_per_pe, capacity=mem.capacity_bytes_per_pe,
                                      binding=mem.binding.phase, expert_load=load, wall_s=time.perf_counter() - wall))
        place_rng, route_rng = random_streams(t.seed)
        tokens = route_tokens(m, t, B * t.tiles * t.seq_len, route_rng)
        load = expert_load(tokens, placement.expert_region_index, [r.pes for r in placement.regions], hw.pes)
        mem = training_memory(hw, m, t, batch_per_tile=B, expert_load=load)
        if mem.feasible:
            break
    if not mem.feasible:
        return Run(infeasible(spec, B, mem.reason, peak_sram=mem.peak_bytes_per_pe,
                              capacity=mem.capacity_bytes_per_pe, binding=mem.binding.phase, expert_load=load,
                              wall_s=time.perf_counter() - wall))
    plan, mesh, placement = make_plan(spec, B, tokens, place_rng)
    trace = engine_for(spec)(plan)
    result = measure(spec, B, trace, tokens=tokens, peak_sram=mem.peak_bytes_per_pe,
                     capacity=mem.capacity_bytes_per_pe, binding=mem.binding.phase, expert_load=load,
                     wall_s=time.perf_counter() - wall)
    return Run(result, trace, plan, mesh, placement)
