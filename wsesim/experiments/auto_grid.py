"""``grid: auto`` by the run's objective (docs/model.md §11.1): among the candidate grids whose mapping
fits (``sim.programs.mapping.candidate_mappings``), the one that serves the run's requests best by
``objective``, read off the cost pass alone — no load is served to choose.

* ``tpot`` (the default): the shortest decode step (the highest tokens/s per request) — for one request,
  each stage's mean over the output's contexts plus the hand-offs between stages; under continuous
  batching, a full batch's (``inference.scheduler.batch`` tokens through every stage, at the output's middle
  context, and their hand-offs): a grid that is fastest for one token can be the slowest for 64, whose
  GEMVs the larger grid's PEs share;
* ``ttft``: the shortest prefill path (every stage's prefill and the hand-offs between them);
* ``throughput``: ``sim.programs.mapping.rank``'s order, fewest wafers and then the most PEs in use (the rule
  before objectives: a one-request figure says nothing of a batch's throughput).

Ties go to fewer wafers, then to ``rank``'s order. A grid named (``grid: RxC``) is mapped as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..sim.cost.costing import cost_serving
from ..sim.programs.builders.serving import serving_program
from ..sim.programs.mapping import Mapping, candidate_mappings, map_stages, rank

if TYPE_CHECKING:
    from ..config.inference import InferenceExperimentSpec

__all__ = ["map_for", "step_cycles"]


def _stages(spec: InferenceExperimentSpec, mapping: Mapping) -> list:
    """The stages' costs to rank ``mapping`` by: its prompt's prefill and its batch costs, costed for an
    output of 2 tokens (the cost pass would otherwise cost every decode context of the output, and a
    ranking needs one)."""
    inf = spec.inference
    short = spec.model_copy(update={"inference": inf.model_copy(update={
        "load": inf.load.model_copy(update={"output_len": 2})})})
    return list(cost_serving(serving_program(short, mapping), short).stages)


def step_cycles(spec: InferenceExperimentSpec, mapping: Mapping, batch: int) -> tuple[float, float]:
    """(TTFT, decode step) in cycles of ``batch`` requests on ``mapping`` (feasible) at the spec's lengths:
    the prefill through every stage and the hand-offs between them; a decode step of ``batch`` tokens at the
    output's middle context through every stage, and each stage's hand-off of its values after it (one
    request's attention, or the batch's ``BatchCosts.batch_attention``)."""
    inf = spec.inference
    context = inf.load.prompt_len + max(inf.load.output_len // 2, 1)
    stages = _stages(spec, mapping)
    ttft = sum(c.prefill_cycles for c in stages) + sum(c.handoff_prefill for c in stages[:-1])
    step = 0.0
    for c in stages:
        b = c.batches
        assert b is not None
        attention = b.attention(context) if batch == 1 else b.batch_attention(batch, context)
        values = batch if b.work.stage.lm_head else batch * spec.model.hidden_size
        step += b.decode(batch) + attention + (b.handoff(values) if len(stages) > 1 else 0.0)
    return ttft, step


def map_for(spec: InferenceExperimentSpec, objective: str = "tpot") -> Mapping:
    """The mapping a run serves (see the module's docstring); the first candidate's reason when no grid
    fits."""
    if spec.inference.grid != "auto" or objective == "throughput":
        return map_stages(spec)
    mesh = spec.hardware.mesh
    fits = [mp for mp in candidate_mappings(spec) if mp.feasible]
    if len(fits) < 2:
        return fits[0] if fits else map_stages(spec)

    batch = spec.inference.scheduler.batch if spec.inference.scheduler.continuous else 1

    def key(mp: Mapping) -> tuple:
        ttft, tpot = step_cycles(spec, mp, batch)
        first = (tpot, ttft) if objective == "tpot" else (ttft, tpot)
        return (*first, mp.systems, rank(mp, mesh.rows, mesh.cols))

    return min(fits, key=key)
