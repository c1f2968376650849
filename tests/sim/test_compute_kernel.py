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
