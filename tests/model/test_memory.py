"""SRAM accounting (wsesim.model.memory): mlsysim's attention scenario reproduced case by case, per-phase
training memory derived by hand on the tiny wafer and model, and invariants over B, G and SRAM."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from wsesim.config.errors import ConfigError
from wsesim.config.loader import (
    apply_overrides,
    load_experiment,
    load_hardware,
    load_model,
    read_yaml,
    validate,
)
from wsesim.config.specs import HardwareSpec, ModelSpec, TrainingSpec
from wsesim.model.attention_tiling import ATTENTION_PROPERTIES, AttentionTiling
from wsesim.model.memory import (
    PHASES,
    max_batch_per_tile,
    training_memory,
)

REPO = Path(__file__).resolve().parents[2]
CASES = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "mlsysim_cases.yaml").read_text(encoding="utf-8"))["cases"]
UNIT_SCALE = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "count": 1, "dimensionless": 1}

TINY8 = load_hardware("tiny8")
TINY_MOE = load_model("tiny-moe")
WSE2 = load_hardware("wse2")
QWEN3 = load_model("qwen3-30b-a3b")
TINY8_RAW = {k: v for k, v in read_yaml(REPO / "hardware" / "tiny8.yaml").items() if k != "kind"}


def training(**fields: Any) -> TrainingSpec:
    return validate(TrainingSpec, fields, source="<test>")


# ------------------------------------------------------------------------------ mlsysim's scenario


def _scenario(inputs: dict[str, Any]) -> AttentionTiling:
    bpv = inputs["bytes_per_value"]
    return AttentionTiling(**{**inputs, "bytes_per_value": f"{bpv['value']} {bpv['unit']}"})


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_mlsysim_case(case: dict[str, Any]) -> None:
    """Every output of every reference case, in mlsysim's own (decimal) units, to 1e-9 relative."""
    a = _scenario(case["inputs"])
    got = a.mlsysim_units()
    assert set(got) == set(case["outputs"]) == set(ATTENTION_PROPERTIES)
    for name, want in case["outputs"].items():
        value, unit = got[name]
        assert unit == want["unit"], name
        if want["unit"] == "count":
            assert value == want["value"] and isinstance(a.as_dict()[name], int), name
        else:
            assert value == pytest.approx(want.get("exact", want["value"]), rel=1e-9, abs=0), name
        # and in bytes
        assert a.as_dict()[name] == pytest.approx(want.get("exact", want["value"]) * UNIT_SCALE[unit], rel=1e-9)


def test_mlsysim_registered_case_by_hand() -> None:
    """S 4096, d 64, 16 heads, 4 B: score matrix 4096² · 4 = 67,108,864 B; stored standard
    4 · 4096 · 64 · 4 + 2 · 67,108,864 = 4,194,304 + 134,217,728 = 138,412,032 B; stored flash
    4,194,304 + 2 · 4096 · 4 = 4,227,072 B; ratio 138,412,032 / 4,227,072 = 32.7441860…"""
    a = AttentionTiling(seq_len=4096, head_dim=64, tile=128, heads=16, bytes_per_value="4 B")
    assert a.score_matrix == 67_108_864
    assert a.stored_standard == 138_412_032
    assert a.stored_flash == 4_227_072
    assert a.stored_ratio == pytest.approx(138_412_032 / 4_227_072, rel=1e-15)
    assert (a.tiles_per_side, a.tile_count) == (32, 1024)


def test_bits_and_bytes_give_the_same_scenario() -> None:
    args = {"seq_len": 1000, "head_dim": 64, "tile": 128, "heads": 2}
    assert (AttentionTiling(**args, bytes_per_value="16 bit").as_dict()
            == AttentionTiling(**args, bytes_per_value="2 B").as_dict()
            == AttentionTiling(**args, bytes_per_value=2).as_dict())


@pytest.mark.parametrize(
    ("changes", "path", "message"),
    [
        ({"tile": 0}, "tile", "expected a positive integer, got 0"),
        ({"tile": -128}, "tile", "expected a positive integer, got -128"),
        ({"tile": True}, "tile", "expected a positive integer, got True"),
        ({"tile": 128.0}, "tile", "expected a positive integer, got 128.0"),
        ({"seq_len": 0}, "seq_len", "expected a positive integer, got 0"),
        ({"head_dim": -1}, "head_dim", "expected a positive integer, got -1"),
        ({"heads": -1}, "heads", "expected a non-negative integer, got -1"),
        ({"io_tensors": -4}, "io_tensors", "expected a non-negative integer, got -4"),
        ({"stored_square_matrices": -2}, "stored_square_matrices", "expected a non-negative integer, got -2"),
        ({"row_statistics": -2}, "row_statistics", "expected a non-negative integer, got -2"),
        ({"io_tensors": 0, "row_statistics": 0}, "row_statistics", "expected a positive count when io_tensors is 0, got 0"),
        ({"bytes_per_value": "4"}, "bytes_per_value", 'expected a size like "48 KiB", got "4" (no unit)'),
        ({"bytes_per_value": "4 Hz"}, "bytes_per_value", 'expected a size like "48 KiB", got "4 Hz" (a Hz quantity)'),
        ({"bytes_per_value": "0 B"}, "bytes_per_value", "expected a positive size, got 0.0"),
        ({"bytes_per_value": -4}, "bytes_per_value", "expected a positive size, got -4"),
        ({"bytes_per_value": True}, "bytes_per_value", "expected a positive size, got True"),
        ({"bytes_per_value": math.inf}, "bytes_per_value", "expected a positive size, got inf"),
        # past the specs' bounds: 10^200 tokens overflowed a float (an internal error, exit 1)
        ({"seq_len": 10**200}, "seq_len", "expected at most 16777216, got 1" + "0" * 198 + "…"),
        ({"seq_len": 2**24 + 1}, "seq_len", "expected at most 16777216, got 16777217"),
        ({"head_dim": 65_537}, "head_dim", "expected at most 65536, got 65537"),
        ({"tile": 2**24 + 1}, "tile", "expected at most 16777216, got 16777217"),
        ({"heads": 16_385}, "heads", "expected at most 16384, got 16385"),
        ({"io_tensors": 1025}, "io_tensors", "expected at most 1024, got 1025"),
        ({"bytes_per_value": "1e300 B"}, "bytes_per_value", "expected at most 64 B per value, got 1e+300 B"),
    ],
)
def test_attention_tiling_refuses(changes: dict[str, Any], path: str, message: str) -> None:
    args = {"seq_len": 4096, "head_dim": 64, "tile": 128, "heads": 16, "bytes_per_value": "4 B", **changes}
    with pytest.raises(ConfigError) as e:
        AttentionTiling(**args)
    assert (e.value.path, e.value.message) == (path, message)
    assert str(e.value) == f"{path}: {message}"


def test_zero_counts_are_allowed() -> None:
    a = AttentionTiling(seq_len=64, head_dim=16, tile=128, heads=0, bytes_per_value=2, stored_square_matrices=0)
    assert (a.all_heads_scores, a.stored_standard, a.stored_ratio) == (0, a.io_bytes, a.io_bytes / a.stored_flash)


# ------------------------------------------------------------------------- training memory by hand

def test_tiny_training_memory_by_hand() -> None:
    """Per-phase bytes per PE from the formulas in memory.py.

    tiny8: P = 64 PEs, 48 KiB = 49,152 B each (the capacity), 25 % reserved, 4 KiB staging.
    tiny-moe: H 64, L 2, 4 heads and 2 KV heads of d 16, 4 experts (top 2) of I 32, V 256, bf16 (b = 2).
    Training: S 64, recompute, standard attention, fp32 accumulation (acc = 4), B 1, G 1: 64 tokens.

    common to every phase (bytes per PE):
      reserved          ceil(49,152 · 0.25)                                          = 12,288
      staging           4 KiB                                                        =  4,096
      resident_weights  attention params H·d·(2·4 + 2·2) + 2H + 2d = 12,288 + 160 = 12,448;
                        (12,448 + router H·E = 256) · 2 B = 25,408; / 64              =    397
      stored_activations L · tokens · H · b = 2 · 64 · 64 · 2 = 16,384; / 64         =    256
      concat_buffer     tokens · H · b = 64 · 64 · 2 = 8,192; / 64                    =    128
                                                                                sum   = 17,165
    attention_fwd: Q,O per head and K,V per KV head (2·4 + 2·2) · 64 · 16 · 2 = 24,576, plus
      2 S×S per head 4 · 2 · 64² · 2 = 65,536: 90,112 / 64 = 1,408             total  = 18,573
    experts_fwd: per token (2H + E + k·(2H + 2I)) · b = (128 + 4 + 2 · 192) · 2 = 1,032;
      64 · 1,032 / 64 = 1,032                                                   total  = 18,197
    lm_head: per token V · acc = 1,024; 64 · 1,024 / 64 = 1,024; its resident weights
      V · H · b = 256 · 64 · 2 = 32,768; / 64 = 512                             total  = 18,701
    experts_bwd: recompute 1,032, plus gradients (k·(2I + H) + H) · b = (2 · 128 + 64) · 2 = 640
                                                                                total  = 18,837
    attention_bwd: recompute per token (2H + 2·4·16 + 2·2·16) · 2 = 640 · 64 / 64 = 640, plus
      2 · 24,576 + 3 · 4 · 64² · 4 = 49,152 + 196,608 = 245,760; / 64 = 3,840    total  = 21,645 (peak)
    """
    mem = training_memory(TINY8, TINY_MOE, training(seq_len=64), batch_per_tile=1, tiles=1)
    common = {"reserved": 12_288, "staging": 4_096, "resident_weights": 397, "stored_activations": 256,
              "concat_buffer": 128}
    expected = {
        "attention_fwd": {**common, "attention_transient": 1_408},
        "experts_fwd": {**common, "expert_transient": 1_032},
        "lm_head": {**common, "lm_head_weights": 512, "lm_head_transient": 1_024},
        "experts_bwd": {**common, "expert_recompute": 1_032, "expert_transient": 640},
        "attention_bwd": {**common, "attention_recompute": 640, "attention_transient": 3_840},
    }
    assert [p.phase for p in mem.phases] == [p for p in PHASES if not p.startswith("ffn")]  # no dense layers
    assert {p.phase: p.components for p in mem.phases} == expected
    assert [p.total for p in mem.phases] == [18_573, 18_197, 18_701, 18_837, 21_645]
    assert (mem.pes, mem.capacity_bytes_per_pe, mem.batch_per_tile, mem.tiles) == (64, 49_152, 1, 1)
    assert (mem.binding.phase, mem.peak_bytes_per_pe, mem.feasible, mem.reason) == ("attention_bwd", 21_645, True, "")


def test_tiny_training_memory_store_policy() -> None:
    """``store`` keeps, per layer and token, attention's 640 B and the experts' 1,032 B, and per sequence the
    probabilities 4 · 64² · 2 = 32,768 B: 2 · (64 · 1,672 + 32,768) / 64 = 4,368 B; nothing is recomputed.
    common = 12,288 + 4,096 + 397 + 4,368 + 128 = 21,277; attention_bwd 21,277 + 3,840 = 25,117."""
    mem = training_memory(TINY8, TINY_MOE, training(seq_len=64, activations="store"), batch_per_tile=1)
    phases = {p.phase: p for p in mem.phases}
    assert phases["attention_fwd"].components["stored_activations"] == 4_368
    assert "expert_recompute" not in phases["experts_bwd"].components
    assert "attention_recompute" not in phases["attention_bwd"].components
    assert [p.total for p in mem.phases] == [22_685, 22_309, 22_813, 21_917, 25_117]


def test_tiny_training_memory_flash_kernel() -> None:
    """Flash with 16-token tiles: forward 24,576 + 4 heads · 2 stats · 64 · 4 + 4 · 16² · 4 = 30,720 → 480 B;
    backward 49,152 + 3 · 4 · 64 · 4 + 3 · 4 · 16² · 4 = 64,512 → 1,008 B. Attention no longer binds:
    experts_bwd (18,837) does, above attention_bwd 17,165 + 640 + 1,008 = 18,813."""
    mem = training_memory(TINY8, TINY_MOE, training(seq_len=64, attention_kernel="flash", attention_tile=16),
                          batch_per_tile=1)
    phases = {p.phase: p for p in mem.phases}
    assert phases["attention_fwd"].components["attention_transient"] == 480
    assert phases["attention_bwd"].components["attention_transient"] == 1_008
    assert (phases["attention_bwd"].total, mem.binding.phase, mem.peak_bytes_per_pe) == (18_813, "experts_bwd", 18_837)


def test_a_tensor_spread_over_the_wafer_rounds_up() -> None:
    """S 1: the experts' 1,032 B for the one token cost ceil(1,032 / 64) = ceil(16.125) = 17 B per PE, their
    gradients ceil(640 / 64) = 10; attention's backward (2 · 384 + 3 · 4 · 1 · 4) = 816 → ceil(12.75) = 13."""
    phases = {p.phase: p.components for p in training_memory(TINY8, TINY_MOE, training(seq_len=1),
                                                               batch_per_tile=1).phases}
    assert phases["experts_fwd"]["expert_transient"] == 17
    assert (phases["experts_bwd"]["expert_recompute"], phases["experts_bwd"]["expert_transient"]) == (17, 10)
    assert phases["attention_bwd"]["attention_transient"] == 13


def test_tiny_max_batch_by_hand() -> None:
    """At G 1 every component but the fixed 12,288 + 4,096 + 397 = 16,781 B grows linearly with B, and
    attention_bwd grows fastest: 256 + 128 + 640 + 3,840 = 4,864 B per sequence. 16,781 + 6 · 4,864 =
    45,965 ≤ 49,152 < 16,781 + 7 · 4,864 = 50,829, so B = 6."""
    t = training(seq_len=64)
    assert max_batch_per_tile(TINY8, TINY_MOE, t) == 6
    assert training_memory(TINY8, TINY_MOE, t, batch_per_tile=6).peak_bytes_per_pe == 45_965
    mem = training_memory(TINY8, TINY_MOE, t, batch_per_tile=7)
    assert (mem.feasible, mem.peak_bytes_per_pe, mem.binding.phase) == (False, 50_829, "attention_bwd")


def test_tiles_cap_the_batch_through_the_experts() -> None:
    """At G 8 the experts see B̃ = 8B sequences: experts_bwd = 16,781 + 8 · 384 · B + 8 · 1,672 · B
    = 16,781 + 16,448 · B, which fits at B 1 (33,229) but not at B 2 (49,677 > 49,152)."""
    t = training(seq_len=64, tiles=8)
    assert max_batch_per_tile(TINY8, TINY_MOE, t) == 1
    assert max_batch_per_tile(TINY8, TINY_MOE, training(seq_len=64), tiles=8) == 1
    one = training_memory(TINY8, TINY_MOE, t, batch_per_tile=1)
    assert (one.binding.phase, one.peak_bytes_per_pe, one.feasible) == ("experts_bwd", 33_229, True)
    two = training_memory(TINY8, TINY_MOE, t, batch_per_tile=2)
    assert (two.binding.phase, two.peak_bytes_per_pe, two.feasible) == ("experts_bwd", 49_677, False)


def test_infeasible_is_a_result_not_an_exception() -> None:
    mem = training_memory(TINY8, TINY_MOE, training(seq_len=64), batch_per_tile=7)
    assert not mem.feasible
    # issue 40: the byte counts grouped in thousands ("needs 664459 B per PE" read as a run of digits)
    assert mem.reason == ("SRAM: phase attention_bwd needs 50,829 B per PE (largest part: attention_transient, "
                          "26,880 B) but 49,152 B are available (B=7, G=1)")
    huge = training_memory(WSE2, QWEN3, training(seq_len=32_768), batch_per_tile=10**6, tiles=64)
    assert not huge.feasible and huge.binding.phase in huge.reason and f"{huge.capacity_bytes_per_pe:,}" in huge.reason


def test_nothing_fits_gives_zero() -> None:
    """S 4096 on tiny8: attention_bwd alone needs 3 · 4 · 4096² · 4 / 64 ≈ 12.6 MB per PE."""
    t = training(seq_len=4096)
    assert max_batch_per_tile(TINY8, TINY_MOE, t) == 0
    assert not training_memory(TINY8, TINY_MOE, t, batch_per_tile=1).feasible


def test_qwen3_on_wse2_auto_batch_is_positive() -> None:
    spec = load_experiment().spec  # the shipped Qwen3-30B-A3B on WSE-2 example
    B = max_batch_per_tile(spec.hardware, spec.model, spec.training)
    assert B > 0
    assert training_memory(spec.hardware, spec.model, spec.training, batch_per_tile=B).feasible
    assert not training_memory(spec.hardware, spec.model, spec.training, batch_per_tile=B + 1).feasible


# -------------------------------------------------------------------------------------- invariants

CONFIGS: list[tuple[HardwareSpec, ModelSpec, dict[str, Any]]] = [
    (TINY8, TINY_MOE, {"seq_len": 64}),
    (TINY8, TINY_MOE, {"seq_len": 64, "activations": "store"}),
    (TINY8, TINY_MOE, {"seq_len": 128, "attention_kernel": "flash", "attention_tile": 32}),
    (TINY8, TINY_MOE, {"seq_len": 32, "activations": "store", "attention_kernel": "flash",
                       "accumulate_dtype": "fp16"}),
    (TINY8, TINY_MOE, {"seq_len": 4096}),
    (WSE2, QWEN3, {"seq_len": 2048}),
    (WSE2, QWEN3, {"seq_len": 4096, "activations": "store", "attention_kernel": "flash"}),
]
CONFIG_IDS = ["tiny-recompute", "tiny-store", "tiny-flash", "tiny-store-flash-fp16", "tiny-long",
              "qwen3-wse2", "qwen3-wse2-store-flash"]


@pytest.mark.parametrize("tiles", [1, 2, 8])
@pytest.mark.parametrize(("hw", "model", "fields"), CONFIGS, ids=CONFIG_IDS)
def test_max_batch_fits_and_one_more_does_not(hw: HardwareSpec, model: ModelSpec, fields: dict[str, Any],
                                              tiles: int) -> None:
    t = training(**fields)
    B = max_batch_per_tile(hw, model, t, tiles=tiles)
    assert not training_memory(hw, model, t, batch_per_tile=B + 1, tiles=tiles).feasible
    if B:
        assert training_memory(hw, model, t, batch_per_tile=B, tiles=tiles).feasible


@settings(max_examples=40, deadline=None)
@given(config=st.sampled_from(CONFIGS), B=st.integers(1, 64), G=st.integers(1, 16))
def test_peak_is_monotone_in_batch_and_tiles(config: tuple[HardwareSpec, ModelSpec, dict[str, Any]],
                                            B: int, G: int) -> None:
    hw, model, fields = config
    t = training(**fields)
    base = training_memory(hw, model, t, batch_per_tile=B, tiles=G)
    for more in (training_memory(hw, model, t, batch_per_tile=B + 1, tiles=G),
                 training_memory(hw, model, t, batch_per_tile=B, tiles=G + 1)):
        assert more.peak_bytes_per_pe >= base.peak_bytes_per_pe
        for a, b in zip(base.phases, more.phases, strict=True):
            assert b.total >= a.total
            assert all(b.components[c] >= n for c, n in a.components.items())
        assert base.feasible or not more.feasible


@settings(max_examples=40, deadline=None)
@given(sram=st.integers(8 * 1024, 512 * 1024), extra=st.integers(0, 512 * 1024),
       config=st.sampled_from([c for c in CONFIGS if c[0] is TINY8]), B=st.integers(1, 8), G=st.integers(1, 4))
def test_more_sram_never_makes_a_feasible_configuration_infeasible(
        sram: int, extra: int, config: tuple[HardwareSpec, ModelSpec, dict[str, Any]], B: int, G: int) -> None:
    _, model, fields = config
    t = training(**fields)
    small, large = (validate(HardwareSpec, apply_overrides(TINY8_RAW, {"pe.sram": f"{n} B"}), source="<test>")
                    for n in (sram, sram + extra))
    a = training_memory(small, model, t, batch_per_tile=B, tiles=G)
    b = training_memory(large, model, t, batch_per_tile=B, tiles=G)
    assert b.capacity_bytes_per_pe - b.phases[0].components["reserved"] >= \
        a.capacity_bytes_per_pe - a.phases[0].components["reserved"]
    assert b.feasible or not a.feasible
    assert max_batch_per_tile(large, model, t, tiles=G) >= max_batch_per_tile(small, model, t, tiles=G)


def test_common_components_are_the_same_in_every_phase() -> None:
    """Stored activations are counted at their peak in every phase, and so are the fixed parts."""
    mem = training_memory(WSE2, QWEN3, training(seq_len=2048, activations="store"), batch_per_tile=2, tiles=4)
    for name in ("reserved", "staging", "resident_weights", "stored_activations", "concat_buffer"):
        assert len({p.components[name] for p in mem.phases}) == 1, name
