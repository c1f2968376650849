"""A serving run's result, measured from its trace (docs/model.md §11.5, §11.7): time to first token,
time per output token and end to end (means, medians and 99th percentiles over requests), inter-token
latency (the same over every gap between two outputs of a request), tokens per second per request, in
all and per system, goodput against the latency targets, where a decode step's time goes (arithmetic,
wavelets, waiting), per op kind and per stage, and each stage's SRAM per PE; and each request's times
(``RequestTimes``, the rows of ``requests.csv``, in ``analysis.requests``, with the figures over
requests)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..model.serving import experts_per_grid
from ..sim.cost.costing import Costs, split_costs
from ..sim.programs.builders.software import launches
from ..sim.programs.mapping import Mapping
from ..sim.programs.plan import Trace
from ..sim.programs.program import Program, ServeBatches
from .bottleneck import Load, bottleneck
from .energy import WAFER_ACCOUNTING, Accounting
from .requests import RequestTimes, load_figures, nan_mean, request_times

if TYPE_CHECKING:
    from ..config.inference import InferenceExperimentSpec

__all__ = ["ServeResult", "infeasible_serving", "measure_serving", "prefill_breakdown"]


@dataclass(frozen=True)
class ServeResult:
    """One serving run. Times in seconds; ``*_cycles`` in clock cycles. Infeasible: ``feasible`` False
    and ``infeasible_reason`` says why (the figures are then 0). Each field's unit and meaning is in
    ``analysis.serving_fields`` (docs/outputs.md)."""

    hardware: str
    model: str
    prompt_len: int
    output_len: int
    batch: int
    grid: str
    stages: int
    systems: int
    layers_per_stage: list[int]
    kv_layout: str
    feasible: bool
    software: str = "research"
    decode_launches: int = 0
    infeasible_reason: str = ""
    ttft_s: float = 0.0
    tpot_s: float = 0.0
    tokens_per_s_per_request: float = 0.0
    tokens_per_s: float = 0.0
    end_to_end_s: float = 0.0
    prefill_tokens_per_s: float = 0.0
    bottleneck: str = ""
    decode_step_cycles: float = 0.0
    decode_breakdown: dict[str, float] = field(default_factory=dict)
    prefill_breakdown: dict[str, float] = field(default_factory=dict)
    decode_by_op: dict[str, float] = field(default_factory=dict)
    layer_decode_cycles: float = 0.0
    layer_by_op: dict[str, float] = field(default_factory=dict)
    per_stage: list[dict[str, Any]] = field(default_factory=list)
    max_output_len: int = 0
    warnings: list[str] = field(default_factory=list)
    events: int = 0
    wall_s: float = 0.0
    systems_allowed: int = 0
    system: str = "wafer"
    moe: dict[str, Any] = field(default_factory=dict)
    arrival: str = "together"
    batching: str = "none"
    requests: int = 0
    refused: int = 0
    ttft_p50_s: float = 0.0
    ttft_p99_s: float = 0.0
    tpot_p50_s: float = 0.0
    tpot_p99_s: float = 0.0
    itl_s: float = 0.0
    itl_p50_s: float = 0.0
    itl_p99_s: float = 0.0
    e2e_mean_s: float = 0.0
    e2e_p50_s: float = 0.0
    e2e_p99_s: float = 0.0
    queueing_s: float = 0.0
    tokens_per_s_per_system: float = 0.0
    mean_batch: float = 0.0
    largest_batch: int = 0
    # the latency targets and what met them: None when no targets are given (never 0)
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    slo_attainment: float | None = None
    goodput_requests_per_s: float | None = None
    goodput_tokens_per_s: float | None = None
    warmup: int = 0
    prompt_tokens_per_s: float = 0.0
    capacity_requests_per_s: float = 0.0
    kv_block: int = 0
    kv_blocks: int = 0
    preemption: str = ""
    preemptions: int = 0
    swap_s: float = 0.0
    energy_j: float | None = None
    energy_by_part_j: dict[str, float] = field(default_factory=dict)
    power_w: float | None = None
    joules_per_token: float | None = None
    tokens_per_s_per_kw: float | None = None
    usd_per_million_tokens: float | None = None
    energy_events: dict[str, float] = field(default_factory=dict)
    speculative: dict[str, Any] = field(default_factory=dict)
    split_prefill: dict[str, Any] = field(default_factory=dict)
    gpu: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Every field, those of a feature that is off left out (MoE serving's block, speculative
        decoding's, split prefill's): a run without it writes what it wrote before the feature existed."""
        out = asdict(self)
        if not self.moe:
            del out["moe"]
        return {k: v for k, v in out.items() if k not in ("speculative", "split_prefill", "gpu") or v}


def _moe(spec: InferenceExperimentSpec, mapping: Mapping) -> dict[str, Any]:
    """The MoE serving block: how the experts are placed and routed, when anything of it was asked."""
    inf, m = spec.inference, spec.model
    if not m.experts or (not inf.moe.sampled and inf.moe.expert_grids == 1):
        return {}
    return {"routing": inf.moe.routing, "seed": inf.load.seed, "expert_grids": mapping.expert_grids,
            "experts_per_grid": experts_per_grid(m.experts, mapping.expert_grids),
            "grids": mapping.grids_used}


def _base(spec: InferenceExperimentSpec, mapping: Mapping) -> dict[str, Any]:
    inf = spec.inference
    return {"moe": _moe(spec, mapping),
            "hardware": spec.hardware.name, "model": spec.model.name, "prompt_len": inf.load.prompt_len,
            "output_len": inf.load.output_len, "batch": inf.scheduler.batch,
            "grid": f"{mapping.grid[0]}x{mapping.grid[1]}",
            "stages": len(mapping.stages), "systems": mapping.systems, "system": spec.hardware.system,
            "systems_allowed": mapping.allowed or 0,
            "layers_per_stage": [len(s.layers) for s in mapping.stages], "kv_layout": inf.kv_layout,
            "software": inf.software,
            "max_output_len": min((s.memory.max_output for s in mapping.stages), default=0)}


def infeasible_serving(spec: InferenceExperimentSpec, mapping: Mapping, reason: str) -> ServeResult:
    return ServeResult(**_base(spec, mapping), feasible=False, infeasible_reason=reason,
                       **_load_keys(spec))


def _all_refused(spec: InferenceExperimentSpec, mapping: Mapping, times: Any,
                 paged: tuple[int, int, str] | None = None) -> ServeResult:
    """The infeasible result of a load whose every request was refused (its KV cache fits no stage even
    alone; ``paged``: its last context's blocks exceed the pool), naming the smallest such request."""
    n = len(times.prompt)
    smallest = int(np.argmin(times.prompt + times.output))
    room = (f"the pool of {paged[1]:,} blocks of {paged[0]:,} tokens" if paged
            else f"{mapping.grid[0]}x{mapping.grid[1]} PEs a stage")
    reason = (f"every request refused: each one's KV cache (prompt + output) fits no stage even alone "
              f"({n:,} request{'s' if n != 1 else ''}, the smallest {int(times.prompt[smallest]):,} + "
              f"{int(times.output[smallest]):,} tokens, on {room})")
    return ServeResult(**_base(spec, mapping), feasible=False, infeasible_reason=reason, requests=n,
                       refused=n, **_load_keys(spec))


def _load_keys(spec: InferenceExperimentSpec) -> dict[str, Any]:
    inf = spec.inference
    slo = {"slo_ttft_s": inf.slo.ttft_s, "slo_tpot_s": inf.slo.tpot_s} if inf.slo else {}
    sched = inf.scheduler
    paged = {"kv_block": sched.kv_block, "preemption": sched.preempt_by} if sched.kv_block else {}
    batching = "continuous" if sched.continuous else "none"
    return {"arrival": inf.load.arrival, "batching": batching, **slo, **paged}


def measure_serving(spec: InferenceExperimentSpec, mapping: Mapping, program: Program, costs: Costs,
                    trace: Trace, wall_s: float = 0.0, extra_systems: int = 0,
                    accounting: Accounting = WAFER_ACCOUNTING) -> ServeResult:
    """The result of a serving run (see the module's docstring). ``extra_systems``: wafers the run uses
    beside ``mapping``'s (a speculative draft's, split prefill's), counted in ``systems``, its floor's
    energy, its price and its per-system figures; ``accounting``: its machine's energy and words."""
    inf, clock = spec.inference, spec.hardware.clock_hz
    whole = request_times(spec, program, trace)
    if whole.refused.all():  # nothing served: no latency to report, not a run whose latencies are 0
        return _all_refused(spec, mapping, whole, getattr(program.body[0], "kv_block", None))
    times = whole.after(inf.load.warmup)  # the figures over requests: those after the warm-up
    load = {**_load_keys(spec), **load_figures(spec, times, trace),
            "requests": len(whole.prompt), "refused": int(whole.refused.sum())}  # the run's, warm-up included
    serve = program.body[0]
    assert isinstance(serve, ServeBatches) and trace.batches is not None
    # the requests served, from the first arrival to the last finish
    served = ~times.refused
    ttft, tpot = nan_mean(times.ttft), nan_mean(times.tpot)
    end = float(np.nanmax(whole.finished)) if (~whole.refused).any() else 0.0  # the run's end
    last = float(np.nanmax(times.finished)) if served.any() else 0.0
    span = last - float(times.arrival[served].min()) if served.any() else 0.0
    tokens = float(times.output[served].sum()) / span if span else 0.0
    produced = int(whole.output[~whole.refused].sum())  # every token the energy was spent on
    steady = {**_steady(spec, whole, times, trace, span), **_paged(serve, trace, clock)}
    busy_cycles, end_cycles = trace.batches.busy, trace.batches.end_cycle
    prompt_rate = nan_mean(times.prompt[served] / times.ttft[served]) if served.any() else 0.0
    breakdown, by_op, step, layer_ops = _decode(serve, costs, tpot * clock if tpot else 0.0)
    prefill = prefill_breakdown(costs)
    busy = busy_cycles / max(end_cycles, 1e-30)
    per_stage = _per_stage(serve, costs, trace, busy, _moe(spec, mapping))
    systems = mapping.systems + extra_systems
    energy = accounting.energy(spec, costs, trace, busy_cycles, mapping, seconds=end, systems=systems,
                               tokens=produced)
    return ServeResult(
        **{**_base(spec, mapping), "systems": systems}, **energy, feasible=True, ttft_s=ttft, tpot_s=tpot,
        tokens_per_s_per_request=1.0 / tpot if tpot else 0.0, tokens_per_s=tokens, end_to_end_s=end,
        prefill_tokens_per_s=prompt_rate, tokens_per_s_per_system=tokens / systems,
        bottleneck=bottleneck(breakdown, by_op, busy, _load(spec, load, ttft, prefill), accounting.words),
        decode_step_cycles=step, decode_breakdown=breakdown, prefill_breakdown=prefill,
        decode_by_op=dict(by_op), layer_decode_cycles=sum(layer_ops.values()), layer_by_op=dict(layer_ops),
        decode_launches=launches(op for work in serve.stages for op in work.decode),
        per_stage=per_stage, warnings=[*costs.problems, *steady.pop("warnings", [])], events=trace.events,
        wall_s=wall_s, **load, **steady)


def _decode(serve: ServeBatches, costs: Costs,
            tpot_cycles: float) -> tuple[dict[str, float], dict[str, float], float, dict[str, float]]:
    """The decode step's cycles by kind of work (with the hand-offs and the time a token waited beyond its
    step, ``tpot_cycles`` being its time per output token), by op over every stage, the step's whole
    cycles, and the first stage's first layer's cycles by op."""
    step_cycles = sum(sum(c.cycles for c in cost.decode) for cost in costs.stages)
    handoffs = sum(c.handoff_decode for c in costs.stages)
    waiting = max(0.0, tpot_cycles - step_cycles - handoffs) if tpot_cycles else 0.0
    by_op: dict[str, float] = defaultdict(float)
    for work, cost in zip(serve.stages, costs.stages, strict=True):
        for op, c in zip(work.decode, cost.decode, strict=True):
            by_op[op.name] += c.cycles
    decode = split_costs(c for cost in costs.stages for c in cost.decode)
    step = sum(decode.values()) + handoffs
    first_stage = serve.stages[0]
    layer0 = first_stage.stage.layers[0]
    layer_ops: dict[str, float] = defaultdict(float)
    for op, c in zip(first_stage.decode, costs.stages[0].decode, strict=True):
        if op.layer == layer0:
            layer_ops[op.name] += c.cycles
    return {**decode, "handoff": handoffs, "waiting": waiting}, by_op, step, layer_ops


def _per_stage(serve: ServeBatches, costs: Costs, trace: Trace, busy: np.ndarray,
               moe: dict[str, Any]) -> list[dict[str, Any]]:
    """Each stage's row of the result: its layers, cycles, busy share, waits and SRAM, and its experts'."""
    assert trace.batches is not None
    waited, use = trace.batches.waited, trace.batches.expert_use or (None,) * len(serve.stages)
    return [{"stage": w.stage.index, "wafer": w.stage.wafer,
                  "layers": [w.stage.layers[0], w.stage.layers[-1]],
                  "embedding": w.stage.embedding, "lm_head": w.stage.lm_head,
                  "prefill_cycles": c.prefill_cycles,
                  "decode_cycles": c.decode_step,
                  "handoff_decode_cycles": c.handoff_decode, "busy": float(busy[i]),
                  "waiting_cycles": float(waited[i]),
                  "sram_bytes_per_pe": {"weights": w.stage.memory.weights,
                                        "kv_cache": w.stage.memory.kv_cache,
                                        "activations": w.stage.memory.activations,
                                        "total": w.stage.memory.total,
                                        "usable": w.stage.memory.usable},
                  **(_stage_experts(w.stage, use[i]) if moe else {})}
                 for i, (w, c) in enumerate(zip(serve.stages, costs.stages, strict=True))]


def _load(spec: InferenceExperimentSpec, load: dict[str, Any], ttft: float,
          prefill: dict[str, float]) -> Load:
    """The figures ``_bottleneck`` tells queueing by, from the result's own."""
    return Load(cap=spec.inference.scheduler.batch, largest=int(load.get("largest_batch", 0)),
                queueing_s=float(load.get("queueing_s") or 0.0), ttft_s=ttft,
                prefill_handoff=prefill.get("handoff", 0.0),
                prefill_kernels=sum(v for k, v in prefill.items() if k != "handoff"))


def _steady(spec: InferenceExperimentSpec, whole: RequestTimes, times: RequestTimes, trace: Trace,
            span: float) -> dict[str, Any]:
    """A continuously batched run's steady-state figures (``ServeResult.warmup`` …
    ``capacity_requests_per_s``) and, when the requests arrived faster than the run could serve them, the
    warning that says so. The capacity is the lower of two bounds: the busiest stage's (the requests served
    over its busy seconds) and admission's (Little's law: at most ``inference.scheduler.batch`` in flight,
    each for its mean time from admission to its last token, so at most batch / that time a second)."""
    assert trace.batches is not None
    clock, served = spec.hardware.clock_hz, ~whole.refused
    busiest = float(trace.batches.busy.max()) / clock if trace.batches.busy.size else 0.0
    stage_bound = float(served.sum()) / busiest if busiest else 0.0
    held = (whole.cycles["finished"] - whole.cycles["admitted"])[served] / clock
    cap = spec.inference.scheduler.batch
    admission = cap / float(held.mean()) if held.size and held.mean() > 0 else stage_bound
    capacity = min(stage_bound, admission) if stage_bound else admission
    counted = ~times.refused
    out: dict[str, Any] = {"warmup": spec.inference.load.warmup, "capacity_requests_per_s": capacity,
                           "prompt_tokens_per_s": float(times.prompt[counted].sum()) / span if span else 0.0}
    arrivals = whole.arrival[served]
    window = float(arrivals.max() - arrivals.min()) if arrivals.size > 1 else 0.0
    offered = (arrivals.size - 1) / window if window else 0.0
    if window and (busiest > window or offered > admission):
        mean = float(held.mean())
        why = (f"at most {cap} in flight (inference.scheduler.batch), each {mean:,.3g} s from admission "
               "to its last token" if admission < stage_bound or not busiest > window else
               f"the busiest stage was busy {busiest:,.3g} s for requests that arrived over {window:,.3g} s")
        out["warnings"] = [f"the offered load ({offered:,.3g} requests/s) exceeds the measured capacity "
                           f"({capacity:,.3g} requests/s: {why}): the queue grows for as long as the run "
                           "lasts, and its latencies are the run's length's, not a steady state's"]
    return out


def _paged(serve: ServeBatches, trace: Trace, clock: float) -> dict[str, Any]:
    """A paged cache's pool, its preemptions and the I/O's seconds swapping (none without blocks)."""
    if serve.kv_block is None or trace.batches is None:
        return {}
    kv = trace.batches.kv_events
    swaps = kv[kv[:, 0] > 0] if len(kv) else kv
    return {"kv_blocks": serve.kv_block[1], "preemptions": trace.batches.preemptions,
            "swap_s": float((swaps[:, 3] - swaps[:, 2]).sum()) / clock if len(swaps) else 0.0}


def _stage_experts(stage: Any, use: tuple[tuple[float, ...], float] | None) -> dict[str, Any]:
    """A stage's grids and, with sampled routing, how its decode tokens used them over the run
    (``BatchExperts.use``): the share of (token, MoE layer) pairs with an expert on each grid, and the
    busiest expert's draws over the mean."""
    out: dict[str, Any] = {"grids": stage.grids}
    if use is not None:
        out |= {"expert_grid_use": list(use[0]), "expert_load": use[1]}
    return out


def prefill_breakdown(costs: Costs) -> dict[str, float]:
    """Every stage's prefill kernels split by what they are (``split_costs``), and their hand-offs."""
    return {**split_costs(c for cost in costs.stages for c in cost.prefill),
            "handoff": sum(c.handoff_prefill for c in costs.stages)}
