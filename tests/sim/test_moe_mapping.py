"""The two MoE mappings and the step's physics options, end to end on small configurations.

``in_place`` keeps each token's k copies where the token is and runs every expert on the whole wafer:
no byte crosses the fabric to an expert region, the copies cost SRAM in proportion to top_k, and an
expert's op is paced by the PE column holding the most copies of it (docs/model.md §3, §4).
"""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.loader import load_experiment, load_experiment_data, load_model
from wsesim.config.specs import HardwareSpec
from wsesim.experiments.runner import simulate_experiment
from wsesim.model.costs import in_place_expert_costs
from wsesim.model.routing import busiest_column_copies
from wsesim.model.shapes import LayerShapes

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2}, "simulation": {"granularity": "pe"}}


def _run(**overrides):
    run = simulate_experiment(load_experiment_data(TINY, overrides=overrides).spec)
    assert run.result.feasible, run.result.infeasible_reason
    return run


def test_in_place_moves_nothing_over_the_fabric() -> None:
    r = _run(**{"simulation.moe_mapping": "in_place"}).result
    assert (r.dispatched_bytes, r.combined_bytes, r.max_link_load_bytes) == (0.0, 0.0, 0.0)
    assert r.phases["dispatch"] == r.phases["combine"] == 0.0
    assert r.phases["expand"] > 0 and r.phases["weighted_sum"] > 0
    regions = _run().result
    assert regions.phases["expand"] == regions.phases["weighted_sum"] == 0.0
    assert regions.dispatched_bytes > 0


def test_in_place_sram_rises_with_top_k_at_fixed_tokens() -> None:
    """Same G·B; k copies of every token's hidden state and intermediates."""
    peaks = [_run(**{"simulation.moe_mapping": "in_place", "model.top_k": k}).result.peak_sram_bytes_per_pe
             for k in (1, 2, 4)]
    assert peaks[0] < peaks[1] < peaks[2]


def test_in_place_holds_no_hot_region() -> None:
    """A token's copies stay in its column, so a skewed routing does not concentrate memory."""
    r = _run(**{"simulation.moe_mapping": "in_place", "training.routing": "zipf:2"}).result
    assert r.expert_region_load == pytest.approx(1.0)


def test_in_place_cost_by_hand(tiny8: HardwareSpec) -> None:
    """tiny-moe's expert: H 64, I 32, params 3·64·32 = 6,144; gate_up 4,096 (8,192 B in bf16). tiny8:
    8 × 8 PEs, SIMD 4, efficiency, 4 B links, overhead and fill/drain from its YAML. With 9 copies in
    the busiest column, gate_up forward needs ceil(9/4) = 3 instructions per weight element:
    compute = 4,096 / 8 rows · 3 / eff; feed = 8,192 B / (8 · 4 B) = 256."""
    shapes = LayerShapes(load_model("tiny-moe"))
    hw = tiny8
    costs = in_place_expert_costs(hw, shapes, np.array([[9, 0, 4, 5]]), 8, 8)
    fixed = hw.runtime.task_overhead_cycles + 2 * hw.fabric.ramp_latency_cycles + 16 * hw.fabric.hop_latency_cycles
    eff = hw.runtime.gemm_efficiency
    gate_up = costs.cycles["gate_up", False][0]
    assert gate_up[0] == pytest.approx(fixed + max(4096 / 8 * 3 / eff, 256))
    assert gate_up[1] == pytest.approx(fixed + 256)  # no copies: the weights still pass
    assert gate_up[2] == pytest.approx(fixed + max(4096 / 8 * 1 / eff, 256))
    assert gate_up[3] == pytest.approx(fixed + max(4096 / 8 * 2 / eff, 256))
    assert costs.cycles["gate_up", True][0][0] == pytest.approx(fixed + 2 * max(4096 / 8 * 3 / eff, 256))


def test_busiest_column_is_at_least_the_mean_and_at_most_all() -> None:
    rng = np.random.default_rng(0)
    tokens = np.array([[100, 0, 7, 993]])
    busiest = busiest_column_copies(tokens, 10, rng)
    assert np.all(busiest >= np.ceil(tokens / 10)) and np.all(busiest <= tokens)
    assert busiest[0, 1] == 0


def test_in_place_is_deterministic() -> None:
    a = _run(**{"simulation.moe_mapping": "in_place", "training.seed": 4}).result
    b = _run(**{"simulation.moe_mapping": "in_place", "training.seed": 4}).result
    assert a.to_dict() | {"wall_s": 0} == b.to_dict() | {"wall_s": 0}


def test_attention_recomputed_once_runs_fewer_attention_ops_and_keeps_more() -> None:
    twice, once = _run(), _run(**{"training.attention_recompute": "once"})
    twice_ops, once_ops = (sum(1 for tr, name, *_ in run.trace.spans if tr == "step" and name == "attention")
                           for run in (twice, once))
    layers, tiles = 2, 2
    assert twice_ops - once_ops == layers * tiles  # the layer recompute's attention, per tile
    assert once.result.phases["attention"] < twice.result.phases["attention"]
    assert once.result.peak_sram_bytes_per_pe >= twice.result.peak_sram_bytes_per_pe


def test_fp32_weight_gradients_double_the_bytes_out() -> None:
    bf16, fp32 = _run().result, _run(**{"training.weight_gradient_dtype": "fp32"}).result
    assert fp32.io_bytes_out == 2 * bf16.io_bytes_out
    assert fp32.io_bytes_in == bf16.io_bytes_in


def test_standard_attention_computes_the_masked_half() -> None:
    """At a seq_len where the S² term dominates the attention op, standard does more than flash."""
    std = _run(**{"training.seq_len": 64, "training.batch_per_tile": 1})
    flash = _run(**{"training.seq_len": 64, "training.batch_per_tile": 1, "training.attention_kernel": "flash"})
    assert std.trace.executed_flops > flash.trace.executed_flops
    assert std.result.model_flops_per_step == flash.result.model_flops_per_step  # MFU counts the causal half


MODEL_PRESETS = ["qwen3-30b-a3b", "mixtral-8x7b", "olmoe-1b-7b", "qwen3-235b-a22b", "deepseek-v3", "tiny-moe"]
REDUCED_WSE2 = {"hardware.mesh.rows": 40, "hardware.mesh.cols": 48, "simulation.granularity": "block:4",
                "hardware.pe.sram": "4 MiB", "model.layers": 2, "training.seq_len": 128,
                "training.batch_per_tile": 1, "training.attention_kernel": "flash"}


@pytest.mark.parametrize("mapping", ["regions", "in_place"])
@pytest.mark.parametrize("model", MODEL_PRESETS)
def test_both_mappings_run_every_model_preset(model: str, mapping: str) -> None:
    """Every shipped model, two of its layers, on a reduced WSE-2 (40 × 48 PEs, SRAM enough for the full
    vocabulary's LM head on so few PEs): both mappings give a feasible step; in place nothing is dispatched.
    DeepSeek-V3 keeps one of its dense layers, so that its second is an MoE layer."""
    dense = {"model.dense_layers": 1} if load_model(model).dense_layers else {}
    spec = load_experiment(hardware="wse2", model=model,
                           overrides={**REDUCED_WSE2, **dense, "simulation.moe_mapping": mapping}).spec
    r = simulate_experiment(spec).result
    assert r.feasible, r.infeasible_reason
    assert r.step_cycles > 0 and r.throughput_tokens_per_s > 0
    assert (r.dispatched_bytes == 0) == (mapping == "in_place")
