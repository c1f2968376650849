"""Metrics computed from a finished run's trace, and the run's result value (docs/model.md §7).

Pure functions over the ``Trace``: nothing here runs the simulation, prints or writes files.
Throughput = tokens per step / step time; MFU = model FLOPs per step / (step time · peak FLOP/s), with
model FLOPs = 3 × forward (recomputation is work the hardware does, not model FLOPs).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..config.specs import ExperimentSpec
from ..model.shapes import LayerShapes
from ..model.vocabulary import Phase, Track
from ..sim.programs.plan import Trace
from .energy import training_energy

STEP_PHASES: tuple[Phase, ...] = tuple(Phase)
"""The step's own timeline, partitioned: these sum to ``step_cycles``."""

WALL_CLOCK_FIELDS = ("wall_s",)
"""Fields that measure the host, not the model: the only ones that differ between identical runs."""


@dataclass
class RunResult:
    """One simulated step. Sizes in bytes, time in cycles or seconds as the name says; each field's unit and
    meaning is in ``analysis.result_fields`` (docs/outputs.md)."""

    hardware: str
    model: str
    experts: int
    top_k: int
    seq_len: int
    batch_per_tile: int
    tiles: int
    global_batch: int
    activations: str
    attention_kernel: str
    routing: str
    fabric: str
    # how it was simulated (the rest of simulation.*): in the result, not only in a folder's manifest
    moe_mapping: str
    engine: str
    granularity: str
    placement: str
    compute: str
    seed: int
    feasible: bool
    infeasible_reason: str
    step_cycles: float = 0.0
    step_time_s: float = 0.0
    tokens_per_step: int = 0
    throughput_tokens_per_s: float = 0.0
    model_flops_per_step: float = 0.0
    mfu: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)
    io_bytes_in: float = 0.0
    io_bytes_out: float = 0.0
    io_in_utilisation: float = 0.0
    dispatched_bytes: float = 0.0
    combined_bytes: float = 0.0
    max_link_load_bytes: float = 0.0
    peak_sram_bytes_per_pe: int = 0
    sram_capacity_bytes_per_pe: int = 0
    binding_memory_phase: str = ""
    expert_load_imbalance: float = 0.0
    expert_region_load: float = 0.0
    expert_weight_wait_fraction: float = 0.0
    restreamed_for_recompute: bool = False
    micro_batches: int = 1
    systems: int = 1
    cluster_throughput_tokens_per_s: float = 0.0
    scaling_efficiency: float = 0.0
    tree_efficiency: float = 0.0
    energy_per_step_j: float | None = None
    joules_per_token: float | None = None
    power_w: float | None = None
    energy_fmac_j: float | None = None
    energy_sram_j: float | None = None
    energy_fabric_j: float | None = None
    energy_io_j: float | None = None
    energy_instruction_j: float | None = None
    energy_static_j: float | None = None
    events: int = 0
    wall_s: float = 0.0
    gpu: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values only (numpy scalars from the engine become floats and ints)."""
        return {k: _plain(v) for k, v in asdict(self).items() if k != "gpu" or v}

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False) + ("\n" if indent else "")

    def scalars(self) -> dict[str, Any]:
        """The flat fields (``phases`` flattened to ``phase_<name>_cycles``), e.g. for a CSV row."""
        out = {k: v for k, v in self.to_dict().items() if k not in ("phases", "gpu")}
        for name in STEP_PHASES:
            out[f"phase_{name}_cycles"] = self.phases.get(name, 0.0)
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value.item() if isinstance(value, np.generic) else value


def phase_cycles(trace: Trace) -> dict[str, float]:
    """Cycles of each phase of the step's own timeline (``STEP_PHASES``); they sum to the step."""
    totals: dict[str, float] = defaultdict(float)
    for track, name, start, end, _ in trace.spans:
        if track == Track.STEP:
            totals[name] += end - start
    return {name.value: float(totals.get(name, 0.0)) for name in STEP_PHASES}


def expert_imbalance(tokens: np.ndarray) -> float:
    """The busiest expert's tokens over the mean, averaged over the MoE layers (1 = perfectly balanced;
    0 for a dense model)."""
    routed = tokens[tokens.sum(axis=1) > 0] if tokens.size else tokens[:0]
    if not len(routed):
        return 0.0
    mean = routed.mean(axis=1)
    return float(np.mean(routed.max(axis=1) / np.where(mean > 0, mean, 1.0)))


def base_fields(spec: ExperimentSpec, batch_per_tile: int, micro_batches: int = 1) -> dict[str, Any]:
    """The fields that describe the configuration (known before simulating)."""
    m, t = spec.model, spec.training
    return {
        "hardware": spec.hardware.name, "model": m.name, "experts": m.experts, "top_k": m.top_k,
        "seq_len": t.seq_len, "batch_per_tile": batch_per_tile, "tiles": t.tiles,
        "global_batch": spec.cluster.systems * micro_batches * batch_per_tile * t.tiles,
        "activations": t.activations,
        "attention_kernel": t.attention_kernel, "routing": t.routing, "fabric": spec.simulation.fabric,
        "moe_mapping": spec.simulation.moe_mapping, "engine": spec.simulation.engine,
        "granularity": spec.simulation.granularity, "placement": spec.simulation.placement,
        "compute": spec.simulation.compute,
        "seed": t.seed, "micro_batches": micro_batches, "systems": spec.cluster.systems,
    }


def measure(spec: ExperimentSpec, batch_per_tile: int, trace: Trace, *, tokens: np.ndarray,
            peak_sram: int, capacity: int, binding: str, expert_load: float, wall_s: float,
            micro_batches: int = 1, alone_cycles: float | None = None,
            one_system_throughput: float | None = None) -> RunResult:
    """The result of a finished run, from its trace (one system's; ``alone_cycles``: the same system's
    step with no cluster around it, for the tree's efficiency; ``one_system_throughput``: the experiment on
    one system, for the scaling efficiency; 0 when it cannot run there)."""
    hw, m, t = spec.hardware, spec.model, spec.training
    step_s = trace.step_cycles / hw.clock_hz
    n_tokens = micro_batches * batch_per_tile * t.tiles * t.seq_len
    model_flops = n_tokens * LayerShapes(m).model_flops_per_token(t.seq_len)
    # exactly rounded sums: the same whatever order an engine recorded its expert ops in
    ops = trace.expert_ops
    wait = math.fsum(np.concatenate([np.asarray(o.weight_wait, dtype=np.float64)
                                     for o in ops] or [[]]).tolist())
    busy = math.fsum(np.concatenate([np.asarray(o.end, dtype=np.float64)
                                     - np.asarray(o.start, dtype=np.float64)
                                     for o in ops] or [[]]).tolist())
    systems = spec.cluster.systems
    return RunResult(
        **base_fields(spec, batch_per_tile, micro_batches), feasible=True, infeasible_reason="",
        step_cycles=float(trace.step_cycles), step_time_s=float(step_s), tokens_per_step=n_tokens,
        throughput_tokens_per_s=n_tokens / step_s, model_flops_per_step=model_flops,
        mfu=model_flops / (step_s * hw.totals()["peak_flops_per_s"]), phases=phase_cycles(trace),
        io_bytes_in=trace.io_bytes_in, io_bytes_out=trace.io_bytes_out,
        io_in_utilisation=trace.io_bytes_in / hw.io_bytes_per_cycle / trace.step_cycles,
        dispatched_bytes=trace.dispatched_bytes, combined_bytes=trace.combined_bytes,
        max_link_load_bytes=float(trace.max_link_load_bytes), peak_sram_bytes_per_pe=int(peak_sram),
        sram_capacity_bytes_per_pe=capacity, binding_memory_phase=binding,
        expert_load_imbalance=expert_imbalance(tokens), expert_region_load=expert_load,
        expert_weight_wait_fraction=wait / (wait + busy) if wait + busy > 0 else 0.0,
        restreamed_for_recompute=trace.restreamed_for_recompute, events=trace.events, wall_s=wall_s,
        cluster_throughput_tokens_per_s=systems * n_tokens / step_s,
        scaling_efficiency=1.0 if systems == 1 else (
            systems * n_tokens / step_s / (systems * one_system_throughput) if one_system_throughput
            else 0.0),
        tree_efficiency=(alone_cycles or trace.step_cycles) / trace.step_cycles,
        **training_energy(hw, m.bytes_per_value, trace, step_s=step_s, systems=systems, tokens=n_tokens),
    )


def infeasible(spec: ExperimentSpec, batch_per_tile: int, reason: str, *, peak_sram: int = 0,
               capacity: int = 0, binding: str = "", expert_load: float = 0.0, wall_s: float = 0.0,
               micro_batches: int = 1) -> RunResult:
    """A configuration that cannot run, with the reason (phase, bytes needed, capacity)."""
    return RunResult(**base_fields(spec, batch_per_tile, micro_batches), feasible=False,
                     infeasible_reason=reason,
                     tokens_per_step=(micro_batches * batch_per_tile * spec.training.tiles
                                      * spec.training.seq_len),
                     peak_sram_bytes_per_pe=peak_sram, sram_capacity_bytes_per_pe=capacity,
                     binding_memory_phase=binding, expert_region_load=expert_load, wall_s=wall_s)
