"""The cost model: op cycles by term, and the model's FLOP and parameter arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.loader import load_hardware, load_model
from wsesim.model.costs import op_cost, op_cycles
from wsesim.model.shapes import LayerShapes


@pytest.fixture(scope="module")
def tiny8():
    return load_hardware("tiny8")


def test_op_cost_terms(tiny8) -> None:
    """tiny8: 8 FLOP/cycle per PE, 4 B links, ramp T_R = 2, hop t_h = 1, task overhead 10, efficiency 100 %.

    51,200 FLOP on 8 x 8 PEs: 51200 / (64 * 8) = 100 cycles of compute. 3,200 B of weights through
    8 rows of 4 B links: 100 cycles of feed (a tie counts as compute-bound). Fill/drain
    fabric.latency(8 + 8) = 2·2 + 16·1 = 20. Total 10 + 20 + 100 = 130.
    A tenth of the FLOPs: compute 10 < feed 100, so feed-bound, and still 10 + 20 + 100 = 130.
    """
    c = op_cost(tiny8, 8, 8, 51200, 3200)
    assert (c.compute, c.feed, c.fill_drain, c.overhead, c.cycles, c.bound) == (100, 100, 20, 10, 130, "compute")
    few_tokens = op_cost(tiny8, 8, 8, 5120, 3200)  # a tenth of the work for the same weights
    assert few_tokens.bound == "feed" and few_tokens.cycles == 130


def test_op_cycles_matches_op_cost(tiny8) -> None:
    rows, cols = np.array([8.0, 4.0]), np.array([8.0, 2.0])
    flops, weights = np.array([51200.0, 999.0]), 640.0
    cycles, compute_bound = op_cycles(tiny8, rows, cols, flops, weights)
    for i in range(2):
        ref = op_cost(tiny8, int(rows[i]), int(cols[i]), float(flops[i]), weights)
        assert cycles[i] == pytest.approx(ref.cycles) and bool(compute_bound[i]) == (ref.bound == "compute")


def test_qwen3_parameter_counts() -> None:
    """The published counts (reference/models.md): attention 18,874,368 per layer (+ norms), one expert
    3 * 2048 * 768 = 4,718,592, embedding 151,936 * 2048 = 311,164,928; ~30.5B total, ~3.3B active."""
    s = LayerShapes(load_model("qwen3-30b-a3b"))
    assert s.attention_params - (2 * 2048 + 2 * 128) == 18_874_368
    assert s.expert_params == 4_718_592
    assert s.embedding_params == s.lm_head_params == 311_164_928
    assert s.total_params == pytest.approx(30.5e9, rel=0.01)
    assert s.active_params == pytest.approx(3.3e9, rel=0.03)


def test_model_flops_per_token_tiny() -> None:
    """tiny-moe (H 64, L 2, 4 heads, 2 KV heads, d 16, E 4, k 2, I 32, V 256) at seq_len 8:
    projections 2*64*16*(8+4) = 24,576; causal core 2*2*8*4*16*0.5 = 1,024; router 2*64*4 = 512;
    two expert slots 2 * 2*3*64*32 = 24,576; per layer 50,688; LM head 2*256*64 = 32,768;
    training = 3 * (2 * 50,688 + 32,768) = 402,432 FLOP per token."""
    assert LayerShapes(load_model("tiny-moe")).model_flops_per_token(8) == 402_432


def test_deepseek_v3_latent_attention_counts() -> None:
    """DeepSeek-V3's MLA (config.json: H 7168, 128 heads, q_lora 1536, kv_lora 512, nope 128, rope 64, v 128):
    q_a 7168*1536 = 11,010,048; q_b 1536*128*192 = 37,748,736; kv_a 7168*(512+64) = 4,128,768;
    kv_b 512*128*(128+128) = 16,777,216; o 128*128*7168 = 117,440,512; sum 187,105,280; plus the two
    RMSNorms (2*7168) and the latents' norms (1536 + 512): 187,121,664. With its 3 dense layers
    (3 * (187,121,664 + 3*7168*18432)) the preset's 58 MoE layers make the published 671B."""
    s = LayerShapes(load_model("deepseek-v3"))
    assert s.attention_proj_params == 187_105_280
    assert s.attention_params == 187_121_664
    assert s.expert_params == 3 * 7168 * 2048
    assert s.shared_expert_params == 3 * 7168 * 2048
    dense_layers = 3 * (s.attention_params + 3 * 7168 * 18432)
    assert s.total_params + dense_layers == pytest.approx(671e9, rel=0.005)
    # per-token widths: q and k 128 heads * (128 + 64), v and o 128 * 128
    assert s.qkvo_widths == (128 * 192, 128 * 192, 128 * 128, 128 * 128)
    # causal core: 2 * S * heads * (qk + v) * 0.5
    assert s.attention_core_flops(4096) == 2 * 4096 * 128 * (192 + 128) * 0.5


def test_qwen3_235b_counts() -> None:
    """Qwen3-235B-A22B: ~235B total, ~22B active at top_k 8 (its model card)."""
    s = LayerShapes(load_model("qwen3-235b-a22b"))
    assert s.attention_proj_params == 4096 * 128 * (2 * 64 + 2 * 4)
    assert s.total_params == pytest.approx(235e9, rel=0.01)
    assert s.active_params == pytest.approx(22e9, rel=0.02)


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "mixtral-8x7b", "olmoe-1b-7b", "tiny-moe"])
def test_gqa_widths_are_the_heads(name: str) -> None:
    """Without latent attention, q and o are heads * head_dim wide, k and v kv_heads * head_dim."""
    m = load_model(name)
    s = LayerShapes(m)
    assert s.qkvo_widths == (m.heads * m.head_dim, m.kv_heads * m.head_dim, m.kv_heads * m.head_dim,
                             m.heads * m.head_dim)
    assert s.attention_proj_params == m.hidden_size * sum(s.qkvo_widths)
