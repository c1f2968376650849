"""The reference engine (plain SimPy) against the fast engine: the same step on a family of small
configurations, and a reduced WSE-2 wafer with a few layers of Qwen3-30B-A3B.

Both engines must give the same step cycles, phase totals, link schedule, expert-op timeline, gradient
departures, I/O bytes and executed FLOPs. They agree bit for bit on the tiny wafer (round numbers) and to
~1e-16 relative here on WSE-2 numbers (~1e-13 on the full 48-layer step, scripts/bench_reference.py);
the tolerance RTOL = 1e-9 is there only because the engines round
differently — the fast engine places tile i at start + i·cycles where the reference adds one tile after
another, its gradient link uses a closed form of the FIFO recurrence over a batch, and it sums FLOPs per
array rather than per op. A modelling difference is a whole op, chunk or gradient: >= 1e-6 relative.
"""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest

from wsesim.analysis.chrome_trace import chrome_trace
from wsesim.analysis.results import STEP_PHASES, WALL_CLOCK_FIELDS
from wsesim.analysis.wafer import wafer_maps
from wsesim.config.loader import load_experiment, load_experiment_data
from wsesim.experiments.runner import simulate_experiment
from wsesim.experiments.runs import Run

RTOL = 1e-9

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2},
        "simulation": {"granularity": "pe"}}
BIG_SRAM = {"hardware.pe.sram": "1 MiB"}  # so that tiny staging buffers and odd expert counts stay feasible
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96}
TREE = {"name": "test-tree", "fan_out": 2, "link_bandwidth": "2 GB/s", "latency": "37 ns"}  # 2 of tiny8's 4 B/cycle

TINY_CASES = [
    {},  # recompute, uniform, top_k 2, G=2
    {"training.activations": "store"},
    {"training.routing": "zipf:1.5", "training.tiles": 3},
    {"model.top_k": 1, "training.tiles": 1},
    {"model.experts": 3, "training.routing": "zipf:1.2"},
    {"model.experts": 6, "model.top_k": 1},
    # experts share regions (11 experts on 10 tiles, 17 on 16): regions run their experts in turn
    {**BIG_SRAM, "model.experts": 11, "training.routing": "zipf:1.2"},
    {**BIG_SRAM, "model.experts": 17, "model.top_k": 1, "hardware.runtime.staging_buffer": "512 B"},
    # staging buffers that fill: the stream blocks, gradients stall, tensors come in pieces
    {"hardware.runtime.staging_buffer": "256 B"},  # a layer does not fit: recompute re-streams it
    {**BIG_SRAM, "hardware.runtime.staging_buffer": "1 KiB", "training.activations": "store",
     "training.routing": "zipf:2"},
    {**BIG_SRAM, "hardware.runtime.staging_buffer": "64 B", "training.routing": "zipf:2", "training.tiles": 3},
    {**BIG_SRAM, "model.experts": 11, "hardware.runtime.staging_buffer": "256 B", "training.activations": "store",
     "model.top_k": 1},
    # gradients of different sizes handed over in the same cycle (the fast engine once ordered them by
    # how it had laid the phase out, which moved ~1 000 cycles between gradient and weight stall)
    {**BIG_SRAM, "training.seq_len": 8, "training.batch_per_tile": 1, "model.top_k": 1, "model.experts": 11,
     "training.activations": "store", "hardware.runtime.staging_buffer": "1 KiB", "training.seed": 3},
    {"model.shared_expert_intermediate": 32, "hardware.runtime.staging_buffer": "256 B"},
    {"simulation.fabric": "packet", "simulation.placement": "random", "training.seed": 7},
    # in place: every expert on the whole wafer, one after another; copies made and summed on the wafer
    {"simulation.moe_mapping": "in_place"},
    {"simulation.moe_mapping": "in_place", "training.activations": "store", "training.routing": "zipf:1.5"},
    {**BIG_SRAM, "simulation.moe_mapping": "in_place", "model.experts": 11, "hardware.runtime.staging_buffer": "256 B",
     "model.top_k": 1, "training.tiles": 3},
    # attention recomputed once (its output kept), gradients streamed out in fp32
    {"training.attention_recompute": "once", "training.weight_gradient_dtype": "fp32",
     "hardware.runtime.staging_buffer": "512 B"},
    # dense layers (issue 11): every layer, or the first of an MoE model; SwiGLU, or a GELU parallel block
    DENSE,
    {**DENSE, "training.activations": "store", "hardware.runtime.staging_buffer": "256 B"},
    {**DENSE, "model.ffn_activation": "gelu", "model.parallel_block": True, "training.tiles": 3},
    {"model.dense_layers": 1, "model.ffn_intermediate": 96, "training.routing": "zipf:1.5"},
    # gradient accumulation: micro-batches back to back, each streaming every weight again
    {"training.micro_batches": 3, "hardware.runtime.staging_buffer": "512 B"},
    {**DENSE, "training.global_batch": 12, "training.activations": "store"},
    # a cluster: chunks down and gradients up a tree (slower ports than the wafer's, a latency per level)
    {"cluster.systems": 8, "cluster.interconnect": TREE},
    {**DENSE, "cluster.systems": 5, "cluster.interconnect": TREE, "training.micro_batches": 2,
     "hardware.runtime.staging_buffer": "256 B"},
]

# a reduced WSE-2 (40 x 48 PEs, block:4) with two layers of Qwen3-30B-A3B; 2 MiB per PE so that the full
# vocabulary's LM head fits on so few PEs. Its 6 KiB-per-PE staging buffer holds less than one layer.
WSE2 = {"hardware.mesh.rows": 40, "hardware.mesh.cols": 48, "simulation.granularity": "block:4",
        "hardware.pe.sram": "2 MiB", "model.layers": 2, "training.seq_len": 256, "training.batch_per_tile": 1}
WSE2_CASES = [
    {},  # recompute, top_k 8, G=1
    {"training.activations": "store", "training.tiles": 2, "training.routing": "zipf:1.2"},
    {"model.top_k": 1, "training.tiles": 3, "training.batch_per_tile": 2},
    {"simulation.moe_mapping": "in_place", "training.tiles": 2},
]


def _both(load, overrides: dict) -> tuple[Run, Run]:
    runs = tuple(simulate_experiment(load({**overrides, "simulation.engine": engine}).spec)
                 for engine in ("fast", "reference"))
    assert runs[0].result.feasible, runs[0].result.infeasible_reason
    return runs


def _tiny(overrides: dict):
    return load_experiment_data(TINY, overrides=overrides)


def _wse2(overrides: dict):
    return load_experiment(overrides={**WSE2, **overrides})


@pytest.fixture(scope="module", params=[("tiny", c) for c in TINY_CASES] + [("wse2", c) for c in WSE2_CASES],
                ids=[f"tiny{json.dumps(c)}" for c in TINY_CASES] + [f"wse2{json.dumps(c)}" for c in WSE2_CASES])
def pair(request) -> tuple[Run, Run]:
    kind, overrides = request.param
    return _both(_tiny if kind == "tiny" else _wse2, overrides)


def test_same_step_and_phases(pair) -> None:
    fast, ref = (r.result for r in pair)
    assert ref.step_cycles == pytest.approx(fast.step_cycles, rel=RTOL)
    for name in STEP_PHASES:
        assert ref.phases[name] == pytest.approx(fast.phases[name], rel=RTOL, abs=RTOL * fast.step_cycles), name
    assert sum(ref.phases.values()) == pytest.approx(ref.step_cycles, rel=1e-12)


def test_same_bytes_flops_and_results(pair) -> None:
    (fast, ref), (ft, rt) = (r.result for r in pair), (r.trace for r in pair)
    assert (rt.io_bytes_in, rt.io_bytes_out) == pytest.approx((ft.io_bytes_in, ft.io_bytes_out), rel=RTOL)
    assert rt.executed_flops == pytest.approx(ft.executed_flops, rel=RTOL)
    assert (rt.dispatched_bytes, rt.combined_bytes, rt.max_link_load_bytes) == (
        ft.dispatched_bytes, ft.combined_bytes, ft.max_link_load_bytes)
    assert rt.restreamed_for_recompute == ft.restreamed_for_recompute
    assert rt.staging_held_at_end == 0.0  # every chunk given back exactly once (a get of bytes never put raises)
    f, r = fast.to_dict(), ref.to_dict()
    assert (f["engine"], r["engine"]) == ("fast", "reference")  # a result says which engine made it
    for key in set(f) - {*WALL_CLOCK_FIELDS, "events", "phases", "engine"}:  # events: each engine counts its own
        assert r[key] == (pytest.approx(f[key], rel=RTOL) if isinstance(f[key], float) else f[key]), key


def test_same_link_schedule(pair) -> None:
    """Every chunk starts and arrives at the same cycle, and every gradient leaves at the same cycle."""
    ft, rt = (r.trace for r in pair)
    assert rt.io_in.names == ft.io_in.names
    np.testing.assert_allclose(rt.io_in.start, ft.io_in.start, rtol=RTOL)
    np.testing.assert_allclose(rt.io_in.arrival, ft.io_in.arrival, rtol=RTOL)
    assert rt.gradients == ft.gradients
    for f, r in zip(ft.gradient_batches, rt.gradient_batches, strict=True):
        for a, b in zip(f, r, strict=True):
            np.testing.assert_allclose(b, a, rtol=RTOL)


def _expert_timeline(trace) -> dict[tuple, list[tuple[float, float, float, bool]]]:
    out = defaultdict(list)
    for ops in trace.expert_ops:
        for i, e in enumerate(ops.experts.tolist()):
            out[ops.op, ops.pass_, ops.layer, e, ops.pieces].append(
                (ops.start[i], ops.end[i], ops.weight_wait[i], bool(ops.compute_bound[i])))
    return out


def test_same_expert_ops(pair) -> None:
    """Each expert op (piece) starts, ends and waits for its weights at the same cycle in both engines."""
    f, r = (_expert_timeline(run.trace) for run in pair)
    assert f.keys() == r.keys()
    for key in f:
        a, b = np.array(sorted(f[key])), np.array(sorted(r[key]))
        np.testing.assert_allclose(b, a, rtol=RTOL, atol=RTOL * pair[0].result.step_cycles, err_msg=str(key))


def test_the_family_exercises_what_it_claims() -> None:
    """Among the cases: a stream that blocks on a full buffer, gradient stalls, experts sharing a region,
    ops in several pieces, a recompute that re-streams, both activation policies."""
    runs = [_both(_tiny, c)[1] for c in (TINY_CASES[7], TINY_CASES[11])]
    for run in runs:
        io = run.trace.io_in
        assert (io.start[1:] > io.arrival[:-1]).any()  # a chunk waited for room, not for the link
        assert len(run.plan.expert_regions) < run.plan.model.experts
    assert runs[1].result.phases["gradient_stall"] > 0
    assert max(ops.pieces for ops in runs[1].trace.expert_ops) > 1
    assert _both(_tiny, TINY_CASES[8])[1].result.restreamed_for_recompute


def test_trace_analysis_works_on_the_reference_trace() -> None:
    """The Chrome trace and the wafer maps read the reference's trace as they read the fast one's."""
    fast, ref = _both(_tiny, TINY_CASES[9])
    f, r = chrome_trace(fast.trace, fast.plan), chrome_trace(ref.trace, ref.plan)
    assert len(r["traceEvents"]) == len(f["traceEvents"])
    maps = wafer_maps(ref)
    assert maps.step_cycles == ref.result.step_cycles
