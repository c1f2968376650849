"""A serving run's result, measured from its trace (docs/model.md §11.5): time to first token, time per
output token, tokens per second per request and in all, where a decode step's time goes (arithmetic,
wavelets, waiting), per op kind and per stage, and each stage's SRAM per PE."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from ..config.inference import InferenceExperimentSpec
from ..model.serving import experts_per_grid
from ..sim.costing import Costs, split_costs
from ..sim.mapping import Mapping
from ..sim.plan import Trace
from ..sim.program import Program, Serve

__all__ = ["ServeResult", "infeasible_serving", "measure_serving"]


@dataclass(frozen=True)
class ServeResult:
    """One serving run. Times in seconds; ``*_cycles`` in clock cycles. Infeasible: ``feasible`` False
    and ``infeasible_reason`` says why (the figures are then 0)."""

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
    infeasible_reason: str = ""
    ttft_s: float = 0.0
    tpot_s: float = 0.0
    tokens_per_s_per_request: float = 0.0
    tokens_per_s: float = 0.0
    end_to_end_s: float = 0.0
    prefill_tokens_per_s: float = 0.0
    bottleneck: str = ""
    # one token through every stage, hand-offs included, at the longest context
    decode_step_cycles: float = 0.0
    # instructions (issue and kernel launches) / compute / communication / handoff / waiting
    decode_breakdown: dict[str, float] = field(default_factory=dict)
    prefill_breakdown: dict[str, float] = field(default_factory=dict)  # the same split, every prefill
    decode_by_op: dict[str, float] = field(default_factory=dict)  # cycles per token by op name, all layers
    layer_decode_cycles: float = 0.0  # one layer's decode step (the first stage's first layer)
    layer_by_op: dict[str, float] = field(default_factory=dict)
    per_stage: list[dict[str, Any]] = field(default_factory=list)
    max_output_len: int = 0  # the longest output whose KV cache fits every stage at this batch
    warnings: list[str] = field(default_factory=list)
    events: int = 0
    wall_s: float = 0.0
    systems_allowed: int = 0  # the wafers inference.systems allows (0: auto); ``systems`` is those used
    # MoE serving when asked for (sampled routing or expert_grids other than 1; docs/model.md §11.8):
    # routing, expert_grids G, experts_per_grid, grids in all; empty otherwise, and then left out
    moe: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.moe:  # nothing of MoE serving asked for: the result as it was before it existed
            del out["moe"]
        return out


def _moe(spec: InferenceExperimentSpec, mapping: Mapping) -> dict[str, Any]:
    """The MoE serving block: how the experts are placed and routed, when anything of it was asked."""
    inf, m = spec.inference, spec.model
    if not m.experts or (not inf.sampled and inf.expert_grids == 1):
        return {}
    return {"routing": inf.routing, "seed": inf.seed, "expert_grids": mapping.expert_grids,
            "experts_per_grid": experts_per_grid(m.experts, mapping.expert_grids),
            "grids": mapping.grids_used}


def _base(spec: InferenceExperimentSpec, mapping: Mapping) -> dict[str, Any]:
    inf = spec.inference
    return {"moe": _moe(spec, mapping),
            "hardware": spec.hardware.name, "model": spec.model.name, "prompt_len": inf.prompt_len,
            "output_len": inf.output_len, "batch": inf.batch, "grid": f"{mapping.grid[0]}x{mapping.grid[1]}",
            "stages": len(mapping.stages), "systems": mapping.systems,
            "systems_allowed": mapping.allowed or 0,
            "layers_per_stage": [len(s.layers) for s in mapping.stages], "kv_layout": inf.kv_layout,
            "max_output_len": min((s.memory.max_output for s in mapping.stages), default=0)}


def infeasible_serving(spec: InferenceExperimentSpec, mapping: Mapping, reason: str) -> ServeResult:
    return ServeResult(**_base(spec, mapping), feasible=False, infeasible_reason=reason)


def measure_serving(spec: InferenceExperimentSpec, mapping: Mapping, program: Program, costs: Costs,
                    trace: Trace, wall_s: float = 0.0) -> ServeResult:
    inf, clock, log = spec.inference, spec.hardware.clock_hz, trace.stages
    assert log is not None, "a serving run's trace has its stage log"
    serve = next(op for op in program.body if isinstance(op, Serve))
    first = log.done[:, 0]
    ttft = float(first.mean()) / clock
    if inf.output_len > 1:
        tpot = float(((log.done[:, -1] - first) / (inf.output_len - 1)).mean()) / clock
    else:
        tpot = 0.0
    end = log.end / clock
    by_op: dict[str, float] = defaultdict(float)
    for work, cost in zip(serve.stages, costs.stages, strict=True):
        for op, c in zip(work.decode, cost.decode, strict=True):
            by_op[op.name] += c.cycles
    handoff = sum(c.handoff_decode for c in costs.stages)
    decode = split_costs(c for cost in costs.stages for c in cost.decode)
    step = sum(decode.values()) + handoff
    waiting = float(log.waited.sum()) / max(inf.batch * inf.output_len, 1)
    breakdown = {**decode, "handoff": handoff, "waiting": waiting}
    prefill = {**split_costs(c for cost in costs.stages for c in cost.prefill),
               "handoff": sum(c.handoff_prefill for c in costs.stages)}
    first_stage = serve.stages[0]
    layer0 = first_stage.stage.layers[0]
    layer_ops: dict[str, float] = defaultdict(float)
    for op, c in zip(first_stage.decode, costs.stages[0].decode, strict=True):
        if op.layer == layer0:
            layer_ops[op.name] += c.cycles
    busy = log.busy / max(log.end, 1e-30)
    moe = _moe(spec, mapping)
    per_stage = [{"stage": w.stage.index, "wafer": w.stage.wafer,
                  "layers": [w.stage.layers[0], w.stage.layers[-1]],
                  "embedding": w.stage.embedding, "lm_head": w.stage.lm_head,
                  "prefill_cycles": c.prefill_cycles,
                  "decode_cycles": c.decode_cycles[-1] if c.decode_cycles else 0.0,
                  "handoff_decode_cycles": c.handoff_decode, "busy": float(busy[i]),
                  "waiting_cycles": float(log.waited[i]),
                  "sram_bytes_per_pe": {"weights": w.stage.memory.weights,
                                        "kv_cache": w.stage.memory.kv_cache,
                                        "activations": w.stage.memory.activations,
                                        "total": w.stage.memory.total,
                                        "usable": w.stage.memory.usable},
                  **(_stage_experts(w.stage, c) if moe else {})}
                 for i, (w, c) in enumerate(zip(serve.stages, costs.stages, strict=True))]
    return ServeResult(
        **_base(spec, mapping), feasible=True, ttft_s=ttft, tpot_s=tpot,
        tokens_per_s_per_request=1.0 / tpot if tpot else 0.0,
        tokens_per_s=inf.batch * inf.output_len / end if end else 0.0, end_to_end_s=end,
        prefill_tokens_per_s=inf.prompt_len / ttft if ttft else 0.0,
        bottleneck=_bottleneck(breakdown, by_op, busy), decode_step_cycles=step, decode_breakdown=breakdown,
        prefill_breakdown=prefill,
        decode_by_op=dict(by_op), layer_decode_cycles=sum(layer_ops.values()), layer_by_op=dict(layer_ops),
        per_stage=per_stage, warnings=list(costs.problems), events=trace.events, wall_s=wall_s)


def _stage_experts(stage: Any, cost: Any) -> dict[str, Any]:
    """A stage's grids and, with sampled routing, how its decode tokens used them: the share of (token,
    MoE layer) pairs with an expert on each grid, and the busiest expert's draws over the mean."""
    out: dict[str, Any] = {"grids": stage.grids}
    if cost.experts is not None:
        out |= {"expert_grid_use": list(cost.experts.grid_use), "expert_load": cost.experts.expert_load}
    return out


def _bottleneck(breakdown: dict[str, float], by_op: dict[str, float], busy: Any) -> str:
    """What a decode step's time is mostly made of, and the op that costs most."""
    total = sum(breakdown.values()) or 1.0
    part = max(breakdown, key=lambda k: breakdown[k])
    op = max(by_op, key=lambda k: by_op[k]) if by_op else ""
    what = {"instructions": "instruction issue and kernel launches on the PEs",
            "compute": "arithmetic on the PEs",
            "communication": "wavelets on the fabric (hop and ramp latency)",
            "handoff": "hand-offs between stages", "waiting": "requests queueing for a busy stage"}[part]
    text = f"{what}: {100 * breakdown[part] / total:.0f} % of a decode step"
    if op:
        text += f"; costliest op {op} ({100 * by_op[op] / total:.0f} %)"
    if len(busy) > 1 and part == "waiting":
        text += f"; busiest stage {int(busy.argmax())} ({100 * float(busy.max()):.0f} % busy)"
    return text
