"""MemoryX's optimizer step at the end of the step (docs/model.md §2.5): its bytes per parameter, its cycles
on tiny8 derived by hand, and the span both engines record, alone and in a cluster."""

from __future__ import annotations

import pytest

from wsesim.config.loader import load_experiment_data, load_hardware, load_model
from wsesim.experiments.runner import simulate_experiment
from wsesim.model.optimizer import optimizer_bytes_per_param, optimizer_step_cycles

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2}, "simulation": {"granularity": "pe"}}
TREE = {"name": "t", "fan_out": 2, "link_bandwidth": "2 GB/s", "latency": "37 ns"}

# tiny-moe by hand: H 64, 4 heads and 2 KV heads of 16. Attention 64·16·(2·4 + 2·2) = 12,288 + 2 RMSNorms
# of 64 + 2 QK-norms of 16 = 12,448; router 64·4 = 256; an expert 3·64·32 = 6,144, four of them 24,576;
# a layer 37,280, two 74,560; embedding and LM head 256·64 each: 107,328 parameters. Adam in bf16 moves
# 16 B read + 12 B written + the 2 B streamed copy = 30 B each: 3,219,840 B at tiny8's 32 B/cycle.
TINY_MOE_OPTIMIZER_CYCLES = 100_620.0


def test_adam_moves_thirty_bytes_per_bf16_parameter_and_twenty_eight_in_fp32() -> None:
    model = load_model("tiny-moe")
    assert optimizer_bytes_per_param(model) == 30
    assert optimizer_bytes_per_param(model.model_copy(update={"dtype": "fp32"})) == 28


def test_the_optimizer_step_on_tiny8_by_hand() -> None:
    assert optimizer_step_cycles(load_hardware("tiny8"), load_model("tiny-moe")) == TINY_MOE_OPTIMIZER_CYCLES


def test_it_scales_with_the_bandwidth_assumed() -> None:
    hw = load_hardware("tiny8", {"memoryx.update_bandwidth": "64 GB/s"})
    assert optimizer_step_cycles(hw, load_model("tiny-moe")) == TINY_MOE_OPTIMIZER_CYCLES / 2


@pytest.mark.parametrize("engine", ["fast", "reference"])
@pytest.mark.parametrize("cluster", [{}, {"cluster.systems": 4, "cluster.interconnect": TREE}])
def test_the_step_ends_with_the_optimizer_span(engine: str, cluster: dict) -> None:
    """Alone and in a cluster (MemoryX updates once, whatever N), in both engines: the last span of the
    step is the update, it starts when the last gradient (or its sum) has arrived and lasts the cycles
    derived above, and the step ends with it."""
    run = simulate_experiment(load_experiment_data(TINY, overrides={"simulation.engine": engine, **cluster}).spec)
    step = [s for s in run.trace.spans if s[0] == "step"]
    last = max(step, key=lambda s: s[3])
    assert last[1] == "optimizer_step"
    assert last[3] - last[2] == pytest.approx(TINY_MOE_OPTIMIZER_CYCLES, rel=1e-12)
    assert last[3] == run.trace.step_cycles
    assert last[2] == pytest.approx(max(s[3] for s in step if s[1] != "optimizer_step"), rel=1e-12)
    assert run.result.phases["optimizer_step"] == pytest.approx(TINY_MOE_OPTIMIZER_CYCLES, rel=1e-12)
