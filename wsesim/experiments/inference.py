"""Composition of a serving run: a validated ``kind: inference`` experiment -> stage mapping -> the
serving program (``sim.programs.builders.serving``) -> its costs, each stage's kernels simulated on its grid
(``sim.cost.costing``) -> requests through the pipeline by the executor its ``simulation.engine`` names
(``sim.executors.engines.ENGINES``, the same key and executors as training's) -> result. And the search for
the fastest mapping that fits (``wsesim infer --search``, over the rectangles that tile the wafer), as
``tune`` searches G for training. A sweep of serving points runs each through ``run_inference``
(``experiments.points``)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ..analysis.serving import ServeResult, infeasible_serving, measure_serving
from ..config.errors import ConfigError
from ..config.inference import InferenceExperimentSpec
from ..config.tables import entry
from ..sim.cost.costing import cost_serving
from ..sim.executors.engines import engine_for
from ..sim.programs.builders.serving import serving_program
from ..sim.programs.mapping import Mapping, candidate_mappings
from .auto_grid import map_for
from .gpu_inference import run_gpu_inference
from .runs import Run
from .serving_estimate import check_serving, estimate_serving, serving_estimate
from .serving_layouts import serve_layout_batches

__all__ = ["OBJECTIVES", "run_inference", "search_mapping", "serving_estimate"]


def run_inference(spec: InferenceExperimentSpec, *, check: bool = True, objective: str = "tpot",
                  spans: bool = False) -> Run:
    """Map (``grid: auto`` by ``objective``, ``auto_grid.map_for``), build and serve ``spec``; an infeasible
    mapping is a result with its reason. Work that cannot finish here (``experiments.estimate.
    check_serving``) is a ``ConfigError`` before anything is built (``check=False``: already checked, as a
    search checks all its candidates at once; ``spans``: a ``--trace`` will be written, its spans counted)."""
    if spec.hardware.kind == "gpu":  # the same scheduler on a node's GPUs (docs/model.md §13.7)
        return run_gpu_inference(spec, spans=spans)
    inf = spec.inference
    plain = None
    if inf.extra_wafers and inf.alone:
        # one request alone: the run without the draft or the prefill wafers too, on its mapping (the
        # figure the layout is held against, ``tokens_per_s_per_request_without``)
        alone = inf.model_copy(update={"speculative": None, "disaggregation": None})
        plain = run_inference(spec.model_copy(update={"inference": alone}), check=check, objective=objective,
                              spans=spans)
        if not plain.result.feasible:
            return Run(infeasible_serving(spec, plain.mapping, plain.result.infeasible_reason),
                       mapping=plain.mapping)
    t0 = time.perf_counter()
    mapping = map_for(spec, objective) if plain is None else plain.mapping
    if not mapping.feasible:
        return Run(infeasible_serving(spec, mapping, mapping.reason), mapping=mapping)
    if check:  # what cannot finish here is refused before the program is built
        check_serving(serving_estimate(spec, mapping, spans=spans))
    if inf.extra_wafers:  # the draft's or the prefill wafers are more stations of the scheduler

        result, program, costs, trace = serve_layout_batches(
            spec, mapping, plain.result if plain is not None else None, spans)
        return Run(replace(result, wall_s=time.perf_counter() - t0), trace, program, costs, mapping=mapping)
    program = serving_program(spec, mapping, members=spans)
    costs = cost_serving(program, spec)
    trace = engine_for(spec)(None, program, costs)
    result = measure_serving(spec, mapping, program, costs, trace, wall_s=time.perf_counter() - t0)
    return Run(result, trace, program, costs, mapping=mapping)


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
    if spec.hardware.kind == "gpu":
        raise ConfigError("expected a wafer with --search (it tries the grids that tile a wafer; on a GPU "
                          "set inference.tensor_parallel)", source="--search")
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
        check_serving(estimate_serving(largest.stages, largest.batch, largest.output_len, largest.engine,
                                       visits=sum(e.visits for e in each), runs=len(each),
                                       draws=sum(e.draws for e in each), arrival=largest.arrival,
                                       continuous=largest.continuous, held=largest.held or largest.visits,
                                       pieces=sum(e.pieces for e in each),
                                       contexts=sum(e.contexts for e in each)),
                      what="this search")
    candidates = [run_inference(s, check=False, spans=spans) for s, _ in specs]
    feasible = [c for c in candidates if c.result.feasible]
    if not feasible:
        return candidates[0], [c.result for c in candidates]
    best = max(feasible, key=lambda c: better(c.result))
    return best, [c.result for c in candidates]
