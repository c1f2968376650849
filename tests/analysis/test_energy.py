"""A run's energy (wsesim.analysis.energy, docs/model.md §12): the events a serving run's stages and a
training step count, by hand on tiny8 (fp16 FMAC 1 pJ, SRAM 0.5 pJ a byte read and 1 pJ written, 2 pJ
a wavelet-hop, 10 pJ an I/O byte, 1 W floor), and the invariants: energy at least the floor over the
run, more work more energy, the same from both executors and from a second run, n/a and not 0 without
an energy section or a price."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from wsesim.config.inference import load_inference_data
from wsesim.config.loader import load_experiment_data
from wsesim.experiments.runner import run_experiment, run_inference

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 8, "output_len": 3}, "grid": "1x1"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
         "hardware.pe.sram": "1 MiB"}
PER_FMAC = 1e-12 + 4 * 0.5e-12 + 2 * 1e-12  # an fp16 FMAC, its 4 B read and its 2 B written: 5 pJ


def _serve(overrides: dict | None = None, engine: str = "fast", data: dict | None = None):
    spec = load_inference_data(data or TINY, overrides={**DENSE, **(overrides or {})}).spec
    return run_inference(spec.on(engine))


def test_serving_energy_on_one_pe_by_hand() -> None:
    """The dense tiny model (2 layers, H = 64, q 64, k and v 32, F = 96 SwiGLU, 4 heads, vocabulary 256) on one
    PE of tiny8 (tests/sim/test_serving.py times its kernels), one request, 8 prompt tokens, 3 output tokens.
    FMACs, an elementwise op on a value counted as one:

    a decode layer at context T: attn_norm 2·64 = 128, qkv 64·128 = 8,192, rope 4·96 = 384, scores 64·T,
    softmax 3·4T, context 64·T, o_proj 4,096, residual 64, ffn_norm 128, gate_up 64·192 = 12,288,
    activation 4·96 = 384, down 96·64 = 6,144, residual 64: 31,872 + 140·T; two layers and the LM head's
    GEMV (64·256 = 16,384): 80,128 + 280·T, so 82,648 at T = 9 and 82,928 at T = 10.
    The prefill, per layer: GEMMs qkv 8·64·128 = 65,536, scores 8·64·8 = 4,096, context 4,096, o_proj
    32,768, gate_up 98,304, down 49,152; elementwise attn_norm 2·512, rope 4·768, softmax 3·256, ffn_norm
    3·512, activation 4·768, residual 2·512: 264,448; two layers and the LM head: 545,280.
    In all 710,856 FMACs at 5 pJ = 3.55428 µJ; one stage on one wafer moves nothing over the fabric or the
    I/O; the floor is 1 W over the run's cycles at 1 GHz."""
    run = _serve()
    cost, = run.costs.stages
    b = cost.batches  # an iteration's events: (decodes, longest, pieces, prompt tokens, reach, prompts ended)
    assert b.counts(0, 0, 1, 8, 8, 1).fmacs_fp16 == 545_280
    assert [b.counts(1, T, 0, 0, 0, 0).fmacs_fp16 for T in (9, 10)] == [80_128 + 280 * 9, 80_128 + 280 * 10] \
        == [82_648, 82_928]
    r = run.result
    assert r.energy_events == {"fmacs_fp16": 710_856, "fmacs_fp32": 0, "sram_read_bytes": 4 * 710_856,
                               "sram_write_bytes": 2 * 710_856, "wavelet_hops": 0, "io_bytes": 0,
                               "instruction_cycles": 0}  # tiny8 issues and launches in 0 cycles
    assert r.energy_by_part_j["fmac"] + r.energy_by_part_j["sram"] == pytest.approx(710_856 * PER_FMAC, rel=1e-12)
    assert r.energy_by_part_j["static"] == pytest.approx(1.0 * r.end_to_end_s, rel=1e-12)
    assert r.energy_j == pytest.approx(710_856 * PER_FMAC + r.end_to_end_s, rel=1e-12)
    assert r.joules_per_token == pytest.approx(r.energy_j / 3, rel=1e-12)  # one request, 3 output tokens
    assert r.power_w == pytest.approx(r.energy_j / r.end_to_end_s, rel=1e-12)
    assert r.tokens_per_s_per_kw == pytest.approx(r.tokens_per_s / (r.power_w / 1e3), rel=1e-12)


def test_a_hand_off_between_wafers_is_io_and_on_a_wafer_wavelet_hops() -> None:
    """One layer a stage on 2 whole tiny8 wafers: the prefill's 8 × 64 activations (1,024 B in bf16) leave one
    system and enter the other, 2,048 B of I/O; a decode step's 64 values 256 B; the new token back, one
    value, 4 B, after every token but the last (the request's last token is not sent back). On one wafer the same hand-off runs over the fabric between 2 × 2 stages ``hops`` apart, the
    values spread over the 2 rows, 2 fp16 values a wavelet: a decode step's 64 values are 16 wavelets a row,
    2 · 16 · hops wavelet-hops; the prefill's 512 values 128 wavelets a row, 2 · 128 · hops."""
    two = {**TINY, "inference": {**TINY["inference"], "grid": "8x8", "layers_per_stage": 1, "interconnect": "swarmx"}}
    run = _serve(data=two)
    assert run.result.systems == 2
    first, last = run.costs.stages
    moved = first.batches.handoff_counts, last.batches.handoff_counts
    assert (moved[0](8 * 64).io_bytes, moved[0](64).io_bytes, moved[1](1).io_bytes) == (2048, 256, 4)
    assert run.result.energy_by_part_j["io"] == pytest.approx(10e-12 * (2048 + 4 + 2 * 256 + 4), rel=1e-12)
    one = {**TINY, "inference": {**TINY["inference"], "grid": "2x2", "layers_per_stage": 1}}
    run = _serve(data=one)
    (a, _), work = run.costs.stages, run.program.body[0].stages
    hops = abs(work[0].stage.origin[1] - work[1].stage.origin[1]) + abs(work[0].stage.origin[0]
                                                                         - work[1].stage.origin[0])
    assert hops >= 1 and run.result.systems == 1
    moved = a.batches.handoff_counts
    assert moved(64).wavelet_hops == 2 * 16 * hops and moved(64).io_bytes == 0
    assert moved(8 * 64).wavelet_hops == 2 * 128 * hops


def test_both_executors_and_a_second_run_give_the_same_energy() -> None:
    fast, again, reference = (_serve({"inference.scheduler.batch": 3}), _serve({"inference.scheduler.batch": 3}),
                              _serve({"inference.scheduler.batch": 3}, engine="reference"))
    keys = ("energy_j", "energy_by_part_j", "energy_events", "joules_per_token", "power_w", "tokens_per_s_per_kw")
    picked = [json.dumps({k: r.result.to_dict()[k] for k in keys}) for r in (fast, again, reference)]
    assert picked[0] == picked[1] == picked[2]


def test_energy_is_at_least_the_floor_and_grows_with_the_work() -> None:
    short, long, wide = _serve(), _serve({"inference.load.output_len": 6}), _serve({"inference.scheduler.batch": 2})
    for r in (short.result, long.result, wide.result):
        assert r.energy_j >= r.energy_by_part_j["static"] == pytest.approx(1.0 * r.end_to_end_s, rel=1e-12)
    assert long.result.energy_j > short.result.energy_j and wide.result.energy_j > short.result.energy_j
    # twice the requests, twice the events (each request's visits are the same work)
    assert wide.result.energy_events["fmacs_fp16"] == 2 * short.result.energy_events["fmacs_fp16"]


def test_price_gives_dollars_per_million_tokens_and_no_price_is_none() -> None:
    """$36 an hour for one system over the run's seconds, for 3 output tokens: 36 · s / 3600 / 3 · 1e6."""
    assert _serve().result.usd_per_million_tokens is None
    r = _serve({"inference.economics.price_per_system_hour": 36}).result
    assert r.usd_per_million_tokens == pytest.approx(36 * r.end_to_end_s / 3600 / 3 * 1e6, rel=1e-12)


def test_hardware_without_energy_section_gives_none_not_zero() -> None:
    data = {**TINY, "hardware": {**_tiny8_without_energy()}}
    r = _serve(data=data).result
    assert r.feasible and r.energy_j is None and r.joules_per_token is None and r.tokens_per_s_per_kw is None
    assert r.energy_events["fmacs_fp16"] == 710_856  # the events are counted all the same


def _tiny8_without_energy() -> dict:
    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "hardware" / "tiny8.yaml").read_text("utf-8"))
    data.pop("energy")
    return data


# ----------------------------------------------------------------------------------------------- training

BASE = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2}}


def test_training_energy_by_hand_from_the_step_counts() -> None:
    """tiny-moe is bf16 (fp16 lanes): the step's executed FLOPs / 2 FMACs at 5 pJ with their SRAM traffic, its
    I/O bytes (in and out) at 10 pJ, no wavelet-hops (the step's fabric model counts none), 1 W over the step;
    per token: over the step's G·B·S tokens."""
    spec = load_experiment_data(BASE).spec
    r = run_experiment(spec)
    assert r.feasible
    fmacs = r.energy_fmac_j / 1e-12
    assert r.energy_sram_j == pytest.approx(fmacs * 4e-12, rel=1e-12)  # 4 B · 0.5 pJ + 2 B · 1 pJ
    assert r.energy_io_j == pytest.approx((r.io_bytes_in + r.io_bytes_out) * 10e-12, rel=1e-12)
    assert r.energy_fabric_j == 0 and r.energy_static_j == pytest.approx(r.step_time_s, rel=1e-12)
    assert r.energy_per_step_j == pytest.approx(r.energy_fmac_j + r.energy_sram_j + r.energy_io_j
                                                + r.energy_static_j, rel=1e-12)
    assert r.joules_per_token == pytest.approx(r.energy_per_step_j / r.tokens_per_step, rel=1e-12)
    assert r.power_w == pytest.approx(r.energy_per_step_j / r.step_time_s, rel=1e-12)


def test_training_fmacs_are_the_steps_flops_and_grow_with_the_work() -> None:
    """The FMACs priced are the executed FLOPs / 2 (recomputation included), which grow with the batch."""
    from wsesim.experiments.runner import simulate_experiment

    spec = load_experiment_data(BASE).spec
    run = simulate_experiment(spec)
    assert run.result.energy_fmac_j == pytest.approx(run.trace.executed_flops / 2 * 1e-12, rel=1e-12)
    one, two = (run_experiment(load_experiment_data(BASE, overrides={"training.micro_batches": n}).spec)
                for n in (1, 2))
    assert two.energy_per_step_j > one.energy_per_step_j >= one.energy_static_j


def test_training_energy_is_deterministic_and_none_without_an_energy_section() -> None:
    a, b = ({k: v for k, v in run_experiment(load_experiment_data(BASE).spec).to_dict().items() if k != "wall_s"}
            for _ in range(2))
    assert json.dumps(a) == json.dumps(b) and a["energy_per_step_j"] > 0
    spec = load_experiment_data({**BASE, "hardware": _tiny8_without_energy()}).spec
    r = run_experiment(spec)
    assert r.feasible and r.energy_per_step_j is None and r.joules_per_token is None and r.energy_static_j is None


def test_without_batching_every_iteration_carries_one_token() -> None:
    """``batching: none``: each iteration of the log (whose events the energy sums) is one request's prompt
    or one decode token: 3 requests × 3 tokens an iteration each at every stage, in both executors alike."""
    two = {**TINY, "inference": {**TINY["inference"], "grid": "2x2", "layers_per_stage": 1,
                                                 "scheduler": {"batch": 3, "batching": "none"}}}
    logs = [_serve(data=two, engine=engine).trace.batches for engine in ("fast", "reference")]
    for log in logs:
        assert ((log.decodes + log.pieces) == 1).all()
        assert np.bincount(log.stage).tolist() == [9, 9]
    assert all(np.array_equal(getattr(logs[0], k), getattr(logs[1], k)) for k in ("stage", "start", "end"))


# ------------------------------------------------------------------------------------- zero energies


def _tiny8_energy_only(event: str) -> dict:
    """tiny8 with every energy value 0 but ``event`` (none: all 0)."""
    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "hardware" / "tiny8.yaml").read_text("utf-8"))
    for name, entry in data["energy"].items():
        if name != event:
            entry["value"] = "0 W" if name == "static" else "0 pJ"
    return data


def test_an_energy_section_of_only_zeros_is_refused_in_one_line() -> None:
    """Every event and the floor at 0 (issue 40: accepted, then a ZeroDivisionError in infer and run): a
    machine that spends nothing, refused at the key ``energy``; one value above 0 is a machine."""
    from wsesim.config.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        _serve(data={**TINY, "hardware": _tiny8_energy_only("")})
    assert "energy: expected at least one event or the static floor above 0, got every value 0" in str(e.value)
    assert "\n" not in str(e.value)
    assert _serve(data={**TINY, "hardware": _tiny8_energy_only("static")}).result.energy_j > 0


def test_a_run_whose_counted_events_cost_nothing_prints_and_has_no_tokens_per_kw() -> None:
    """Only I/O bytes cost energy and one stage on one wafer moves none (nor does a training step count a
    wavelet-hop): the run's energy is 0 J, its tokens/s per kW n/a (None, not 0), and the printouts, which
    divided by the energy for the floor's share, say what happened."""
    from wsesim.cli.infer import format_serving
    from wsesim.cli.run import energy_rows

    r = _serve(data={**TINY, "hardware": _tiny8_energy_only("io")}).result
    assert r.energy_j == 0 and r.joules_per_token == 0 and r.tokens_per_s_per_kw is None
    text = format_serving(r)
    assert "no event it counted costs energy, nor the floor" in text and "n/a (no power drawn)" in text
    spec = load_experiment_data({**BASE, "hardware": _tiny8_energy_only("wavelet_hop")}).spec
    t = run_experiment(spec)
    assert t.energy_per_step_j == 0
    assert "no event it counted costs energy" in energy_rows(t)[0][1]


def test_instruction_cycles_are_each_kernels_launch_and_issues_on_every_pe() -> None:
    """tiny8 issues in 0 cycles; with ``runtime.kernel_launch`` L every kernel of the run adds L cycles of
    instruction stream on each PE of its grid, so the run's instruction cycles are L times its kernel
    launches: linear in L (1 and 100 give exactly 1 : 100), 0 at L = 0, on 2 × 2 four times the PEs of
    1 × 1 per launch; each priced at tiny8's 3 pJ (``energy_by_part_j.instruction``)."""
    def cycles(launch: int, grid: str = "1x1") -> tuple[float, float]:
        r = _serve({"hardware.runtime.kernel_launch": f"{launch} cycles", "inference.grid": grid}).result
        return r.energy_events["instruction_cycles"], r.energy_by_part_j["instruction"]

    one, hundred = cycles(1), cycles(100)
    assert one[0] > 0 and hundred[0] == 100 * one[0] and hundred[1] == pytest.approx(3e-12 * hundred[0])
    assert cycles(0) == (0, 0)
    assert one[0] == 100  # one PE: one cycle a launch, 100 launches in the run (its prefill and 2 decodes)
    assert cycles(1, "2x2")[0] == 4 * one[0]  # the same program on 4 PEs


def test_distinct_log_rows_the_same_packed_or_compared_whole() -> None:
    """``batch_counts`` tells a chunk's log rows apart by packing their columns into one integer a row:
    by their spans when those allow, else by each column's rank (the code ranked again when it would
    overflow): each way gives every row the index of a row equal to it, and equal rows the same one."""
    from wsesim.analysis.energy import _distinct

    rng = np.random.default_rng(3)
    small = [rng.integers(0, 4, 500) for _ in range(8)]
    wide = [*small[:7], small[7] * (1 << 61)]  # the spans' product past 2^62: packed by ranks
    # 8 columns of up to 500 values each: 500^8 > 2^62, so the code is ranked again on the way
    many = [rng.integers(0, 500, 500) * (1 << 40) for _ in range(8)]
    for columns in (small, wide, many):
        first, inverse = _distinct(columns)
        table = np.stack(columns, axis=1)
        assert np.array_equal(table[first][inverse], table)
        assert len({tuple(row) for row in table.tolist()}) == len(first)
