"""Where a served model lives (docs/model.md §11.1, §11.3): ``map_stages`` and ``grid_candidates`` of
``wsesim.sim.programs.mapping``, checked against layouts and SRAM sums derived by hand on the tiny8 wafer.

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
from wsesim.sim.programs.mapping import (
    Mapping,
    Stage,
    grid_candidates,
    map_stages,
    place_table,
    square_candidates,
)

TINY: dict[str, Any] = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
                        "inference": {"load": {"prompt_len": 16, "output_len": 3}}}
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


@pytest.mark.parametrize(("rows", "cols", "grids"), [
    (8, 8, [(8, 8)]),                                           # a = b = 1 only: 8 // 2 = 4 is below 8
    (16, 16, [(16, 16), (16, 8), (8, 16), (8, 8)]),             # equal areas: more rows first
    # P in 16, 8; Q in 24, 12, 8; 8 x 24 is a strip (24 > 2 · 8), left out
    (16, 24, [(16, 24), (16, 12), (16, 8), (8, 12), (8, 8)]),
    (20, 17, [(20, 17), (10, 17), (10, 8)]),                    # 20 x 8 is a strip (20 > 2 · 8)
    (7, 100, [(7, 100)]),                                       # a side below 8: the mesh itself
])
def test_grid_candidates_tile_the_mesh(rows: int, cols: int, grids: list[tuple[int, int]]) -> None:
    """⌊R/a⌋ × ⌊C/b⌋ for a, b = 1, 2, …, no side below 8, the longer side at most twice the shorter; the
    largest area first, then the squarest, then the most rows."""
    assert grid_candidates(rows, cols) == grids


@pytest.mark.parametrize(("rows", "cols", "sides"), [
    (8, 8, [8]), (16, 16, [16, 8]), (24, 30, [24, 12, 8]), (33, 40, [33, 16, 11, 8]), (20, 17, [17, 8]),
    (7, 100, [7]),                  # a side below 8: one square of the shorter side
])
def test_square_candidates_for_cannon_and_meshgemm(rows: int, cols: int, sides: list[int]) -> None:
    """⌊min(R, C)/k⌋ on a side for k = 1, 2, …, each side once, none below 8."""
    assert square_candidates(rows, cols) == [(s, s) for s in sides]


def test_grid_candidates_on_a_wse3_mesh() -> None:
    """755 × 1,170: the whole wafer, then 1 × 2 grids of 755 × 585 (377 × 1,170 is a strip: 1,170 > 2 ·
    377), then 1 × 3 of 755 × 390 (294,450 PEs, above 2 × 2 of 377 × 585 = 220,545); every candidate a
    whole number of grids across each side, none a strip, none twice, largest first."""
    grids = grid_candidates(755, 1170)
    assert grids[:4] == [(755, 1170), (755, 585), (755, 390), (377, 585)]
    assert len(set(grids)) == len(grids)
    rows_k, cols_k = {755 // a for a in range(1, 95)}, {1170 // b for b in range(1, 147)}
    assert all(p in rows_k and q in cols_k and min(p, q) >= 8 and max(p, q) <= 2 * min(p, q) for p, q in grids)
    areas = [p * q for p, q in grids]
    assert areas == sorted(areas, reverse=True)
    assert (755, 755) not in grids  # 755 is no ⌊1170/b⌋: the square of the old rule does not tile the wafer
# ------------------------------------------------------------------------------------ the layout


def test_stages_fill_a_wafer_row_by_row_with_consecutive_layers() -> None:
    """20 MoE layers on 2 × 4 grids (8 PEs; the 8 × 8 wafer holds 4 rows × 2 columns of them = 8 grids).

    Per PE a layer is 74,560 / 8 = 9,320 B of weights and 128 · 19 tokens / 8 = 304 B of KV cache
    (shift, batch 1, 16 + 3 tokens); activations max(1·64·2·2/4, 16·64·2·4/8) = 1,024 B; the embedding
    or the LM head 32,768 / 8 = 4,096 B. Without the embedding a stage of L layers needs 9,624·L + 1,024
    ≤ 36,864: L ≤ 3.72, so 3 each: six stages take layers 0–17 and the seventh 18–19 with the LM head
    (24,368 B). Spare per PE: 36,864 − 29,896 = 6,968 B on the first six, 12,496 B on the last: the
    embedding table (4,096 B a PE) goes whole onto the last, 28,464 B.
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
    assert [s.embedding for s in mapping.stages] == [False] * 6 + [True]
    assert [s.embedding_bytes for s in mapping.stages] == [0] * 6 + [32_768]
    assert [s.lm_head for s in mapping.stages] == [False] * 6 + [True]
    assert mapping.stages[-1].memory.total == 2 * 9320 + 2 * 304 + 1024 + 4096 + 4096


def test_the_next_wafer_starts_at_its_own_corner() -> None:
    """30 layers at 3 a stage (as above; the last stage holds 3 with the LM head: 33,992 B) are 10 stages:
    8 fill wafer 0, stages 8 and 9 take the first two grids of wafer 1, (0,0) and (0,4). With
    ``systems: auto`` the mapping uses 2 wafers (⌈10 / 8⌉). The last stage has 2,872 B a PE spare, the
    others 6,968 B: the embedding (4,096 B a PE) goes to the first of those, stage 0."""
    mapping = _map(**{"model.layers": 30, "inference.grid": "2x4", "inference.interconnect": LINK})
    assert mapping.feasible and mapping.systems == 2
    assert [s.wafer for s in mapping.stages] == [0] * 8 + [1, 1]
    assert [s.origin for s in mapping.stages[8:]] == [(0, 0), (0, 4)]
    assert [s.layers for s in mapping.stages[8:]] == [(24, 25, 26), (27, 28, 29)]
    assert mapping.stages[-1].lm_head and not mapping.stages[8].embedding
    assert [s.embedding for s in mapping.stages] == [True] + [False] * 9


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
    # one PE: layer 0 74,560 B (the embedding is placed after the layers), KV 128·19 = 2,432 B,
    # activations max(1·64·2·2/1, 16·64·2·4/1) = 8,192 B
    ({"inference.grid": "1x1"},
     ["layer 0 alone needs 85,184 B per PE on a 1x1 grid (weights 74,560, KV cache 2,432, activations "
      "8,192) but 36,864 B are usable"]),
    # systems: auto has a limit of its own (64 wafers), so raising inference.systems is no advice
    ({"model.layers": 2000, "inference.grid": "2x4", "inference.interconnect": LINK},
     ["do not fit 64 wafers at 2x4", "systems: auto tries at most 64 wafers"]),
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


@pytest.mark.parametrize(("layers", "grid", "wafers", "per_stage"), [
    (2, (16, 24), 1, [2]), (150, (16, 24), 1, [150]), (200, (16, 24), 2, [183, 17]),
])
def test_grid_auto_takes_the_fewest_wafers_then_the_most_pes(layers: int, grid: tuple[int, int], wafers: int,
                                                             per_stage: list[int]) -> None:
    """A 16 × 24 mesh; candidates 16 × 24, 16 × 12, 16 × 8, 8 × 12, 8 × 8 (1, 2, 3, 4, 6 a wafer).

    16 × 24 (384 PEs): a layer is 74,560 / 384 = 194.17 B + 128·19 / 384 = 6.33 B of KV cache per PE;
    activations max(64·2·2/24, 16·64·2·4/384) = 21.33 B; a table 85.33 B. A stage holds (36,864 −
    21.33) / 200.5 = 183.76, so 183 layers. 2 layers and 150 fit one such stage with both tables (150 ·
    200.5 + 21.33 + 2 · 85.33 = 30,267 B): the whole wafer, PE use 1. 200 need two wafers on any grid
    (a wafer holds 183, 182, 183, 180, 180 layers on the five): 16 × 24 as 183 + 17 uses all of both
    wafers' PEs; 16 × 12 (91 + 91 + 18, three of four grids) 3/4, 16 × 8 (61 · 3 + 17) 4/6, 8 × 12 5/8,
    8 × 8 7/12.

    And as invariants: no candidate fits on fewer wafers, none on as many with a larger PE use."""
    mesh = {"hardware.mesh.rows": 16, "hardware.mesh.cols": 24, "inference.interconnect": LINK,
            "model.layers": layers}
    chosen = _map(**mesh)
    assert chosen.feasible
    assert (chosen.grid, chosen.systems, [len(s.layers) for s in chosen.stages]) == (grid, wafers, per_stage)
    used = len(chosen.stages) * chosen.grid[0] * chosen.grid[1] / (chosen.systems * 16 * 24)
    for p, q in grid_candidates(16, 24):
        other = _map(**mesh, **{"inference.grid": f"{p}x{q}"})
        if other.feasible:
            assert other.systems >= chosen.systems
            if other.systems == chosen.systems:
                assert len(other.stages) * p * q / (other.systems * 16 * 24) <= used


def test_grid_auto_with_a_mesh_side_below_8_maps_onto_the_whole_mesh() -> None:
    """A 6 × 7 mesh has no candidate with sides of 8 or more: the one candidate is the mesh itself (it
    was an IndexError)."""
    mapping = _map(**{"hardware.mesh.rows": 6, "hardware.mesh.cols": 7})
    assert mapping.feasible and mapping.grid == (6, 7) and len(mapping.stages) == 1


def test_square_gemms_take_square_grids_only() -> None:
    """Cannon and MeshGEMM need P = Q: with them ``grid: auto`` tries ``square_candidates`` (16 × 16 on a
    16 × 24 mesh), with SUMMA the whole mesh."""
    mesh = {"hardware.mesh.rows": 16, "hardware.mesh.cols": 24}
    assert _map(**mesh).grid == (16, 24)
    for gemm in ("cannon", "meshgemm"):
        assert _map(**mesh, **{"inference.gemm": gemm}).grid == (16, 16)


def test_systems_reports_the_wafers_used_and_allowed() -> None:
    """tiny-moe fits one wafer: with ``systems: 4`` the mapping uses 1 of the 4 allowed."""
    mapping = _map(**{"inference.systems": 4, "inference.interconnect": LINK})
    assert mapping.feasible and (mapping.systems, mapping.allowed) == (1, 4)
    assert _map().allowed is None


@pytest.mark.parametrize(("spares", "table", "shares"), [
    ([10, 5, 3], 4, [4, 0, 0]),          # fits the most spare whole
    ([5, 10, 10], 7, [0, 7, 0]),         # ties: the first of them
    ([10, 5, 3], 12, [8, 3, 1]),         # spread down to one level: 2 left on each
    ([10, 10, 3], 14, [7, 7, 0]),        # level 3: the least spare stage keeps all of its own
    ([10, 5, 3], 19, None),              # 18 spare in all
])
def test_the_embedding_goes_where_sram_is_spare(spares: list[float], table: float,
                                                shares: list[float] | None) -> None:
    assert place_table(spares, table) == shares


def test_a_table_no_spare_holds_goes_to_the_first_stage() -> None:
    """6 layers at 3 a stage on 2 × 4: stage 0 is 3 · 9,320 + 3 · 304 + 1,024 = 29,896 B (6,968 B spare
    a PE), stage 1 with the LM head 33,992 B (2,872 spare): 4,096 B of table a PE fit stage 0 whole. At
    4 layers a stage (7 layers: 4 + 3) stage 0 has 36,864 − 39,520 < 0 spare, stage 1 2,872: the spares
    are short of 4,096, so the table goes to the first stage, as before (and overflows it)."""
    fits = _map(**{"model.layers": 6, "inference.grid": "2x4"})
    assert [s.embedding for s in fits.stages] == [True, False]
    over = _map(**{"model.layers": 7, "inference.grid": "2x4", "inference.layers_per_stage": 4})
    assert [s.embedding_bytes for s in over.stages] == [32_768, 0]


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


def _by_hand(spec: Any, stage: Stage, layers: tuple[int, ...], last: bool) -> dict[str, float]:
    """§11.3's SRAM per PE of a stage holding ``layers`` and its share of the embedding table: weights,
    KV cache, activations."""
    m, inf = spec.model, spec.inference
    P, Q, pes, bpv = stage.rows, stage.cols, stage.rows * stage.cols, m.bytes_per_value
    table = m.vocab_size * m.hidden_size * bpv
    weights = (sum(_layer_bytes(m, i) for i in layers) + stage.embedding_bytes + table * last) / pes
    per_token = 2 * m.kv_heads * m.head_dim * bpv * len(layers) * inf.scheduler.batch
    S, out = inf.load.prompt_len, inf.load.output_len
    kv = per_token * (S + out) / pes if inf.kv_layout == "shift" else per_token * (S / P + out) / Q
    activations = max(inf.scheduler.batch * m.hidden_size * bpv * 2 / Q, S * m.hidden_size * bpv * 4 / pes)
    return {"weights": weights, "kv_cache": kv, "activations": activations}


SRAM_CASES = [
    {"model.layers": 20, "inference.grid": "2x4"},
    {"model.layers": 20, "inference.grid": "4x4", "inference.kv_layout": "concat", "inference.scheduler.batch": 3,
     "inference.load.prompt_len": 32, "inference.load.output_len": 5},
    {**DENSE, "model.layers": 12, "inference.grid": "2x2", "inference.scheduler.batch": 2},
    {"model.layers": 9, "model.dense_layers": 2, "model.ffn_intermediate": 96, "inference.grid": "2x4",
     "inference.kv_layout": "concat"},
    {"model.layers": 60, "hardware.mesh.rows": 16, "hardware.mesh.cols": 16, "inference.interconnect": LINK},
]


@pytest.mark.parametrize("overrides", SRAM_CASES, ids=range(len(SRAM_CASES)))
def test_every_stage_holds_what_its_sram_holds_and_no_more(overrides: dict[str, Any]) -> None:
    """Per stage: weights (its share of the embedding table included), KV cache and activations are
    §11.3's sums; the shares add up to the table; their total is within the usable
    SRAM; and with ``layers_per_stage: auto`` every stage but the last would overflow with its next layer
    (each takes as many layers as fit)."""
    spec = _spec(**overrides)
    mapping = map_stages(spec)
    assert mapping.feasible
    n = spec.model.layers
    assert sum(s.embedding_bytes for s in mapping.stages) == spec.model.vocab_size * spec.model.hidden_size * 2
    for stage in mapping.stages:
        last = stage.layers[-1] == n - 1
        assert (stage.embedding, stage.lm_head) == (stage.embedding_bytes > 0, last)
        hand = _by_hand(spec, stage, stage.layers, last)
        mem = stage.memory
        assert mem.usable == USABLE
        assert mem.weights == pytest.approx(hand["weights"], rel=1e-12)
        assert mem.kv_cache == pytest.approx(hand["kv_cache"], rel=1e-12)
        assert mem.activations == pytest.approx(hand["activations"], rel=1e-12)
        assert mem.total == pytest.approx(sum(hand.values()), rel=1e-12)
        assert sum(hand.values()) <= USABLE
        if not last:
            more = stage.layers + (stage.layers[-1] + 1,)
            assert sum(_by_hand(spec, stage, more, more[-1] == n - 1).values()) > USABLE


def test_the_longest_output_that_fits_is_the_boundary() -> None:
    """3 layers a stage on 2 × 4 grids (7 layers: stages of 3, 3, 1). Stage 2 (one layer and the LM head,
    14,440 B with the activations) has the most spare and takes the embedding table too. Stages 0 and 1
    have the least room (weights 3·9,320 = 27,960 B, activations 1,024 B, so 7,880 B for a KV cache
    growing 3·128/8 = 48 B a token): 7,880 / 48 = 164.2 tokens of context, less the 16 of the prompt:
    an output of 148 fits, 149 does not."""
    fixed = {"model.layers": 7, "inference.grid": "2x4", "inference.layers_per_stage": 3}
    fits = _map(**fixed, **{"inference.load.output_len": 148})
    assert fits.feasible and min(s.memory.max_output for s in fits.stages) == 148
    assert fits.stages[0].memory.max_output == 148 and fits.stages[2].embedding
    over = _map(**fixed, **{"inference.load.output_len": 149})
    assert not over.feasible and "stage 0 (3 layers)" in over.reason
    assert "the longest output that fits is 148" in over.reason


# ------------------------------------------------------------------------------------ the shipped wafers


def _preset(model: str, **overrides: Any) -> Mapping:
    data = {"kind": "inference", "hardware": "wse3", "model": model, "inference": {"interconnect": "swarmx"}}
    return map_stages(load_inference_data(data, overrides=overrides).spec)


@pytest.mark.parametrize("systems", ["auto", 4])
def test_llama_70b_fits_four_cs3s(systems: Any) -> None:
    """Cerebras serves LLaMA 3.1 70B in 16 bits on four CS-3s (hardware/wse3.yaml's reserve is bounded
    by it): 80 layers of 1.711 GB, 20 a wafer on average, on whole-wafer 755 × 1,170 stages. At 12.5 %
    reserved a wafer holds 21 (37.99 GB usable): 21, 21, 21 and 17 with the LM head; the embedding goes
    to the last stage, which has the most spare."""
    mapping = _preset("llama3.1-70b", **{"inference.systems": systems})
    assert mapping.feasible, mapping.reason
    assert (mapping.grid, mapping.systems) == ((755, 1170), 4)
    assert [len(s.layers) for s in mapping.stages] == [21, 21, 21, 17]
    assert mapping.stages[-1].embedding and mapping.stages[-1].lm_head
    assert not _preset("llama3.1-70b", **{"inference.systems": 3}).feasible


def test_rectangles_are_chosen_on_wse3() -> None:
    """LLaMA3-8B fits one WSE-3 on any of its largest grids: the whole 755 × 1,170 wafer uses every PE
    (the old rule's 755 × 755 square left 415 columns idle)."""
    mapping = _preset("llama3-8b")
    assert mapping.feasible and mapping.grid == (755, 1170) and len(mapping.stages) == 1
