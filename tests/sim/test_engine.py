"""The event engine: exact cycles on a hand-sized step, and invariants on the tiny wafer and model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wsesim.analysis.results import STEP_PHASES, WALL_CLOCK_FIELDS, phase_cycles
from wsesim.config.loader import load_experiment_data, load_hardware
from wsesim.config.specs import ModelSpec, TrainingSpec
from wsesim.experiments.runner import run_experiment, simulate_experiment
from wsesim.experiments.training import make_plan, random_streams
from wsesim.model.costs import region_expert_costs
from wsesim.model.routing import route_tokens
from wsesim.model.shapes import LayerShapes
from wsesim.sim.cost.costing import cost_program
from wsesim.sim.executors.engine import _Engine, simulate
from wsesim.sim.programs.builders.training import training_program
from wsesim.sim.programs.plan import StepPlan

MICRO = {"name": "micro", "hidden_size": 8, "layers": 1, "heads": 1, "kv_heads": 1, "head_dim": 8, "experts": 1,
         "top_k": 1, "expert_intermediate": 8, "vocab_size": 8}


def _micro_trace(activations: str):
    hw = load_hardware("tiny8")
    model = ModelSpec.model_validate(MICRO)
    training = TrainingSpec.model_validate({"seq_len": 1, "batch_per_tile": 1, "tiles": 1, "activations": activations})
    tokens = np.array([[1]])
    plan = StepPlan(hw, model, training, 1, 1, (8, 8), ((8, 8),), (0,), tokens,
                    lambda nbytes, reverse: (5.0, float(nbytes.sum())),
                    lambda plan: region_expert_costs(hw, LayerShapes(model), tokens, np.array([8.0]), np.array([8.0])))
    program = training_program(plan)
    return simulate(plan, program, cost_program(program, plan))


def test_micro_step_recompute_exact() -> None:
    """One layer, one expert, one token on tiny8 (I/O 4 B/cycle; op = 10 overhead + 20 fill/drain + feed,
    fill/drain = fabric.latency(8 + 8) = 2·2 + 16·1 = 20, feed = weight bytes / (8 rows * 4 B); the fabric
    takes 5 cycles per transfer).

    Weights (bf16): embedding 128 B, attention 576 B, router 16 B, expert gate/up 256 B, down 128 B,
    LM head 128 B. The stream, back to back: embedding arrives 32; forward attention 176, router 180,
    gate/up 244, down 276; LM head 308; backward copies: attention 452, router 456, gate/up 520, down 552.

    Forward: wait 32 (stall), wait for attention to 176 (stall 144); attention 10+20+18 = 48 -> 224;
    router 10+20+0.5 -> 254.5; dispatch 5 -> 259.5; gate/up 10+20+8 -> 297.5; down 10+20+4 -> 331.5;
    combine 5 -> 336.5. LM head (forward and backward: 3 · 128 B, feed 12) 10+20+12 -> 378.5 (gradient
    128 B leaves 378.5-410.5). Backward with recompute: the recompute reads attention's backward copy,
    which arrives at 452: stall 73.5 (with the old 39 it started at 473.5, after it); attention 48 -> 500;
    router -> 530.5; dispatch -> 535.5; experts 38 + 34 -> 607.5 (their backward copies arrived at
    520/552); combine -> 612.5; router backward 10+20+1 -> 643.5; combine backward -> 648.5; down backward
    10+20+8 -> 686.5, gate/up backward 10+20+16 -> 732.5 (a backward passes its weights twice; gradients
    leave 686.5-718.5, 732.5-796.5); dispatch backward -> 737.5; router gradient leaves 796.5-800.5;
    attention recomputed 48 -> 785.5, backward 10+20+36 -> 851.5; attention gradient leaves 851.5-995.5,
    embedding gradient 995.5-1027.5. The last gradient has left at 1027.5; then MemoryX steps Adam over
    all 616 parameters (64 + 288 + 8 + 192 + 64), 30 B each at 32 B/cycle: 577.5 -> 1605 cycles.
    Phases: attention 3 · 48 + 66 = 210; router 30.5 + 30.5 + 31 = 92; experts 72 + 72 + 84 = 228;
    dispatch and combine 3 · 5 = 15 each; LM head 42; weight stall 32 + 144 + 73.5 = 249.5; gradient
    drain 1027.5 − 851.5 = 176.
    """
    trace = _micro_trace("recompute")
    assert trace.step_cycles == 1605.0
    assert phase_cycles(trace) == {"attention": 210.0, "router": 92.0, "dispatch": 15.0, "expand": 0.0, "experts": 228.0, "weighted_sum": 0.0,
                                   "combine": 15.0, "lm_head": 42.0, "weight_stall": 249.5, "gradient_stall": 0.0,
                                   "gradient_drain": 176.0, "ffn": 0.0, "reduce_drain": 0.0,
                                   "optimizer_step": 577.5}
    assert trace.io_bytes_in == 128 + 2 * (576 + 16 + 256 + 128) + 128
    assert trace.io_bytes_out == 128 + 576 + 16 + 256 + 128 + 128  # every weight's gradient, once


def test_micro_step_store_exact() -> None:
    """As above with ``activations: store``: no recompute; the backward stream brings router (312),
    down (344), gate/up (408), attention (552), in backward order. After the LM head (378.5): router backward
    -> 409.5; combine backward -> 414.5; down backward 414.5-452.5; gate/up waits nothing, 452.5-498.5;
    dispatch backward -> 503.5; attention backward waits for its copy (stall 48.5), 552-618. Gradients:
    LM head 378.5-410.5, down 452.5-484.5, gate/up 498.5-562.5, router 562.5-566.5, attention 618-762,
    embedding 762-794; the optimizer step 577.5 -> 1371.5. Attention 48 + 66 = 114, experts 72 + 84 =
    156, gradient drain 794 − 618 = 176."""
    trace = _micro_trace("store")
    assert trace.step_cycles == 1371.5
    phases = phase_cycles(trace)
    assert (phases["attention"], phases["experts"], phases["gradient_drain"]) == (114.0, 156.0, 176.0)
    assert phases["weight_stall"] == 32 + 144 + 48.5


# ------------------------------------------------------------------------------------------- invariants

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2},
        "simulation": {"granularity": "pe"}}


def _run(**overrides):
    return run_experiment(load_experiment_data(TINY, overrides=overrides).spec)


CASES = [
    {},
    {"training.tiles": 4},
    {"training.activations": "store"},
    {"training.routing": "zipf:1.5", "training.tiles": 3},
    {"model.top_k": 1, "training.attention_kernel": "flash"},
    {"hardware.runtime.staging_buffer": "256 B"},  # a buffer too small for a layer: backward re-streams
    {"simulation.placement": "random", "training.seed": 7},
]


@pytest.fixture(scope="module", params=range(len(CASES)), ids=[json.dumps(c) for c in CASES])
def case(request):
    overrides = CASES[request.param]
    return overrides, _run(**overrides)


def test_phases_partition_the_step(case) -> None:
    _, r = case
    assert r.feasible, r.infeasible_reason
    assert set(r.phases) == set(STEP_PHASES)
    assert sum(r.phases.values()) == pytest.approx(r.step_cycles, rel=1e-12)
    assert all(v >= 0 for v in r.phases.values())


def test_step_is_above_its_lower_bounds(case) -> None:
    """No faster than the inbound link can bring the weights, nor than all PEs can do the work."""
    overrides, r = case
    spec = load_experiment_data(TINY, overrides=overrides).spec
    hw = spec.hardware
    io_bound = r.io_bytes_in / hw.io_bytes_per_cycle
    compute_bound = r.model_flops_per_step / (hw.pes * hw.flops_per_cycle_per_pe * hw.runtime.gemm_efficiency)
    assert r.step_cycles >= io_bound
    assert r.step_cycles >= compute_bound
    assert 0 < r.mfu <= 1 and 0 < r.io_in_utilisation <= 1


def test_bytes_balance(case) -> None:
    """Bytes dispatched = bytes combined; every weight's gradient leaves once; tokens = G·B·S."""
    overrides, r = case
    spec = load_experiment_data(TINY, overrides=overrides).spec
    s = LayerShapes(spec.model)
    assert r.dispatched_bytes == r.combined_bytes > 0
    assert r.io_bytes_out == s.total_params * spec.model.bytes_per_value
    assert r.tokens_per_step == r.global_batch * r.seq_len == r.batch_per_tile * r.tiles * r.seq_len
    streams = 3 if r.restreamed_for_recompute else 2  # forward, backward (and a recompute copy)
    layer_bytes = s.layer_params * spec.model.bytes_per_value
    expected_in = (s.embedding_params + s.lm_head_params) * spec.model.bytes_per_value + streams * spec.model.layers * layer_bytes
    assert r.io_bytes_in == pytest.approx(expected_in)


def test_restream_when_a_layer_does_not_fit() -> None:
    assert _run(**{"hardware.runtime.staging_buffer": "256 B"}).restreamed_for_recompute
    assert not _run().restreamed_for_recompute


@pytest.mark.parametrize("overrides", CASES[:4], ids=[json.dumps(c) for c in CASES[:4]])
def test_more_io_bandwidth_never_slows(overrides) -> None:
    slow = _run(**overrides)
    fast = _run(**overrides, **{"hardware.io.bandwidth": "8 GB/s"})
    assert fast.step_cycles <= slow.step_cycles


@pytest.mark.parametrize("sram", ["32 KiB", "48 KiB", "64 KiB", "96 KiB"])
def test_more_sram_never_makes_a_feasible_run_infeasible(sram) -> None:
    base = {"training.batch_per_tile": 6, "training.tiles": 8, "training.seq_len": 64}
    smaller = _run(**base, **{"hardware.pe.sram": sram})
    bigger = _run(**base, **{"hardware.pe.sram": "128 KiB"})
    assert bigger.feasible or not smaller.feasible


def test_infeasible_is_a_result_with_a_reason() -> None:
    r = _run(**{"training.batch_per_tile": 4000})
    assert not r.feasible
    assert "SRAM: phase" in r.infeasible_reason and "B per PE" in r.infeasible_reason
    assert r.step_cycles == 0 and r.peak_sram_bytes_per_pe > r.sram_capacity_bytes_per_pe


def test_auto_batch_resolves_to_the_largest_that_fits() -> None:
    r = _run(**{"training.batch_per_tile": "auto", "training.tiles": 1})
    assert r.feasible and r.batch_per_tile >= 1
    assert not _run(**{"training.batch_per_tile": r.batch_per_tile + 1, "training.tiles": 1}).feasible


def test_deterministic() -> None:
    """Same inputs and seed: byte-identical JSON, wall-clock fields aside."""
    def strip(r):
        d = r.to_dict()
        for f in WALL_CLOCK_FIELDS:
            d.pop(f)
        return json.dumps(d, sort_keys=True)

    overrides = {"training.routing": "zipf:1.2", "simulation.placement": "random"}
    assert strip(_run(**overrides)) == strip(_run(**overrides))
    assert strip(_run(**overrides)) != strip(_run(**overrides, **{"training.seed": 1}))


def test_routing_conserves_tokens() -> None:
    spec = load_experiment_data(TINY).spec
    rng = np.random.default_rng(0)
    for routing in ("uniform", "zipf:2"):
        t = spec.training.model_copy(update={"routing": routing})
        tokens = route_tokens(spec.model, t, 1000, rng)
        assert tokens.shape == (spec.model.layers, spec.model.experts)
        assert (tokens.sum(axis=1) == 1000 * spec.model.top_k).all()


def test_flow_and_packet_fabrics_agree_on_a_step() -> None:
    """The step's dispatch and combine timed by the packet fabric (SimPy, every message) and by the flow
    model: the whole step agrees within 2 % on the tiny wafer."""
    flow, packet = _run(), _run(**{"simulation.fabric": "packet"})
    assert packet.step_cycles == pytest.approx(flow.step_cycles, rel=0.02)
    assert packet.phases["dispatch"] > 0 and packet.dispatched_bytes == flow.dispatched_bytes


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seq_len=st.sampled_from([8, 16, 32]), batch=st.integers(1, 4), tiles=st.integers(1, 4),
       top_k=st.integers(1, 4), activations=st.sampled_from(["store", "recompute"]),
       staging=st.sampled_from(["256 B", "1 KiB", "4 KiB"]), seed=st.integers(0, 3))
def test_step_invariants_hold_for_any_small_configuration(seq_len, batch, tiles, top_k, activations, staging,
                                                          seed) -> None:
    """Whatever the tiling, policy, buffer and routing: phases partition the step, the step is no faster
    than the inbound link or the whole wafer allow, and bytes balance."""
    r = _run(**{"training.seq_len": seq_len, "training.batch_per_tile": batch, "training.tiles": tiles,
                "model.top_k": top_k, "training.activations": activations,
                "hardware.runtime.staging_buffer": staging, "training.seed": seed})
    if not r.feasible:
        assert r.infeasible_reason
        return
    spec = load_experiment_data(TINY).spec
    hw = spec.hardware
    assert sum(r.phases.values()) == pytest.approx(r.step_cycles, rel=1e-12)
    assert r.step_cycles >= r.io_bytes_in / hw.io_bytes_per_cycle
    assert r.step_cycles >= r.model_flops_per_step / (hw.pes * hw.flops_per_cycle_per_pe)
    assert r.dispatched_bytes == r.combined_bytes
    assert r.tokens_per_step == batch * tiles * seq_len


def test_every_weight_chunk_is_freed_exactly_once(case) -> None:
    """After a whole step the staging buffer holds nothing: each chunk was given back once, not twice
    (a recompute and its backward share the backward copy) and not never."""
    overrides, _ = case
    run = simulate_experiment(load_experiment_data(TINY, overrides=overrides).spec)
    assert run.trace.staging_held_at_end == pytest.approx(0.0, abs=1e-6)


def _audit_stream(overrides: dict) -> tuple[int, int]:
    """Replays the stream against every free the consumers registered: each chunk must start exactly at
    max(the previous chunk's arrival, the first cycle its room existed). Returns (late, early) counts."""
    spec = load_experiment_data(TINY, overrides=overrides).spec
    place_rng, route_rng = random_streams(spec.training.seed)
    B, G = spec.training.batch_per_tile, spec.training.tiles
    tokens = route_tokens(spec.model, spec.training, B * G * spec.training.seq_len, route_rng)
    plan = make_plan(spec, B, tokens, place_rng)[0]
    program = training_program(plan)
    engine = _Engine(plan, program, cost_program(program, plan))
    frees: list[tuple[np.ndarray, np.ndarray]] = []
    register = engine.stream.free_at

    def recording(times, nbytes):
        frees.append((np.asarray(times, float).copy(), np.asarray(nbytes, float).copy()))
        return register(times, nbytes)

    engine.stream.free_at = recording
    engine.run()
    s = engine.stream
    times = np.concatenate([t for t, _ in frees])
    order = np.argsort(times, kind="stable")
    times, freed = times[order], np.cumsum(np.concatenate([b for _, b in frees])[order])
    reserved = np.cumsum(s.sizes)
    late = early = 0
    previous = 0.0
    for i in range(len(s.sizes)):
        need = reserved[i] - s.capacity * (1 + 1e-12)
        k = np.searchsorted(freed, need - 1e-6) if need > 0 else -1
        room = 0.0 if need <= 0 else (times[k] if k < len(times) else np.inf)
        ideal = max(previous, room)
        late += bool(s.start[i] - ideal > 1e-6)
        early += bool(ideal - s.start[i] > 1e-6)
        previous = s.arrival[i]
    return late, early


@pytest.mark.parametrize("overrides", [
    {"hardware.runtime.staging_buffer": "1 KiB", "training.seq_len": 64},
    {"hardware.runtime.staging_buffer": "1 KiB", "training.activations": "store", "training.routing": "zipf:2"},
    {"hardware.runtime.staging_buffer": "1 KiB", "model.experts": 16, "training.routing": "zipf:2",
     "training.batch_per_tile": 4, "training.seq_len": 64},
    {"hardware.runtime.staging_buffer": "256 B", "training.tiles": 3},
], ids=["recompute", "store-zipf", "16-experts-zipf", "restream"])
def test_stream_starts_each_chunk_as_early_as_its_room_allows(overrides) -> None:
    """The stream decides ahead of the consumers (an optimisation); it must decide exactly as a
    Container put/get per chunk would: never later, never earlier than room and link allow."""
    assert _audit_stream({"hardware.pe.sram": "1 MiB", **overrides}) == (0, 0)


@pytest.mark.parametrize("routing", ["uniform", "zipf:1", "zipf:3"])
def test_top_k_routing_never_gives_an_expert_more_than_every_token(routing) -> None:
    """Top-k picks k distinct experts per token: at most `tokens` slots per expert, exactly `tokens` each
    when top_k = experts, and the slots still add up to tokens · top_k."""
    spec = load_experiment_data(TINY).spec
    for top_k in (1, 2, 3, 4):
        model = spec.model.model_copy(update={"top_k": top_k})
        t = spec.training.model_copy(update={"routing": routing})
        tokens = route_tokens(model, t, 50, np.random.default_rng(top_k))
        assert (tokens <= 50).all() and (tokens.sum(axis=1) == 50 * top_k).all()
        if top_k == model.experts:
            assert (tokens == 50).all()
