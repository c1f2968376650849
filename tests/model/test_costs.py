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
    """tiny8: 8 FLOP/cycle per PE, 4 B links, hop 2, injection 7, task overhead 10, efficiency 100 %.

    51,200 FLOP on 8 x 8 PEs: 51200 / (64 * 8) = 100 cycles of compute. 3,200 B of weights through
    8 rows of 4 B links: 100 cycles of feed (a tie counts as compute-bound). Fill/drain 7 + (8+8)*2 = 39.
    Total 10 + 39 + 100 = 149.
    """
    c = op_cost(tiny8, 8, 8, 51200, 3200)
    assert (c.compute, c.feed, c.fill_drain, c.overhead, c.cycles, c.bound) == (100, 100, 39, 10, 149, "compute")
    few_tokens = op_cost(tiny8, 8, 8, 5120, 3200)  # a tenth of the work for the same weights
    assert few_tokens.bound == "feed" and few_tokens.cycles == 149


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
