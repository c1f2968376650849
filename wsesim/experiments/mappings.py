"""The MoE mappings, one table (docs/model.md §3.4): how an MoE layer's experts are laid on the wafer
and what each expert op costs there, by the ``simulation.moe_mapping`` key.

* ``regions``: each expert on a region of its own (placed by ``simulation.placement``), reached by its
  tokens over the fabric; an op's cycles are its region's, under the compute model
  (``sim.cost.costing.COMPUTE_MODELS``, the ``simulation.compute`` key).
* ``in_place``: every expert on the whole wafer, each token's k copies kept where the token is (the
  Cerebras software stack's way); an op is paced by the PE column holding the most copies of its expert,
  the copies' spread over the columns drawn from the run's seed (``spread_stream``). It keeps this lane
  model under ``simulation.compute: kernel`` too: a copy is no GEMM of its own shape.

A new mapping is its entry in ``MOE_MAPPINGS`` (with its functions here or in the model layer) and its
name in ``SimulationSpec.moe_mapping``; the engines' side of a mapping lives in ``wsesim.sim``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..config.specs import ExperimentSpec
from ..config.tables import entry
from ..fabric.placement import Placement, place
from ..model.costs import ExpertCosts, in_place_expert_costs
from ..model.routing import busiest_column_copies
from ..model.shapes import LayerShapes
from ..sim.cost.costing import COMPUTE_MODELS
from ..sim.programs.plan import StepPlan


@dataclass(frozen=True)
class MoEMapping:
    """One MoE mapping: ``description`` what it models; ``placement(spec, rng)`` its expert regions (drawn
    with the placement stream ``rng``); ``expert_costs(plan)`` every expert op's cycles, for the plan's
    routed ``tokens[layer, expert]`` on its regions (``StepPlan.cost_experts``: the cost pass asks)."""

    description: str
    placement: Callable[[ExperimentSpec, np.random.Generator], Placement]
    expert_costs: Callable[[StepPlan], ExpertCosts]
    dispatched: bool = True  # its tokens cross the fabric to the experts' regions (the dispatch bases built)


def spread_stream(seed: int) -> np.random.Generator:
    """A third independent generator from the run's seed: how expert copies spread over the wafer's
    columns in place. (A SeedSequence's i-th child does not depend on how many are spawned, so this one
    leaves the placement and routing streams, the first two, as they are.)"""
    return np.random.default_rng(seed).spawn(3)[2]


def _regions_placement(spec: ExperimentSpec, rng: np.random.Generator) -> Placement:
    return place(spec.hardware, spec.model.experts, spec.simulation.placement, rng)


def _regions_costs(plan: StepPlan) -> ExpertCosts:
    region = np.array([plan.expert_regions[r] for r in plan.expert_region_of], dtype=float)
    costs = COMPUTE_MODELS[plan.compute].region_experts
    return costs(plan.hw, LayerShapes(plan.model), plan.tokens, region[:, 0], region[:, 1])


def _whole_wafer(spec: ExperimentSpec, rng: np.random.Generator) -> Placement:
    """One region, the whole wafer, shared by every expert."""
    return place(spec.hardware, spec.model.experts, "grid", rng, tiles=1)


def _in_place_costs(plan: StepPlan) -> ExpertCosts:
    hw = plan.hw
    lanes = busiest_column_copies(plan.tokens, hw.mesh.cols, spread_stream(plan.training.seed))
    return in_place_expert_costs(hw, LayerShapes(plan.model), lanes, hw.mesh.rows, hw.mesh.cols)


MOE_MAPPINGS: dict[str, MoEMapping] = {
    "regions": MoEMapping("each expert on a region of its own, its tokens dispatched over the fabric",
                          _regions_placement, _regions_costs),
    "in_place": MoEMapping("every expert on the whole wafer, each token's copies kept in place",
                           _whole_wafer, _in_place_costs, dispatched=False),
}
"""MoE mappings by name (the ``simulation.moe_mapping`` key)."""


def moe_mapping(name: str) -> MoEMapping:
    """The mapping ``name`` (``ConfigError`` naming the valid ones for an unknown name)."""
    return entry(MOE_MAPPINGS, name, "simulation.moe_mapping")
