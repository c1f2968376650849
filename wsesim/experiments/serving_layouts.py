"""Serving layouts beyond one pipeline of stages (docs/model.md §11.9, §11.10): speculative decoding, a
draft model on wafers of its own beside the target, and split prefill, the prompt prefilled on wafers
of its own and its KV cache handed to the decode wafers. Each maps its extra model or wafers with the
same mapping (``sim.mapping``), costs them with the same pass, turns the target's costs into those of
the layout (``sim.speculative``, ``sim.split_prefill``) and serves them with the same executors; the
result's breakdowns stay the target's one-token step, and the layout's figures are its own mapping
(``speculative``, ``split_prefill``), beside the run without it."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ..analysis.serving import ServeResult, infeasible_serving, measure_serving, prefill_breakdown
from ..config.inference import InferenceExperimentSpec
from ..config.tables import entry, load
from ..model.load import requests_of
from ..model.serving import kv_bytes_per_token
from ..model.speculative import expected_tokens
from ..sim.builders.serving import serving_program
from ..sim.costing import Costs, cost_serving
from ..sim.engines import ENGINES
from ..sim.mapping import Mapping
from ..sim.program import Program, Serve
from ..sim.speculative import DraftCosts, prefill_path, speculative_costs
from ..sim.split_prefill import KvHandoff, kv_handoff, kv_rate, split_prefill_costs
from .auto_grid import map_for

__all__ = ["serve_layout", "serve_layout_batches"]


def _other(spec: InferenceExperimentSpec, **update: Any) -> InferenceExperimentSpec:
    """``spec`` with neither layout, ``update`` applied (``model`` at the top level, the rest to
    ``inference``)."""
    model = update.pop("model", spec.model)
    inf = spec.inference.model_copy(update={"speculative": None, "prefill_systems": None, **update})
    return spec.model_copy(update={"model": model, "inference": inf})


def _mapped(spec: InferenceExperimentSpec, objective: str = "tpot") -> tuple[Mapping, Program, Costs]:
    """The extra model's or wafers' mapping (``grid: auto`` by ``objective``: a draft's shortest decode
    step, prefill wafers' shortest prefill), program and one-request costs with their batch costs."""
    mapping = map_for(spec, objective)
    if not mapping.feasible:
        return mapping, Program(()), Costs()
    program = serving_program(spec, mapping)
    return mapping, program, cost_serving(program, spec, batches=True)


def _where(mapping: Mapping) -> dict[str, Any]:
    return {"grid": f"{mapping.grid[0]}x{mapping.grid[1]}", "stages": len(mapping.stages),
            "systems": mapping.systems, "layers_per_stage": [len(s.layers) for s in mapping.stages]}


def _extra(spec: InferenceExperimentSpec, mapping: Mapping) -> tuple[Mapping, Costs] | ServeResult:
    """The layout's own wafers — the draft's (its shortest step) or the prefill wafers' (their shortest
    prefill) — mapped and costed; or the infeasible result that says why there are none: no interconnect
    to join them, or a mapping that does not fit."""
    inf, sp = spec.inference, spec.inference.speculative
    if inf.interconnect is None:
        what = "a speculative draft" if sp is not None else "split prefill"
        return infeasible_serving(spec, mapping, f"{what} runs on wafers of its own: set inference."
                                  "interconnect (a preset name, a path or a mapping)")
    if sp is not None:
        other, _, costs = _mapped(_other(spec, model=sp.draft, grid="auto", layers_per_stage="auto",
                                         systems="auto"))
    else:
        other, _, costs = _mapped(_other(spec, systems=inf.prefill_systems, output_len=1), "ttft")
    if not other.feasible:
        who = f"the draft {sp.draft.name}" if sp is not None else "the prefill wafers"
        return infeasible_serving(spec, mapping, f"{who}: {other.reason}")
    return other, costs


def serve_layout(spec: InferenceExperimentSpec, engine: str, plain: ServeResult,
                 mapping: Mapping) -> tuple[ServeResult, Program | None, Costs | None, Any]:
    """Serve ``spec``'s layout on the target's ``mapping`` (feasible); ``plain`` is the run without it.
    Returns (result, program, costs, trace) of the layout; an extra model or wafers that do not fit, or
    wafers without an interconnect between them, is an infeasible result with its reason."""
    t0, inf = time.perf_counter(), spec.inference
    found = _extra(spec, mapping)
    if isinstance(found, ServeResult):
        return found, None, None, None
    other, extra_costs = found
    program = serving_program(spec, mapping)
    costs = cost_serving(program, spec, batches=True)
    serve = program.body[0]
    assert isinstance(serve, Serve)
    if inf.speculative is not None:
        serve, run_costs, figures = speculative_costs(spec, serve, costs, extra_costs)
        run_program = replace(program, body=(serve,))
    else:
        kv_bytes, kv_cycles = kv_handoff(spec, other, mapping)
        run_costs, run_program = split_prefill_costs(costs, extra_costs, kv_cycles), program
        figures = {"kv_bytes": kv_bytes, "kv_handoff_cycles": kv_cycles,
                   "kv_handoff_s": kv_cycles / spec.hardware.clock_hz,
                   "prefill_cycles": prefill_path(extra_costs)}
    trace = load(entry(ENGINES, engine, "engine"))(None, run_program, run_costs)
    # every wafer in use counted: the draft's or the prefill wafers' floor, price and share of the tokens
    result = measure_serving(spec, mapping, program, costs, trace, wall_s=time.perf_counter() - t0,
                             extra_systems=other.systems)
    common = {**_where(other), **figures, "tokens_per_s_per_request_without": plain.tokens_per_s_per_request,
              "ttft_s_without": plain.ttft_s}
    update: dict[str, Any] = {"warnings": [*result.warnings, *(p for p in extra_costs.problems
                                                               if p not in result.warnings)]}
    wafers = f"{other.systems} wafer{'s' if other.systems > 1 else ''}"
    if inf.speculative is not None:
        sp = inf.speculative
        update["speculative"] = {"draft": sp.draft.name, "tokens": sp.tokens, "acceptance": sp.acceptance,
                                 "placement": f"{wafers} of its own, after the target's",
                                 **common, "speedup": result.tokens_per_s_per_request
                                 / max(plain.tokens_per_s_per_request, 1e-30)}
    else:
        update["split_prefill"] = {"placement": f"{wafers} of its own, before the decode's", **common}
        update["prefill_breakdown"] = prefill_breakdown(extra_costs)
        update["per_stage"] = [{**s, "prefill_cycles": 0.0} for s in result.per_stage]
    return replace(result, **update), run_program, run_costs, trace


def serve_layout_batches(spec: InferenceExperimentSpec, engine: str, mapping: Mapping,
                         ) -> tuple[ServeResult, Program | None, Costs | None, Any]:
    """Speculative decoding or split prefill under continuous batching (docs/model.md §11.9, §11.10): the
    target's stages on ``mapping`` (feasible) and the draft, or the prefill wafers, mapped by the same
    mapper on wafers of their own for the same requests, as more stations of the one scheduler — the
    draft one after the last stage (``sim.speculative.DraftCosts``), the prefill wafers' stages before the
    first, the last handing each finished prompt's KV cache over (``sim.split_prefill.KvHandoff``). Every
    wafer counts (``measure_serving``'s ``extra_systems``). Returns (result, program, costs, trace); a draft
    or prefill wafers that do not fit, or wafers without an interconnect, is an infeasible result."""
    t0, sp = time.perf_counter(), spec.inference.speculative
    found = _extra(spec, mapping)
    if isinstance(found, ServeResult):
        return found, None, None, None
    other, extra = found
    program = serving_program(spec, mapping, requests_of(spec))
    layout = ({"speculative": (sp.tokens, sp.acceptance)} if sp is not None
              else {"prefill_pool": len(other.stages)})
    op = replace(program.body[0], **layout)
    program = replace(program, body=(op,))
    costs = cost_serving(program, spec)
    wafers = f"{other.systems} wafer{'s' if other.systems > 1 else ''}"
    if sp is not None:
        for c in costs.stages:  # each decode token a verify pass of K + 1 positions
            assert c.batches is not None
            c.batches.width = sp.tokens + 1
        costs.draft = DraftCosts(spec, extra, sp.tokens)
    else:
        pool = [c.batches for c in extra.stages]
        per_token = kv_rate(spec, other, mapping)
        pool[-1] = KvHandoff(spec, pool[-1], per_token)
        costs.pool = tuple(pool)
    trace = load(entry(ENGINES, engine, "engine"))(None, program, costs)
    result = measure_serving(spec, mapping, program, costs, trace, wall_s=time.perf_counter() - t0,
                             extra_systems=other.systems)
    warnings = [*result.warnings, *(p for p in extra.problems if p not in result.warnings)]
    if sp is not None:
        passes = int((op.outputs() - 1)[~trace.batches.refused].sum()) if trace.batches is not None else 0
        block = {"draft": sp.draft.name, "tokens": sp.tokens, "acceptance": sp.acceptance,
                 "placement": f"{wafers} of its own, a station of the scheduler after the target's stages",
                 **_where(other), "expected_tokens_per_verify": expected_tokens(sp.tokens, sp.acceptance),
                 "rounds": passes}
        return replace(result, speculative=block, warnings=warnings), program, costs, trace
    block = {"placement": f"{wafers} of its own, stations of the scheduler before the decode's",
             **_where(other),
             "kv_bytes_per_token": kv_bytes_per_token(spec.model) * spec.model.layers,
             "kv_busiest_link_bytes_per_token": per_token}
    return replace(result, split_prefill=block, warnings=warnings,
                   prefill_breakdown=prefill_breakdown(extra),
                   per_stage=[{**s, "prefill_cycles": 0.0} for s in result.per_stage]), program, costs, trace
