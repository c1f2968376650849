"""``simulation.compute: kernel`` (docs/model.md §4.1): every whole-wafer and expert op costs its GEMMs
simulated on the PEs that run it as weight-streaming GEMMs (§10.7); the GEMMs carry exactly the FLOPs
the constant model counts, and both engines agree under it."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.loader import load_experiment_data, load_hardware, load_model
from wsesim.experiments.runner import simulate_experiment
from wsesim.kernels.cost import kernel_cost
from wsesim.kernels.step import kernel_op_cost
from wsesim.model.shapes import LayerShapes, expert_op_matmuls, over_tokens, wafer_op, wafer_op_matmuls

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2},
        "simulation": {"granularity": "pe", "compute": "kernel"}}


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "deepseek-v3", "llama-7b", "gpt-j-6b", "tiny-moe"])
@pytest.mark.parametrize("kernel", ["standard", "flash"])
def test_the_gemms_carry_the_ops_flops(model: str, kernel: str) -> None:
    """Σ 2·M·K·N over an op's GEMMs is the FLOPs ``wafer_op`` counts (attention: to the QK-norm weights,
    which are not a GEMM; latent attention's projections as one GEMM of their parameters)."""
    s = LayerShapes(load_model(model))
    for name in ("attention", "router", "ffn", "lm_head"):
        if (name == "router" and not s.model.experts) or (name == "ffn" and not s.model.ffn_intermediate):
            continue
        for backward in (False, True):
            flops, _ = wafer_op(s, name, 2 * 1024, 1024, kernel, backward)
            gemms = sum(2.0 * m * k * n for m, k, n in wafer_op_matmuls(s, name, 2 * 1024, 1024, kernel, backward))
            assert gemms == pytest.approx(flops, rel=2e-3 if name == "attention" else 1e-12)
    if s.model.experts:
        for op in ("gate_up", "down"):
            for backward in (False, True):
                gemms = sum(2.0 * m * k * n for m, k, n in expert_op_matmuls(s, op, 100, backward))
                assert gemms == pytest.approx(s.expert_op_flops(op, 100, backward))


def gemm_cycles(hw, dtype: str, rows: int, cols: int, m: int, k: int, n: int, algorithm: str = "stream") -> float:
    """A weight-streaming GEMM's cycles from the kernel layer's front door, as the step asks for them
    (its weights staged: the engine's weight stream brings them)."""
    return kernel_cost(hw, "gemm", rows, cols, dtype=dtype, algorithm=algorithm, shape=(m, k, n),
                       staged=True).cycles


def test_a_whole_wafer_op_costs_its_launch_and_its_gemms() -> None:
    """Forward: both GEMMs streamed; backward: each input gradient streamed, each weight gradient (every
    second GEMM) in the weight-gradient form. The weights' pass is inside the GEMMs: no feed floor."""
    hw = load_hardware("tiny8")
    gemms = ((64, 32, 16), (64, 16, 32))
    cost = kernel_op_cost(hw, 8, 8, "ffn", False, gemms, 1.0, 128.0, 2)
    expected = sum(gemm_cycles(hw, "fp16", 8, 8, m, k, n) for m, k, n in gemms)
    assert cost.compute == expected > 0 and cost.feed == 0.0
    assert cost.cycles == hw.runtime.task_overhead_cycles + expected
    back = kernel_op_cost(hw, 8, 8, "ffn", True, gemms, 1.0, 128.0, 2)
    assert back.compute == (gemm_cycles(hw, "fp16", 8, 8, 64, 32, 16)
                            + gemm_cycles(hw, "fp16", 8, 8, 64, 16, 32, algorithm="stream-dw"))


def test_which_gemms_contract_over_the_tokens() -> None:
    """``_backward`` writes each input gradient, then its weight gradient; the LM head's list is its
    forward GEMM and those two."""
    assert over_tokens("ffn", False, 2) == (False, False)
    assert over_tokens("ffn", True, 4) == (False, True, False, True)
    assert over_tokens("lm_head", False, 3) == (False, False, True)
    s = LayerShapes(load_model("llama-7b"))
    lm = wafer_op_matmuls(s, "lm_head", 64, 64, "standard", False)
    assert lm[2] == (s.model.hidden_size, 64, s.model.vocab_size)  # dW: hidden × tokens × vocab


def test_a_gemm_costs_by_its_blocks() -> None:
    """The tokens enter only as each PE's block: 57 tokens on 8 PE rows is 8 per PE, like 64."""
    hw = load_hardware("tiny8")
    assert gemm_cycles(hw, "fp16", 8, 8, 57, 40, 60) == gemm_cycles(hw, "fp16", 8, 8, 64, 40, 60)


@pytest.mark.parametrize("overrides", [{}, {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0,
                                            "model.ffn_intermediate": 96}, {"training.routing": "zipf:1.5"}])
def test_both_engines_agree_under_the_kernel_model(overrides: dict) -> None:
    fast = simulate_experiment(load_experiment_data(TINY, overrides=overrides).spec)
    ref = simulate_experiment(load_experiment_data(TINY, overrides={**overrides,
                                                                   "simulation.engine": "reference"}).spec)
    assert fast.result.feasible
    assert fast.result.step_cycles == pytest.approx(ref.result.step_cycles, rel=1e-12)
    assert np.allclose([fast.result.phases[p] for p in fast.result.phases],
                       [ref.result.phases[p] for p in fast.result.phases], rtol=1e-9, atol=1e-6)


def test_the_kernel_model_moves_the_step_and_constant_stays() -> None:
    constant = simulate_experiment(load_experiment_data({**TINY, "simulation": {"granularity": "pe"}}).spec)
    kernel = simulate_experiment(load_experiment_data(TINY).spec)
    assert kernel.result.step_cycles != constant.result.step_cycles
    assert kernel.plan.compute == "kernel" and constant.plan.compute == "constant"


def test_consume_is_the_slower_of_the_stream_and_the_work() -> None:
    """A chunk whose first bytes reach the wafer at 10 and its last at 50, on PEs free from 20: 15 cycles
    of work start at 50 and end at 65 unpipelined; pipelined they start at 20 and end at max(35, 50) = 50
    (the stream is slower: 15 cycles not computing), and 60 cycles end at 80 (the work is slower)."""
    from wsesim.sim.executors.links import consume

    assert consume(20.0, 10.0, 50.0, 15.0, False) == (50.0, 65.0, 30.0)
    assert consume(20.0, 10.0, 50.0, 15.0, True) == (20.0, 50.0, 15.0)
    assert consume(20.0, 10.0, 50.0, 60.0, True) == (20.0, 80.0, 0.0)
    begin, end, waited = consume(np.array([20.0, 0.0]), np.array([10.0, 10.0]), np.array([50.0, 50.0]),
                                 np.array([15.0, 60.0]), True)
    assert begin.tolist() == [20.0, 10.0] and end.tolist() == [50.0, 70.0] and waited.tolist() == [15.0, 10.0]


DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96}


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_the_kernel_model_pipelines_an_op_with_its_weights(engine: str) -> None:
    """Under ``compute: kernel`` a whole-wafer op consumes its weights as they arrive: with the I/O
    slowed to 0.05 B a cycle, layer 0's forward FFN starts before its chunk has arrived (at the chunk's
    first bytes, or when the wafer is free) and ends exactly at its arrival, bound by the stream — where
    ``constant`` starts it at the arrival."""
    slow = {**DENSE, "hardware.io.bandwidth": "50 MB/s", "simulation.engine": engine}
    for compute in ("kernel", "constant"):
        run = simulate_experiment(load_experiment_data(TINY, overrides={**slow, "simulation.compute": compute}).spec)
        io = run.trace.io_in
        i = io.names.index(("fwd", 0, "ffn"))
        ffn = next(s for s in run.trace.spans if s.name == "ffn" and s.args.get("layer") == 0
                   and s.args.get("pass") == "fwd")
        if compute == "kernel":
            assert io.start[i] <= ffn.start < io.arrival[i] and ffn.end == pytest.approx(io.arrival[i])
            assert ffn.args["bound"] == "stream"
        else:
            assert ffn.start >= io.arrival[i]
