"""Dense models run, tune and sweep (issue 11): the presets on WSE-2, the parallel block's recompute, what
the tuner does with G on a dense model, and the shipped cluster and accumulation sweeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsesim.config.loader import load_experiment
from wsesim.experiments.runner import run_experiment
from wsesim.experiments.sweep import load_sweep, run_sweep
from wsesim.experiments.table import STATUS_OK
from wsesim.experiments.tune import candidates, tune

WORKLOADS = Path(__file__).resolve().parents[2] / "workloads"


@pytest.mark.parametrize(("model", "seq_len"), [("llama-7b", 2048), ("llama2-7b", 4096), ("gpt-j-6b", 2048),
                                                 ("gpt3-xl", 2048)])
def test_dense_presets_run(model: str, seq_len: int) -> None:
    r = run_experiment(load_experiment(model=model, overrides={"training.seq_len": seq_len}).spec)
    assert r.feasible, r.infeasible_reason
    assert (r.experts, r.top_k, r.expert_load_imbalance, r.dispatched_bytes) == (0, 0, 0.0, 0.0)
    assert r.phases["ffn"] > 0 and r.phases["experts"] == r.phases["router"] == r.phases["dispatch"] == 0
    assert 0.1 < r.mfu < 0.6 and sum(r.phases.values()) == pytest.approx(r.step_cycles)


def test_a_parallel_block_skips_attention_in_the_recompute() -> None:
    """GPT-J's FFN reads the layer's input: its recompute pass runs the FFN only, so there are two attention
    forwards per layer (forward, and per tile in backward) where a sequential block has three."""
    from wsesim.experiments.runner import simulate_experiment

    run = simulate_experiment(load_experiment(model="gpt-j-6b", overrides={"training.seq_len": 2048}).spec)
    forwards = [s for s in run.trace.spans if s[1] == "attention" and s[4]["pass"] in ("fwd", "recompute")]
    assert len(forwards) == 2 * 28 * run.result.tiles
    seq = simulate_experiment(load_experiment(model="gpt-j-6b", overrides={
        "training.seq_len": 2048, "model.parallel_block": False}).spec)
    assert len([s for s in seq.trace.spans if s[1] == "attention" and s[4]["pass"] in ("fwd", "recompute")]) == 3 * 28


def test_tune_on_a_dense_model() -> None:
    """G reaches a larger batch past attention's per-tile memory, but a compute-bound dense model gains
    little from it: the tuner runs the same search and its best is within a few per cent of G=1 per token
    on the wafer; a larger batch also spreads MemoryX's optimizer step (5 % of G=1's step) over more
    tokens, which is most of what it gains in all."""
    result = tune(load_experiment(model="gpt3-xl", overrides={"training.seq_len": 2048}))
    g1 = next(r for r in result.candidates if r.tiles == 1)
    best = result.best
    assert best.global_batch > g1.global_batch

    def on_wafer(r) -> float:  # tokens per cycle of the step without the update
        return r.tokens_per_step / (r.step_cycles - r.phases["optimizer_step"])

    assert 1.0 <= on_wafer(best) / on_wafer(g1) < 1.05
    assert 1.0 <= best.throughput_tokens_per_s / g1.throughput_tokens_per_s < 1.10


def test_tune_at_a_fixed_global_batch_varies_g_only() -> None:
    loaded = load_experiment(overrides={"training.global_batch": 60})
    assert candidates(loaded.spec) == [(G, "auto") for G in (1, 2, 3, 4, 5, 6, 10, 12, 15)]


def test_the_shipped_sweeps_load() -> None:
    bva = load_sweep(WORKLOADS / "qwen3-30b-a3b" / "bta-vs-accumulation.yaml")
    assert [p.overrides["training.tiles"] for p in bva.points] == [1, 2, 3, 4, 5, 6, 10, 12, 15]
    assert {p.overrides["training.global_batch"] for p in bva.points} == {60}
    cluster = load_sweep(WORKLOADS / "gpt3-xl" / "cluster-scaling.yaml")
    assert len(cluster.points) == 14


def test_the_cluster_sweep_scales_as_its_invariants_say() -> None:
    rows = run_sweep(load_sweep(WORKLOADS / "gpt3-xl" / "cluster-scaling.yaml"))
    assert [r["status"] for r in rows] == [STATUS_OK] * 14
    for fixed in (False, True):
        series = sorted((r for r in rows if bool(r.get("set:training.global_batch")) == fixed),
                        key=lambda r: r["systems"])
        one = series[0]
        assert one["systems"] == 1 and one["scaling_efficiency"] == 1.0
        for r in series:
            assert r["cluster_throughput_tokens_per_s"] <= r["systems"] * one["throughput_tokens_per_s"] * (1 + 1e-12)
            assert r["scaling_efficiency"] <= 1.0
            if fixed:
                assert r["global_batch"] == 256
