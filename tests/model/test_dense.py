"""Dense feed-forward layers (issue 11): parameters and FLOPs from LayerShapes, the SRAM of the FFN
phases by hand on the tiny wafer, the parallel block's smaller footprint, and the chunk plan."""

from __future__ import annotations

from typing import Any

import pytest

from wsesim.config.loader import load_experiment_data, load_model
from wsesim.model.memory import TokenFootprint, training_memory
from wsesim.model.shapes import LayerShapes
from wsesim.sim.programs.chunks import plan_chunks

DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96}
TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe", "training": {"seq_len": 64}}


def _spec(**overrides: Any):
    return load_experiment_data(TINY, overrides={**DENSE, **overrides}).spec


@pytest.mark.parametrize(("name", "published", "rel"), [
    ("llama-7b", 6.7e9, 0.01),  # LLaMA paper, Table 2: 6.7B
    ("llama2-7b", 6_738_415_616, 1e-6),  # meta-llama/Llama-2-7b-hf: 6,738,415,616 (norms counted differently)
    ("gpt-j-6b", 6_053_381_344, 0.001),  # EleutherAI/gpt-j-6b (vocabulary padded to 50,400, biases)
    ("gpt3-xl", 1.3e9, 0.01),  # GPT-3 paper, Table 2.1: 1.3B
])
def test_dense_presets_have_their_published_size(name: str, published: float, rel: float) -> None:
    s = LayerShapes(load_model(name))
    assert s.total_params == pytest.approx(published, rel=rel)
    assert s.active_params == s.total_params  # dense: every parameter is active


def test_tiny_dense_counts_by_hand() -> None:
    """H 64, 4 heads and 2 KV heads of 16, F 96, V 256, 2 layers, S 64:
    attention 64·16·(2·4 + 2·2) + 2·64 + 2·16 = 12,448; SwiGLU FFN 3·64·96 = 18,432 (GELU: 12,288);
    FLOPs per token: projections 24,576 + causal core ½·2·64·4·32 = 8,192 + FFN 36,864 per layer,
    LM head 2·256·64 = 32,768: 3 · (2 · 69,632 + 32,768) = 516,096."""
    s = LayerShapes(_spec().model)
    assert (s.attention_params, s.ffn_params, s.dense_layer_params) == (12_448, 18_432, 30_880)
    assert s.total_params == 2 * 30_880 + 2 * 256 * 64
    assert s.model_flops_per_token(64) == 516_096
    assert LayerShapes(_spec(**{"model.ffn_activation": "gelu"}).model).ffn_params == 12_288


def test_a_mixed_model_counts_each_kind() -> None:
    moe = LayerShapes(load_model("tiny-moe"))
    mixed = LayerShapes(_spec(**{"model.experts": 4, "model.top_k": 2, "model.expert_intermediate": 32,
                                 "model.dense_layers": 1}).model)
    assert mixed.total_params == moe.total_params - moe.moe_layer_params + mixed.dense_layer_params
    per_layer_moe = (moe.model_flops_per_token(64) / 3 - moe.lm_head_flops()) / 2
    per_layer_dense = moe.attention_proj_flops() + moe.attention_core_flops(64) + mixed.ffn_flops()
    assert mixed.model_flops_per_token(64) == pytest.approx(
        3 * (per_layer_moe + per_layer_dense + moe.lm_head_flops()), rel=1e-15)
    assert mixed.layer_params == max(mixed.moe_layer_params, mixed.dense_layer_params)


def test_tiny_dense_memory_by_hand() -> None:
    """tiny8 (64 PEs, 12,288 reserved, 4,096 staging), S 64, B 1, G 1, recompute:
    resident (attention + FFN) (12,448 + 18,432)·2 / 64 = 965; stored 2 layers · 64 tokens · 128 B / 64 = 256;
    concat 64 · 64 · 2 / 64 = 128; FFN kept (2H + 2F)·b = 640 B per token and its backward working set
    (2F + 2H)·b = 640 B: 64 tokens → 640 B per PE each."""
    spec = _spec()
    mem = training_memory(spec.hardware, spec.model, spec.training, batch_per_tile=1, tiles=1)
    assert [p.phase for p in mem.phases] == ["attention_fwd", "ffn_fwd", "lm_head", "ffn_bwd", "attention_bwd"]
    common = {"reserved": 12_288, "staging": 4_096, "resident_weights": 965, "stored_activations": 256,
              "concat_buffer": 128}
    phases = {p.phase: p.components for p in mem.phases}
    assert phases["ffn_fwd"] == {**common, "ffn_transient": 640}
    assert phases["ffn_bwd"] == {**common, "ffn_recompute": 640, "ffn_transient": 640}


def test_a_parallel_block_keeps_less() -> None:
    """GELU in a parallel block keeps only the pre-activation (F values): its input and norm output are
    attention's; with attention_recompute once it needs no extra copy of attention's output either."""
    seq = TokenFootprint(_spec(**{"model.ffn_activation": "gelu"}).model, _spec().training)
    par_spec = _spec(**{"model.ffn_activation": "gelu", "model.parallel_block": True,
                        "training.attention_recompute": "once"})
    par = TokenFootprint(par_spec.model, par_spec.training)
    assert (seq.ffn_saved_per_token(), par.ffn_saved_per_token()) == ((128 + 96) * 2, 96 * 2)
    assert par.layer_saved_per_token(dense=True) == 64 * 2  # the layer's input only


def test_a_mixed_model_has_both_kinds_of_phase() -> None:
    spec = _spec(**{"model.experts": 4, "model.top_k": 2, "model.expert_intermediate": 32, "model.dense_layers": 1})
    mem = training_memory(spec.hardware, spec.model, spec.training, batch_per_tile=1, tiles=1)
    assert [p.phase for p in mem.phases] == ["attention_fwd", "experts_fwd", "ffn_fwd", "lm_head", "experts_bwd",
                                             "ffn_bwd", "attention_bwd"]


def test_chunk_plan_of_dense_layers() -> None:
    """Forward: attention then FFN per layer; backward (store): FFN then attention, last layer first."""
    spec = _spec(**{"training.activations": "store"})
    plan = plan_chunks(spec.hardware, spec.model, False)
    assert plan.names == (("embedding",), ("fwd", 0, "attention"), ("fwd", 0, "ffn"), ("fwd", 1, "attention"),
                          ("fwd", 1, "ffn"), ("lm_head",), ("bwd", 1, "ffn"), ("bwd", 1, "attention"),
                          ("bwd", 0, "ffn"), ("bwd", 0, "attention"))
    assert plan.sizes[2] == 18_432 * 2 and plan.expert_chunks == {}


def test_micro_batches_repeat_the_plan() -> None:
    spec = _spec()
    one, three = plan_chunks(spec.hardware, spec.model, True), plan_chunks(spec.hardware, spec.model, True, 3)
    assert (three.micro_batches, three.per_micro_batch, len(three)) == (3, len(one), 3 * len(one))
    assert three.names == one.names * 3 and list(three.sizes) == list(one.sizes) * 3
    assert three.keys == one.keys  # the first micro-batch's; the engines add i · per_micro_batch
