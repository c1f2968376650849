"""Physical bounds on every number a spec holds (wsesim.config.specs, issue 12 item 11): each bound itself
is accepted, a value past it is one line naming the key, the range and what came. Values like these
once reached the simulation as an overflow or a division by zero (an internal error, exit 1).
"""

from __future__ import annotations

import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.loader import load_experiment_data

BASE = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe"}


def _load(key: str, value: object) -> object:
    return load_experiment_data(BASE, overrides={key: value}).spec


def _line(key: str, value: object) -> str:
    with pytest.raises(ConfigError) as e:
        _load(key, value)
    return str(e.value)


QUANTITIES = [
    # key, the range in the message, accepted at the bounds, refused past them
    ("hardware.clock", "a frequency from 1 MHz to 100 GHz", ["1 MHz", "100 GHz"], ["0.5 MHz", "1 THz", "1e-300 Hz"]),
    ("hardware.pe.sram", "a size from 1 KiB to 1 TiB", ["1 KiB", "1 TiB"], ["1023 B", "2 TiB", "1e300 B"]),
    ("hardware.pe.sram_bandwidth", "a size from 1 B to 1 MiB", ["1 B", "1 MiB"], ["0.5 B", "2 MiB"]),
    ("hardware.pe.reserved_sram", "a fraction from 0 % to below 100 %", ["0 %", "99.9 %", 0.5], ["100 %", 1, "-1 %"]),
    ("hardware.fabric.link_width", "a size from 1 bit to 64 KiB", ["1 bit", "64 KiB"], ["0.5 bit", "65 KiB"]),
    ("hardware.fabric.hop_latency", "a cycle count from 0 cycles to 100000 cycles", ["0 cycles", "100000 cycles"],
     ["100001 cycles", "1e308 cycles"]),
    ("hardware.fabric.ramp_latency", "a cycle count from 0 cycles to 100000 cycles", ["100000 cycles"],
     ["1e6 cycles"]),
    ("hardware.io.bandwidth", "a bandwidth from 1 MB/s to 1 PB/s", ["1 MB/s", "1 PB/s"],
     ["1e-300 B/s", "0.9 MB/s", "2 PB/s"]),
    ("hardware.runtime.task_overhead", "a cycle count from 0 cycles to 100000000 cycles",
     ["0 cycles", "100000000 cycles"], ["1e308 cycles", "100000001 cycles"]),
    ("hardware.runtime.gemm_efficiency", "a fraction from 0.1 % to 100 %", ["0.1 %", "100 %", 0.001, 1],
     [1e-300, "0.09 %", 1.01, "101 %"]),
    ("hardware.runtime.staging_buffer", "a size from 1 B to 1 TiB", ["1 B"], ["0.5 B", "1e-300 B"]),
]


@pytest.mark.parametrize(("key", "span", "good", "bad"), QUANTITIES, ids=[q[0] for q in QUANTITIES])
def test_quantity_bounds(key: str, span: str, good: list[object], bad: list[object]) -> None:
    for value in good:  # tiny8's 4 KiB staging buffer must fit in what the runtime leaves of the SRAM
        small = {"hardware.runtime.staging_buffer": "8 B"} if key in ("hardware.pe.sram", "hardware.pe.reserved_sram") else {}
        load_experiment_data(BASE, overrides={key: value, **small})
    for value in bad:
        got = f'"{value}"' if isinstance(value, str) else repr(value)
        assert _line(key, value) == f"--set: {key}: expected {span}, got {got}"


COUNTS = [
    ("hardware.mesh.rows", 16_384), ("hardware.mesh.cols", 16_384), ("hardware.pe.simd_width", 65_536),
    ("hardware.fabric.colours", 65_536), ("model.hidden_size", 1_048_576), ("model.layers", 16_384),
    ("model.heads", 16_384), ("model.head_dim", 65_536), ("model.experts", 65_536),
    ("model.expert_intermediate", 1_048_576), ("model.shared_expert_intermediate", 1_048_576),
    ("model.vocab_size", 16_777_216), ("training.seq_len", 16_777_216), ("training.batch_per_tile", 16_777_216),
    ("training.tiles", 16_777_216), ("training.attention_tile", 16_777_216), ("training.seed", 2**64 - 1),
]


@pytest.mark.parametrize(("key", "high"), COUNTS, ids=[c[0] for c in COUNTS])
def test_count_bounds(key: str, high: int) -> None:
    """The bound itself validates (a spec, not a run); one past it is refused, and so is 10^400."""
    extra = {"model.heads": {"model.kv_heads": 16_384}}.get(key, {})
    load_experiment_data(BASE, overrides={key: high, **extra})
    union = " or 'auto'" if key == "training.batch_per_tile" else ""
    assert _line(key, high + 1) == f"--set: {key}: expected a value ≤ {high}{union}, got {high + 1} (an int)"
    assert _line(key, 10**400).startswith(f"--set: {key}: expected a value ≤ {high}{union}, got 1000")


def test_top_k_is_bounded_by_experts() -> None:
    load_experiment_data(BASE, overrides={"model.experts": 65_536, "model.top_k": 65_536})
    assert _line("model.top_k", 65_537) == "--set: model.top_k: expected a value ≤ 65536, got 65537 (an int)"


def test_every_shipped_preset_is_within_the_bounds() -> None:
    """Also checked by validating every preset (test_specs); here the three wafers and the biggest models
    side by side, so a new preset past a bound fails with its name."""
    for hardware in ("tiny8", "wse2", "wse3"):
        for model in ("tiny-moe", "qwen3-30b-a3b", "mixtral-8x7b", "olmoe-1b-7b"):
            load_experiment_data({**BASE, "hardware": hardware, "model": model})
