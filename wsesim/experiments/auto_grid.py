"""``grid: auto`` by the run's objective (docs/model.md §11.1): among the candidate grids whose mapping
fits (``sim.mapping.candidate_mappings``), the one that serves one request at the run's lengths best by
``objective``, read off the cost pass alone — no load is served to choose.

* ``tpot`` (the default): the shortest decode step, each stage's mean over the output's contexts plus
  the hand-offs between stages (the highest tokens/s per request);
* ``ttft``: the shortest prefill path (every stage's prefill and the hand-offs between them);
* ``throughput``: ``sim.mapping.rank``'s order, fewest wafers and then the most PEs in use (the rule
  before objectives: a one-request figure says nothing of a batch's throughput).

Ties go to fewer wafers, then to ``rank``'s order. A grid named (``grid: RxC``) is mapped as it is.
"""

from __future__ import annotations

from ..config.inference import InferenceExperimentSpec
from ..sim.builders.serving import serving_program
from ..sim.costing import cost_serving
from ..sim.mapping import Mapping, candidate_mappings, map_stages, rank

__all__ = ["map_for", "one_request_cycles"]


def one_request_cycles(spec: InferenceExperimentSpec, mapping: Mapping) -> tuple[float, float]:
    """(TTFT, TPOT) in cycles of one request on ``mapping`` (feasible) at the spec's lengths: the prefill
    through every stage and the hand-offs between them; the mean decode step over the output's contexts
    and every stage's hand-off after it."""
    stages = cost_serving(serving_program(spec, mapping), spec).stages
    ttft = sum(c.prefill_cycles for c in stages) + sum(c.handoff_prefill for c in stages[:-1])
    steps = max(len(stages[0].decode_cycles), 1)
    tpot = sum(sum(c.decode_cycles) for c in stages) / steps + sum(c.handoff_decode for c in stages)
    return ttft, tpot


def map_for(spec: InferenceExperimentSpec, objective: str = "tpot") -> Mapping:
    """The mapping a run serves (see the module's docstring); the first candidate's reason when no grid
    fits."""
    if spec.inference.grid != "auto" or objective == "throughput":
        return map_stages(spec)
    mesh = spec.hardware.mesh
    fits = [mp for mp in candidate_mappings(spec) if mp.feasible]
    if len(fits) < 2:
        return fits[0] if fits else map_stages(spec)

    def key(mp: Mapping) -> tuple:
        ttft, tpot = one_request_cycles(spec, mp)
        first = (tpot, ttft) if objective == "tpot" else (ttft, tpot)
        return (*first, mp.systems, rank(mp, mesh.rows, mesh.cols))

    return min(fits, key=key)
