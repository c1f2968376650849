"""Serving layouts beyond one pipeline of stages (docs/model.md §11.9, §11.10): speculative decoding, a
draft model on wafers of its own beside the target, and split prefill, the prompt prefilled on wafers
of its own and its KV cache handed to the decode wafers. Each maps its extra model or wafers with the
same mapping (``sim.programs.mapping``), costs them with the same pass and serves them as more stations of the
one iteration-level scheduler, at any load (one request alone included); the result's breakdowns stay
the target's one-token step, and the layout's figures are its own mapping and one request's pass
(``speculative``, ``split_prefill``), beside the run without it when one request is served alone."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..analysis.serving import ServeResult, measure_serving, prefill_breakdown
from ..model.load import requests_of
from ..model.serving import kv_bytes_per_token
from ..model.speculative import expected_tokens
from ..sim.cost.costing import Costs, cost_serving
from ..sim.cost.speculative import DraftCosts, prefill_path
from ..sim.cost.split_prefill import KvHandoff, kv_rate
from ..sim.programs.builders.serving import serving_program
from ..sim.programs.mapping import Mapping
from ..sim.programs.program import Program
from .auto_grid import map_for

if TYPE_CHECKING:
    from ..config.inference import InferenceExperimentSpec

__all__ = ["extra_wafers", "layout_costs", "layout_program", "layout_result"]


def _other(spec: InferenceExperimentSpec, output_len: int | None = None,
           **update: Any) -> InferenceExperimentSpec:
    """``spec`` with neither layout, ``update`` applied (``model`` at the top level, the rest to
    ``inference``; ``output_len`` to its load)."""
    model = update.pop("model", spec.model)
    if output_len is not None:
        update["load"] = spec.inference.load.model_copy(update={"output_len": output_len})
    inf = spec.inference.model_copy(update={"speculative": None, "disaggregation": None, **update})
    return spec.model_copy(update={"model": model, "inference": inf})


def _mapped(spec: InferenceExperimentSpec, objective: str = "tpot") -> tuple[Mapping, Program, Costs]:
    """The extra model's or wafers' mapping (``grid: auto`` by ``objective``: a draft's shortest decode
    step, prefill wafers' shortest prefill), program and one-request costs with their batch costs."""
    mapping = map_for(spec, objective)
    if not mapping.feasible:
        return mapping, Program(()), Costs()
    program = serving_program(spec, mapping)
    return mapping, program, cost_serving(program, spec)


def _where(mapping: Mapping) -> dict[str, Any]:
    return {"grid": f"{mapping.grid[0]}x{mapping.grid[1]}", "stages": len(mapping.stages),
            "systems": mapping.systems, "layers_per_stage": [len(s.layers) for s in mapping.stages]}


def extra_wafers(spec: InferenceExperimentSpec) -> dict[str, tuple[Mapping, Costs]] | str:
    """The layout's own wafers — the draft's (its shortest step, ``"draft"``) and the prefill wafers'
    (their shortest prefill, ``"prefill"``), whichever the run has — mapped and costed; or why there are
    none: no interconnect to join them, or a mapping that does not fit."""
    inf, sp = spec.inference, spec.inference.speculative
    if inf.interconnect is None:
        what = "a speculative draft" if sp is not None else "split prefill"
        return (f"{what} runs on wafers of its own: set inference.interconnect (a preset name, a path or a "
                "mapping)")
    found: dict[str, tuple[Mapping, Costs]] = {}
    if sp is not None:
        other, _, costs = _mapped(_other(spec, model=sp.draft, grid="auto", layers_per_stage="auto",
                                         systems="auto"))
        if not other.feasible:
            return f"the draft {sp.draft.name}: {other.reason}"
        found["draft"] = other, costs
    if inf.disaggregation is not None:
        wafers = inf.disaggregation.prefill_systems
        other, _, costs = _mapped(_other(spec, systems=wafers, output_len=1), "ttft")
        if not other.feasible:
            return f"the prefill wafers: {other.reason}"
        found["prefill"] = other, costs
    return found


def _wafers(mapping: Mapping) -> str:
    return f"{mapping.systems} wafer{'s' if mapping.systems > 1 else ''}"


def layout_program(spec: InferenceExperimentSpec, mapping: Mapping, found: dict[str, tuple[Mapping, Costs]],
                   members: bool = False) -> Program:
    """Speculative decoding, split prefill or both (docs/model.md §11.9, §11.10), at any load: the
    target's stages on ``mapping`` (feasible), and the draft and the prefill wafers ``found``
    (``extra_wafers``: each mapped by the same mapper on wafers of their own for the same requests) as
    more stations of the one scheduler — the draft one after the last stage, the prefill wafers' stages
    before the first; ``members``: log each iteration's requests (a trace's)."""
    sp = spec.inference.speculative
    program = serving_program(spec, mapping, requests_of(spec), members)
    layout: dict[str, Any] = {}
    if sp is not None:
        layout["speculative"] = (sp.tokens, sp.acceptance)
    if "prefill" in found:
        layout["prefill_pool"] = len(found["prefill"][0].stages)
    return replace(program, body=(replace(program.body[0], **layout),))


def layout_costs(spec: InferenceExperimentSpec, mapping: Mapping, found: dict[str, tuple[Mapping, Costs]],
                 program: Program) -> Costs:
    """The target's costs with the extra stations': the draft's (``sim.cost.speculative.DraftCosts``),
    each decode token a verify pass of K + 1 positions, and the prefill wafers', the last handing each
    finished prompt's KV cache over (``sim.cost.split_prefill.KvHandoff``)."""
    sp = spec.inference.speculative
    costs = cost_serving(program, spec)
    if sp is not None:
        for c in costs.stages:  # each decode token a verify pass of K + 1 positions
            assert c.batches is not None
            c.batches.width = sp.tokens + 1
        costs.draft = DraftCosts(spec, found["draft"][1], sp.tokens)
    if "prefill" in found:
        other, extra = found["prefill"]
        pool = [c.batches for c in extra.stages]
        per_token = kv_rate(spec, other, mapping)
        pool[-1] = KvHandoff(spec, pool[-1], per_token)
        costs.pool = tuple(pool)
    return costs


def layout_result(spec: InferenceExperimentSpec, mapping: Mapping, found: dict[str, tuple[Mapping, Costs]],
                  program: Program, costs: Costs, trace: Any, plain: ServeResult | None,
                  wall_s: float) -> ServeResult:
    """The served run's result: every wafer counts (``measure_serving``'s ``extra_systems``), and the
    layout's blocks (``speculative``, ``split_prefill``) say its own mapping and one request's pass;
    ``plain``: the same request served without them on the same mapping (one request alone), whose
    tokens/s and TTFT the blocks report beside."""
    sp, op = spec.inference.speculative, program.body[0]
    result = measure_serving(spec, mapping, program, costs, trace, wall_s=wall_s,
                             extra_systems=sum(m.systems for m, _ in found.values()))
    warnings = list(result.warnings)
    for _, extra in found.values():
        warnings += [p for p in extra.problems if p not in warnings]
    without = {} if plain is None else {"tokens_per_s_per_request_without": plain.tokens_per_s_per_request,
                                        "ttft_s_without": plain.ttft_s}
    update: dict[str, Any] = {"warnings": warnings}
    if sp is not None:
        other = found["draft"][0]
        passes = int((op.outputs() - 1)[~trace.batches.refused].sum()) if trace.batches is not None else 0
        block = {"draft": sp.draft.name, "tokens": sp.tokens, "acceptance": sp.acceptance,
                 "placement": f"{_wafers(other)} of its own, after the target's",
                 **_where(other), "expected_tokens_per_verify": expected_tokens(sp.tokens, sp.acceptance),
                 "rounds": passes, **_one_pass(spec, costs), **without}
        if plain is not None:
            block["speedup"] = result.tokens_per_s_per_request / max(plain.tokens_per_s_per_request, 1e-30)
        update["speculative"] = block
    if "prefill" in found:
        (other, extra), p = found["prefill"], spec.inference.load.prompt_len
        kv_cycles = costs.pool[-1].handoff(p)
        update["split_prefill"] = {
            "placement": f"{_wafers(other)} of its own, before the decode's", **_where(other),
            "kv_bytes_per_token": kv_bytes_per_token(spec.model) * spec.model.layers,
            "kv_busiest_link_bytes_per_token": costs.pool[-1].per_token,
            "kv_bytes": p * kv_bytes_per_token(spec.model) * spec.model.layers,
            "kv_handoff_cycles": kv_cycles, "kv_handoff_s": kv_cycles / spec.hardware.clock_hz,
            "prefill_cycles": prefill_path(extra), **without}
        update["prefill_breakdown"] = prefill_breakdown(extra)
        update["per_stage"] = [{**s, "prefill_cycles": 0.0} for s in result.per_stage]
    return replace(result, **update)


def _one_pass(spec: InferenceExperimentSpec, costs: Costs) -> dict[str, float]:
    """One request's first pass (a ``prompt_len`` prompt, its first token's context): the draft's
    prefill of the prompt and how much later than the target's it ends (the prefill wafers' with split
    prefill), the draft's round of K steps, the target's verify pass of K + 1 positions through every
    stage, and the hand-offs of a pass (the verified tokens back to the draft, the drafts across, the
    stages' between them)."""
    k, p, draft, hid = spec.inference.speculative.tokens, spec.inference.load.prompt_len, costs.draft, \
        spec.model.hidden_size
    stages = [c.batches for c in costs.stages]
    prefill = list(costs.pool) or stages
    target_prefill = sum(st.iteration(0, 0, [(p, 0, True)]) for st in prefill) + sum(
        st.handoff(p * hid) for st in prefill[:-1])
    draft_prefill = draft.iteration(0, 0, [(p, 0, True)])
    return {"draft_prefill_cycles": draft_prefill,
            "draft_prefill_late_cycles": max(0.0, draft_prefill - target_prefill),
            "draft_cycles_per_round": draft.iteration(1, p + 1, []),
            "verify_cycles_per_round": sum(st.iteration(1, p + 1, []) for st in stages),
            "handoff_cycles_per_round": draft.receive(k + 1) + draft.handoff(k) + sum(
                st.handoff((k + 1) * hid) for st in stages[:-1])}
