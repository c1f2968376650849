"""A serving run on wafers, as the one runner (``runner.run``) takes its steps (``SERVING``): a validated
``kind: inference`` experiment -> stage mapping (``grid: auto`` by the objective) -> refuse work that
cannot finish here -> the serving program (``sim.programs.builders.serving``) -> its costs, each stage's
kernels simulated on its grid (``sim.cost.costing``) -> requests through the pipeline by the executor its
``simulation.engine`` names (``sim.executors.engines.ENGINES``, the same key and executors as training's)
-> result. Speculative decoding and split prefill lay out wafers of their own beside the target's
(``serving_layouts``). And the search for the fastest mapping that fits (``wsesim infer --search``, over
the rectangles that tile the wafer), as ``tune`` searches G for training."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..analysis.serving import ServeResult, infeasible_serving, measure_serving
from ..config.errors import ConfigError
from ..config.inference import InferenceExperimentSpec
from ..config.tables import entry
from ..sim.cost.costing import Costs, cost_serving
from ..sim.executors.engines import engine_for
from ..sim.programs.builders.serving import serving_program
from ..sim.programs.mapping import Mapping, candidate_mappings
from ..sim.programs.program import Program
from .auto_grid import map_for
from .hardware_kinds import hardware_kind
from .runs import Composer, Options, Run, compose
from .serving_estimate import check_serving, serving_estimate
from .serving_layouts import extra_wafers, layout_costs, layout_program, layout_result

__all__ = ["OBJECTIVES", "SERVING", "search_mapping", "serving_estimate"]


@dataclass(frozen=True)
class Served:
    """Where a serving run goes: the target's stage ``mapping``; with speculative decoding or split
    prefill, the wafers ``found`` for the draft and the prefill (``serving_layouts.extra_wafers``) and,
    for one request alone, the ``plain`` run without them on the same mapping; ``reason``: why it cannot
    be served ('' when it can)."""

    mapping: Mapping
    plain: Run | None = None
    found: dict[str, Any] = field(default_factory=dict)
    reason: str = ""

    @property
    def feasible(self) -> bool:
        return not self.reason


def _lay_out(spec: InferenceExperimentSpec, options: Options) -> Served:
    inf, plain = spec.inference, None
    if inf.extra_wafers and inf.alone:
        # one request alone: the run without the draft or the prefill wafers too, on its mapping (the
        # figure the layout is held against, ``tokens_per_s_per_request_without``)
        alone = inf.model_copy(update={"speculative": None, "disaggregation": None})
        plain = compose(SERVING, spec.model_copy(update={"inference": alone}), options)
        if not plain.result.feasible:
            assert plain.mapping is not None
            return Served(plain.mapping, plain, reason=plain.result.infeasible_reason)
    mapping = map_for(spec, options.objective) if plain is None else plain.mapping
    assert mapping is not None
    if not mapping.feasible:
        return Served(mapping, plain, reason=mapping.reason)
    if not inf.extra_wafers:
        return Served(mapping)
    found = extra_wafers(spec)  # the draft's or the prefill wafers are more stations of the scheduler
    return Served(mapping, plain, reason=found) if isinstance(found, str) else Served(mapping, plain, found)


def _refuse(spec: InferenceExperimentSpec, served: Served | None, options: Options) -> None:
    """What cannot finish here is refused once mapped (the mapping's stages count), before the program
    is built."""
    if served is not None and options.check:
        check_serving(serving_estimate(spec, served.mapping, spans=options.spans))


def _infeasible(spec: InferenceExperimentSpec, served: Served, start: float) -> Run:
    return Run(infeasible_serving(spec, served.mapping, served.reason), mapping=served.mapping)


def _build(spec: InferenceExperimentSpec, served: Served, options: Options) -> tuple[Served, Program]:
    if spec.inference.extra_wafers:
        return served, layout_program(spec, served.mapping, served.found, options.spans)
    return served, serving_program(spec, served.mapping, members=options.spans)


def _cost(spec: InferenceExperimentSpec, served: Served, program: Program) -> Costs:
    if spec.inference.extra_wafers:
        return layout_costs(spec, served.mapping, served.found, program)
    return cost_serving(program, spec)


def _measure(spec: InferenceExperimentSpec, served: Served, plan: Served, program: Program, costs: Costs,
             trace: Any, start: float) -> Run:
    mapping, wall = served.mapping, time.perf_counter() - start
    if spec.inference.extra_wafers:
        plain = served.plain.result if served.plain is not None else None
        result = layout_result(spec, mapping, served.found, program, costs, trace, plain, wall)
    else:
        result = measure_serving(spec, mapping, program, costs, trace, wall_s=wall)
    return Run(result, trace, program, costs, mapping=mapping)


SERVING = Composer(_refuse, _lay_out, _infeasible, _build, _cost,
                   lambda spec, plan, program, costs: engine_for(spec)(None, program, costs), _measure)
"""A serving run on wafers, step by step (``runs.compose``)."""


SEARCH_LIMIT = 64
"""``search_mapping`` serves at most this many feasible candidates."""
SHOWN_INFEASIBLE = 8
"""``search_mapping`` returns at most this many candidates that do not fit (the largest), with reasons."""


def spread(items: list[Mapping], limit: int) -> list[Mapping]:
    """All of ``items`` when there are at most ``limit``, else ``limit`` of them evenly along the list:
    items[round(i · (n − 1) / (limit − 1))] for i = 0 … limit − 1 (the first and the last kept)."""
    n = len(items)
    if n <= limit:
        return items
    return [items[round(i * (n - 1) / (limit - 1))] for i in range(limit)]


OBJECTIVES: dict[str, tuple[str, Any]] = {
    "tpot": ("the highest tokens/s per request (the shortest time per output token), then tokens/s in all",
             lambda r: (r.tokens_per_s_per_request, r.tokens_per_s)),
    "ttft": ("the shortest time to first token, then the highest tokens/s per request",
             lambda r: (-r.ttft_s, r.tokens_per_s_per_request)),
    "throughput": ("the highest tokens/s of all requests (end to end), then tokens/s per request",
                   lambda r: (r.tokens_per_s, r.tokens_per_s_per_request)),
}
"""What ``search_mapping`` keeps the best of: objective -> (what it means, the sort key of a feasible
``ServeResult``, larger is better). ``tpot`` is the default."""


def search_mapping(spec: InferenceExperimentSpec, objective: str = "tpot",
                   spans: bool = False) -> tuple[Run, list[ServeResult]]:
    """The best mapping that fits by ``objective`` (``OBJECTIVES``; by default the highest tokens/s per
    request, then aggregate tokens/s). Every
    candidate grid of ``grid: auto`` (the rectangles that tile the wafer, largest first) is mapped, which
    costs little; the feasible ones are served (``spread`` to ``SEARCH_LIMIT`` of them when more fit, as
    for a tiny model, where every grid does). Returns the best and the results of the served candidates
    and of up to ``SHOWN_INFEASIBLE`` grids larger than every one that fits (infeasible, with their
    reasons), in candidate order; when nothing fits, the best is the first candidate, with its reason.
    Each is served by the executor ``spec`` names (``spans``: logged for a ``--trace``); the work of every
    one is estimated, and checked, before any runs."""
    better = entry(OBJECTIVES, objective, "objective")[1]  # an unknown one before any work
    if refused := hardware_kind(spec.hardware).refusal("grid search"):
        raise ConfigError(refused, source="--search")
    mappings = candidate_mappings(spec)
    served = spread([mp for mp in mappings if mp.feasible], SEARCH_LIMIT)
    largest = max((mp.grid[0] * mp.grid[1] for mp in served), default=0)
    shown = [mp for mp in mappings if not mp.feasible and mp.grid[0] * mp.grid[1] > largest]
    keep = {id(mp) for mp in served} | {id(mp) for mp in shown[:SHOWN_INFEASIBLE]}
    inf = spec.inference
    specs = [(spec.model_copy(update={"inference": inf.model_copy(update={
        "grid": f"{mp.grid[0]}x{mp.grid[1]}",
        "moe": inf.moe.model_copy(update={"expert_grids": mp.expert_grids})})}), mp)
        for mp in mappings if id(mp) in keep]
    each = [serving_estimate(s, mp) for s, mp in specs if mp.feasible]
    if each:  # every candidate's work counted before any is served
        largest = max(each, key=lambda e: e.bytes)
        check_serving(replace(largest, runs=len(each), visits=sum(e.visits for e in each),
                              draws=sum(e.draws for e in each), held=largest.held or largest.visits,
                              pieces=sum(e.pieces for e in each), contexts=sum(e.contexts for e in each)),
                      what="this search")
    candidates = [compose(SERVING, s, Options(check=False, spans=spans)) for s, _ in specs]
    feasible = [c for c in candidates if c.result.feasible]
    if not feasible:
        return candidates[0], [c.result for c in candidates]
    best = max(feasible, key=lambda c: better(c.result))
    return best, [c.result for c in candidates]
