"""Gradient accumulation (issue 11, docs/model.md §2.4): N micro-batches of B against one step of N·B,
and the global batch split into the fewest micro-batches that fit."""

from __future__ import annotations

from typing import Any

import pytest

from wsesim.config.loader import load_experiment, load_experiment_data
from wsesim.experiments.runner import run_experiment, simulate_experiment
from wsesim.experiments.training import size_step
from wsesim.model.memory import training_memory
from wsesim.model.shapes import LayerShapes

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe", "training": {"seq_len": 64, "tiles": 1},
        "simulation": {"granularity": "pe"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
         "hardware.pe.sram": "1 MiB"}  # (so that one step of N·B fits too)
IDEAL = {"hardware.runtime.task_overhead": "0 cycles", "hardware.fabric.ramp_latency": "0 cycles",
         "hardware.fabric.hop_latency": "0 cycles", "hardware.io.bandwidth": "1 TB/s"}


def _pair(extra: dict[str, Any], N: int = 3, B: int = 2) -> tuple[Any, Any]:
    """(N micro-batches of B, one step of N·B) on the dense tiny model."""
    acc = simulate_experiment(load_experiment_data(TINY, overrides={
        **DENSE, **extra, "training.batch_per_tile": B, "training.micro_batches": N}).spec)
    one = simulate_experiment(load_experiment_data(TINY, overrides={
        **DENSE, **extra, "training.batch_per_tile": N * B}).spec)
    return acc, one


@pytest.mark.parametrize("extra", [{}, IDEAL, {"training.activations": "store"}, {"model.parallel_block": True}])
def test_accumulation_is_one_big_step_but_for_the_weights_streamed_again(extra: dict[str, Any]) -> None:
    """Same tokens, model FLOPs and executed FLOPs; every weight streams in N times and every gradient
    leaves N times (MemoryX sums them); never faster than one step of N·B."""
    (acc, one), N = _pair(extra), 3
    a, o = acc.result, one.result
    assert (a.micro_batches, a.global_batch, a.tokens_per_step) == (N, o.global_batch, o.tokens_per_step)
    assert a.model_flops_per_step == o.model_flops_per_step
    assert acc.trace.executed_flops == pytest.approx(one.trace.executed_flops, rel=1e-12)
    assert (a.io_bytes_in, a.io_bytes_out) == (N * o.io_bytes_in, N * o.io_bytes_out)
    assert a.step_cycles >= o.step_cycles


def test_compute_differs_only_by_the_fixed_cost_of_the_extra_ops() -> None:
    """Every op here is compute-bound, so it costs task_overhead + fill_drain + FLOPs / rate: N micro-batches
    cost their FLOPs once, like one step, plus the fixed part of the (N − 1)·(ops per micro-batch) extra ops
    (tiny8: task_overhead 10 + fill_drain fabric.latency(8 + 8) = 4 (2·T_R) + (8 + 8)·1 hop = 30 cycles).
    With fixed costs (task overhead, ramps, hops) and I/O time taken away the two steps take the same
    cycles."""
    acc, one = _pair({})
    for name in ("attention", "ffn", "lm_head"):
        extra_ops = sum(s[1] == name for s in acc.trace.spans) - sum(s[1] == name for s in one.trace.spans)
        assert extra_ops > 0 and all(s[4]["bound"] == "compute" for s in acc.trace.spans if s[1] == name)
        assert acc.result.phases[name] - one.result.phases[name] == pytest.approx(30 * extra_ops, rel=1e-12)
    acc, one = _pair(IDEAL)
    assert acc.result.step_cycles == pytest.approx(one.result.step_cycles, rel=1e-12)


def test_accumulation_overlaps_the_next_micro_batch_with_the_last_ones_gradients() -> None:
    """The gradient drain and the first chunk's wait are paid once per step, not once per micro-batch."""
    acc, one = _pair({}, N=3, B=2)
    single = simulate_experiment(load_experiment_data(TINY, overrides={**DENSE, "training.batch_per_tile": 2}).spec)
    assert acc.result.phases["gradient_drain"] == single.result.phases["gradient_drain"]
    assert acc.result.step_cycles < 3 * single.result.step_cycles


def test_the_global_batch_splits_into_the_fewest_micro_batches_that_fit() -> None:
    """LLaMA-7B at 2,048 tokens on WSE-2: B = 9 fits, 11 does not, so a global batch of 99 (Model Zoo's)
    runs 11 micro-batches of 9; with two tiles a global batch of 96 runs 8 micro-batches of 2 tiles of 6."""
    spec = load_experiment(model="llama-7b", overrides={"training.seq_len": 2048, "training.global_batch": 99}).spec
    size = size_step(spec)
    assert (size.batch_per_tile, size.micro_batches, size.feasible) == (9, 11, True)
    assert not training_memory(spec.hardware, spec.model, spec.training, batch_per_tile=11).feasible
    spec = load_experiment(model="llama-7b", overrides={"training.seq_len": 2048, "training.global_batch": 96,
                                                        "training.tiles": 2}).spec
    size = size_step(spec)
    assert (size.batch_per_tile, size.micro_batches) == (6, 8)
    assert not training_memory(spec.hardware, spec.model, spec.training, batch_per_tile=8).feasible


def test_micro_batches_or_b_given_with_the_global_batch() -> None:
    base = {**DENSE, "training.global_batch": 12, "training.tiles": 2}
    assert size_step(load_experiment_data(TINY, overrides={**base, "training.micro_batches": 3}).spec
                     ).batch_per_tile == 2
    assert size_step(load_experiment_data(TINY, overrides={**base, "training.batch_per_tile": 3}).spec
                     ).micro_batches == 2


def test_a_global_batch_nothing_fits_is_infeasible_not_an_error() -> None:
    r = run_experiment(load_experiment(overrides={"training.global_batch": 64, "training.tiles": 64}).spec)
    assert not r.feasible and r.infeasible_reason.startswith("global_batch 64: no micro-batch")


def test_micro_batches_with_b_auto_multiply_the_batch() -> None:
    r = run_experiment(load_experiment_data(TINY, overrides={**DENSE, "training.micro_batches": 4}).spec)
    s = LayerShapes(load_experiment_data(TINY, overrides=DENSE).spec.model)
    assert r.feasible and r.global_batch == 4 * r.batch_per_tile
    assert r.io_bytes_out == 4 * s.total_params * 2  # every gradient leaves once per micro-batch (bf16)
