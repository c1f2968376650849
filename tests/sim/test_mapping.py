"""Where a served model lives (docs/model.md §11.1, §11.3): ``map_stages`` and ``grid_candidates`` of
``wsesim.sim.mapping``, checked against layouts and SRAM sums derived by hand on the tiny8 wafer.

The numbers every docstring below uses (tiny-moe in bf16, 2 B a value; tiny8: 8 × 8 PEs of 48 KiB, 25 %
reserved, so 36,864 B usable per PE):

* a MoE layer: attention 64·16·(2·4 + 2·2) = 12,288 projection weights + 2·64 + 2·16 norm weights =
  12,448; the router 64·4 = 256; four experts of 3·64·32 = 6,144: 37,280 values, **74,560 B**;
* the embedding table and the LM head: 256·64 values, **32,768 B** each;
* the KV cache: 2 kv heads · 16 wide, k and v, 2 B: **128 B** per layer and token;
* the activations per PE: max(batch · 64 · 2 B · 2 / Q, S · 64 · 2 B · 4 / (P·Q)).
"""

from __future__ import annotations

from typing import Any

import pytest

from wsesim.config.inference import load_inference_data
from wsesim.sim.mapping import Mapping, Stage, grid_candidates, map_stages

TINY: dict[str, Any] = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
                        "inference": {"prompt_len": 16, "output_len": 3}}
LINK = {"kind": "interconnect", "name": "test-link", "fan_out": 4, "link_bandwidth": "1 Tbit/s",
        "latency": "100 ns"}
"""An interconnect between wafers, inline (its figures matter only to the executors' hand-offs)."""
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96}
USABLE = 48 * 1024 * 0.75


def _spec(**overrides: Any) -> Any:
    return load_inference_data(TINY, overrides=overrides).spec


def _map(**overrides: Any) -> Mapping:
    return map_stages(_spec(**overrides))


# ------------------------------------------------------------------------------------ grid_candidates


@pytest.mark.parametrize(("rows", "cols", "sides"), [
    (8, 8, [8]),                    # k = 1 only: 8 // 2 = 4 is below the minimum side
    (16, 16, [16, 8]),
    (24, 30, [24, 12, 8]),          # the shorter side divides: 24, 12, 8
    (33, 40, [33, 16, 11, 8]),      # 33 // k for k = 1..4
    (20, 17, [17, 8]),              # the shorter side is the columns here
    (7, 100, []),                   # a side below 8: no square grid at all
])
def test_grid_candidates_are_squares_from_the_largest_down(rows: int, cols: int, sides: list[int]) -> None:
    """⌊min(R, C)/k⌋ on a side for k = 1, 2, …, each side once, none below 8."""
    assert grid_candidates(rows, cols) == [(s, s) for s in sides]


def test_grid_candidates_on_a_wse2_mesh() -> None:
    """750 × 994: 750, 375, 250, 187 (750 // 4), 150, 125, … down to 8 (750 // 93; 750 // 94 = 7 is not
    tried), strictly decreasing, every side 750 // k for some k."""
    grids = grid_candidates(750, 994)
    sides = [p for p, q in grids]
    assert all(p == q for p, q in grids)
    assert sides[:6] == [750, 375, 250, 187, 150, 125]
    assert sides[-1] == 8 and min(sides) == 8
    assert all(a > b for a, b in zip(sides, sides[1:], strict=False))
    assert sides == sorted({750 // k for k in range(1, 94)}, reverse=True)


# ------------------------------------------------------------------------------------ the layout


def test_stages_fill_a_wafer_row_by_row_with_consecutive_layers() -> None:
    """20 MoE layers on 2 × 4 grids (8 PEs; the 8 × 8 wafer holds 4 rows × 2 columns of them = 8 grids).

    Per PE a layer is 74,560 / 8 = 9,320 B of weights and 128 · 19 tokens / 8 = 304 B of KV cache
    (shift, batch 1, 16 + 3 tokens); activations max(1·64·2·2/4, 16·64·2·4/8) = 1,024 B; the embedding
    or the LM head 32,768 / 8 = 4,096 B. A stage of L layers with e of those tables needs
    9,624·L + 1,024 + 4,096·e ≤ 36,864: the first stage (e = 1) L ≤ 3.29, a middle one L ≤ 3.72, so 3
    each: six stages take layers 0–17 and the seventh 18–19 with the LM head (24,368 B).
    Origins, row by row: (0,0) (0,4) (2,0) (2,4) (4,0) (4,4) (6,0)."""
    mapping = _map(**{"model.layers": 20, "inference.grid": "2x4"})
    assert mapping.feasible and mapping.reason == ""
    assert mapping.grid == (2, 4) and mapping.grids_per_wafer == 8 and mapping.systems == 1
    assert [len(s.layers) for s in mapping.stages] == [3, 3, 3, 3, 3, 3, 2]
    assert [s.origin for s in mapping.stages] == [(0, 0), (0, 4), (2, 0), (2, 4), (4, 0), (4, 4), (6, 0)]
    assert [s.index for s in mapping.stages] == list(range(7))
    assert {s.wafer for s in mapping.stages} == {0}
    assert all((s.rows, s.cols) == (2, 4) for s in mapping.stages)
    assert [layer for s in mapping.stages for layer in s.layers] == list(range(20))  # in order, each once
    assert [s.embedding for s in mapping.stages] == [True] + [False] * 6
    assert [s.lm_head for s in mapping.stages] == [False] * 6 + [True]
    assert mapping.stages[-1].memory.total == 2 * 9320 + 2 * 304 + 1024 + 4096


def test_the_next_wafer_starts_at_its_own_corner() -> None:
    """30 layers at 3 a stage (as above; the last stage holds 3 with the LM head: 33,992 B) are 10 stages:
    8 fill wafer 0, stages 8 and 9 take the first two grids of wafer 1, (0,0) and (0,4). With
    ``systems: auto`` the mapping uses 2 wafers (⌈10 / 8⌉)."""
    mapping = _map(**{"model.layers": 30, "inference.grid": "2x4", "inference.interconnect": LINK})
    assert mapping.feasible and mapping.systems == 2
    assert [s.wafer for s in mapping.stages] == [0] * 8 + [1, 1]
    assert [s.origin for s in mapping.stages[8:]] == [(0, 0), (0, 4)]
    assert [s.layers for s in mapping.stages[8:]] == [(24, 25, 26), (27, 28, 29)]
    assert mapping.stages[-1].lm_head and not mapping.stages[8].embedding


@pytest.mark.parametrize(("layers", "per_stage", "expected"), [
    (7, 2, [2, 2, 2, 1]),    # the last stage takes what is left
    (7, 1, [1] * 7),
    (2, 5, [2]),             # more than the model has: one stage of all of it
])
def test_layers_per_stage_is_honoured(layers: int, per_stage: int, expected: list[int]) -> None:
    mapping = _map(**{"model.layers": layers, "inference.grid": "2x4",
                      "inference.layers_per_stage": per_stage})
    assert mapping.feasible
    assert [len(s.layers) for s in mapping.stages] == expected
    assert [layer for s in mapping.stages for layer in s.layers] == list(range(layers))


def test_a_fixed_layers_per_stage_that_overflows_a_stage_says_which_and_by_how_much() -> None:
    """4 layers on a 2 × 4 grid with the embedding: 4·9,320 + 4,096 = 41,376 B of weights, 4·304 = 1,216
    B of KV cache, 1,024 of activations: 43,616 B > 36,864 B. The weights alone leave no room for any
    output (36,864 − 41,376 − 1,024 < 0), so the longest output that fits is 0."""
    mapping = _map(**{"model.layers": 7, "inference.grid": "2x4", "inference.layers_per_stage": 4})
    assert not mapping.feasible
    assert mapping.reason.startswith("stage 0 (4 layers) needs 43,616 B per PE but 36,864 B are usable")
    assert "KV cache 1,216 B" in mapping.reason and "the longest output that fits is 0" in mapping.reason


@pytest.mark.parametrize(("overrides", "texts"), [
    # 30 layers need 10 stages at 3 a stage, one wafer has 8: 24 layers placed.
    ({"model.layers": 30, "inference.grid": "2x4", "inference.systems": 1},
     ["the weights do not fit 1 wafer at 2x4 PEs per stage", "8 stages hold 24 of 30 layers"]),
    # the same on as many wafers as it takes, but nothing links them
    ({"model.layers": 30, "inference.grid": "2x4"}, ["needs 2 wafers at 2x4 PEs per stage", "interconnect"]),
    # one PE: layer 0 and the embedding 74,560 + 32,768 = 107,328 B, KV 128·19 = 2,432 B, activations
    # max(1·64·2·2/1, 16·64·2·4/1) = 8,192 B
    ({"inference.grid": "1x1"},
     ["layer 0 alone needs 117,952 B per PE on a 1x1 grid (weights 107,328, KV cache 2,432, activations "
      "8,192) but 36,864 B are usable"]),
])
def test_a_model_that_does_not_fit_says_what_does_not(overrides: dict[str, Any], texts: list[str]) -> None:
    mapping = _map(**overrides)
    assert not mapping.feasible
    for text in texts:
        assert text in mapping.reason


def test_systems_auto_takes_as_few_wafers_as_the_stages_need() -> None:
    """At 3 layers a stage and 8 grids a wafer: 24 layers are 8 stages, one wafer; 25 are 9, two."""
    for layers, wafers in ((24, 1), (25, 2)):
        mapping = _map(**{"model.layers": layers, "inference.grid": "2x4", "inference.interconnect": LINK})
        assert mapping.feasible and mapping.systems == wafers
        assert max(s.wafer for s in mapping.stages) == wafers - 1


@pytest.mark.parametrize(("layers", "grid", "wafers"), [(2, 16, 1), (150, 8, 1), (200, 16, 2), (300, 8, 2)])
def test_grid_auto_is_the_largest_grid_on_the_fewest_wafers(layers: int, grid: int, wafers: int) -> None:
    """A 16 × 24 mesh: a 16 × 16 grid wastes a third of it (1 grid a wafer), 8 × 8 grids use it all (6).

    16 × 16 (256 PEs): a layer is 74,560 / 256 = 291.25 B + 128·19 / 256 = 9.5 B of KV cache per PE;
    activations max(64·2·2/16, 16·64·2·4/256) = 32 B; a table 128 B. A stage of all the layers holds
    (36,864 − 32 − 256) / 300.75 = 121 of them with both tables; the first of several (36,864 − 32 −
    128) / 300.75 = 122, a middle one (36,864 − 32) / 300.75 = 122 too.
    8 × 8 (64 PEs): a layer 1,165 + 38 = 1,203 B, activations 128 B, a table 512 B: 30 layers a stage,
    180 a wafer.

    * 2 layers: one 16 × 16 stage; 150: 16 × 16 needs 2 wafers (122 + 28), 8 × 8 five stages on one, so
      8 × 8 (one wafer if any grid does it);
    * 200: both need 2 wafers (122 + 78; 7 stages), so the larger grid; 300: 16 × 16 needs 3 (122 + 122
      + 56), 8 × 8 two (10 stages): the fewest wafers.

    And as invariants: no candidate fits on one wafer fewer, no larger one on as many."""
    mesh = {"hardware.mesh.rows": 16, "hardware.mesh.cols": 24, "inference.interconnect": LINK,
            "model.layers": layers}
    chosen = _map(**mesh)
    assert chosen.feasible
    assert (chosen.grid, chosen.systems) == ((grid, grid), wafers)
    for side, _ in grid_candidates(16, 24):
        g = f"{side}x{side}"
        if chosen.systems > 1:
            assert not _map(**mesh, **{"inference.grid": g, "inference.systems": chosen.systems - 1}).feasible
        if side > chosen.grid[0]:
            assert not _map(**mesh, **{"inference.grid": g, "inference.systems": chosen.systems}).feasible


# ------------------------------------------------------------------------------------ SRAM per PE


def _layer_bytes(m: Any, layer: int) -> float:
    """One layer's weights from the model's fields (GQA attention; a SwiGLU FFN or the experts)."""
    H = m.hidden_size
    attention = H * m.head_dim * (2 * m.heads + 2 * m.kv_heads) + 2 * H + 2 * m.head_dim
    if m.experts == 0 or layer < m.dense_layers:
        ffn = 3 * H * m.ffn_intermediate
    else:
        ffn = H * m.experts + m.experts * 3 * H * m.expert_intermediate
    return float((attention + ffn) * m.bytes_per_value)


def _by_hand(spec: Any, stage: Stage, layers: tuple[int, ...], first: bool, last: bool) -> dict[str, float]:
    """§11.3's SRAM per PE of a stage holding ``layers``: weights, KV cache, activations."""
    m, inf = spec.model, spec.inference
    P, Q, pes, bpv = stage.rows, stage.cols, stage.rows * stage.cols, m.bytes_per_value
    table = m.vocab_size * m.hidden_size * bpv
    weights = (sum(_layer_bytes(m, i) for i in layers) + table * first + table * last) / pes
    per_token = 2 * m.kv_heads * m.head_dim * bpv * len(layers) * inf.batch
    S, out = inf.prompt_len, inf.output_len
    kv = per_token * (S + out) / pes if inf.kv_layout == "shift" else per_token * (S / P + out) / Q
    activations = max(inf.batch * m.hidden_size * bpv * 2 / Q, S * m.hidden_size * bpv * 4 / pes)
    return {"weights": weights, "kv_cache": kv, "activations": activations}


SRAM_CASES = [
    {"model.layers": 20, "inference.grid": "2x4"},
    {"model.layers": 20, "inference.grid": "4x4", "inference.kv_layout": "concat", "inference.batch": 3,
     "inference.prompt_len": 32, "inference.output_len": 5},
    {**DENSE, "model.layers": 12, "inference.grid": "2x2", "inference.batch": 2},
    {"model.layers": 9, "model.dense_layers": 2, "model.ffn_intermediate": 96, "inference.grid": "2x4",
     "inference.kv_layout": "concat"},
    {"model.layers": 60, "hardware.mesh.rows": 16, "hardware.mesh.cols": 16, "inference.interconnect": LINK},
]


@pytest.mark.parametrize("overrides", SRAM_CASES, ids=range(len(SRAM_CASES)))
def test_every_stage_holds_what_its_sram_holds_and_no_more(overrides: dict[str, Any]) -> None:
    """Per stage: weights, KV cache and activations are §11.3's sums; their total is within the usable
    SRAM; and with ``layers_per_stage: auto`` every stage but the last would overflow with its next layer
    (each takes as many layers as fit)."""
    spec = _spec(**overrides)
    mapping = map_stages(spec)
    assert mapping.feasible
    n = spec.model.layers
    for stage in mapping.stages:
        first, last = stage.index == 0, stage.layers[-1] == n - 1
        assert (stage.embedding, stage.lm_head) == (first, last)
        hand = _by_hand(spec, stage, stage.layers, first, last)
        mem = stage.memory
        assert mem.usable == USABLE
        assert mem.weights == pytest.approx(hand["weights"], rel=1e-12)
        assert mem.kv_cache == pytest.approx(hand["kv_cache"], rel=1e-12)
        assert mem.activations == pytest.approx(hand["activations"], rel=1e-12)
        assert mem.total == pytest.approx(sum(hand.values()), rel=1e-12)
        assert sum(hand.values()) <= USABLE
        if not last:
            more = stage.layers + (stage.layers[-1] + 1,)
            assert sum(_by_hand(spec, stage, more, first, more[-1] == n - 1).values()) > USABLE


def test_the_longest_output_that_fits_is_the_boundary() -> None:
    """3 layers a stage on 2 × 4 grids (7 layers: stages of 3, 3, 1). The first stage has the least room
    (weights 3·9,320 + 4,096 = 32,056 B, activations 1,024 B, so 3,784 B for a KV cache growing 3·128/8 =
    48 B a token): 3,784 / 48 = 78.8 tokens of context, less the 16 of the prompt: an output of 62
    fits, 63 does not."""
    fixed = {"model.layers": 7, "inference.grid": "2x4", "inference.layers_per_stage": 3}
    fits = _map(**fixed, **{"inference.output_len": 62})
    assert fits.feasible and min(s.memory.max_output for s in fits.stages) == 62
    assert fits.stages[0].memory.max_output == 62
    over = _map(**fixed, **{"inference.output_len": 63})
    assert not over.feasible and "stage 0 (3 layers)" in over.reason
    assert "the longest output that fits is 62" in over.reason
