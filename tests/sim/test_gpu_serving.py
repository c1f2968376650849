"""Serving on GPUs (docs/model.md §13.7): a decode iteration's cost by hand, one request's run as the sum of
its iterations, both executors in agreement, the mapping's nodes, the energy's parts, and what a GPU run
refuses in one line."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.inference import load_inference
from wsesim.experiments.runner import run_inference

# one layer whose every GEMM is HBM-bound at M = 1 with no split-K (N a multiple of 132 SMs x 64 columns):
# hidden, heads x head_dim, FFN and vocabulary all 8,448
WIDE = {"model.hidden_size": 8448, "model.heads": 66, "model.kv_heads": 66, "model.head_dim": 128,
        "model.ffn_intermediate": 8448, "model.vocab_size": 8448, "model.layers": 1,
        "inference.tensor_parallel": 1}


def _spec(model: str = "llama3-8b", hardware: str = "h100", **over):
    return load_inference(model=model, hardware=hardware, overrides=over).spec


def _station(spec):
    from wsesim.sim.cost.gpu_serving import gpu_stations
    from wsesim.sim.programs.builders.gpu import gpu_mapping

    return gpu_stations(spec, gpu_mapping(spec))[0]


def test_a_decode_iteration_on_one_h100_by_hand() -> None:
    """One decode token at context c on one H100, every kernel HBM-bound, replayed from a CUDA graph: the
    graph's one launch (2.4 us) plus every byte read or written over 3.35 TB/s. With H = 8,448 and b = 2:
    the GEMMs' weights (qkv 3H², o H², gate_up 2H², down H², lm_head H²) 8H² values and their input and
    output vectors (qkv H + 3H, o 2H, gate_up H + 2H, down 2H, lm_head 2H) 13H values; the element-wise
    kernels (embedding 2H, two norms 2H each, RoPE 2·2H, two residual adds 3H each, the SwiGLU 3H, the
    sampling's read H) 20H; the decode attention's K and V, 2·66 heads·128·c = 2Hc, its query and output
    2H. Bytes = 2·(8H² + 35H + 2Hc)."""
    H, c = 8448, 300
    st = _station(_spec(**WIDE))
    expected = 2.4e-6 + 2 * (8 * H * H + 35 * H + 2 * H * c) / 3.35e12
    assert st.iteration(1, c, []) / 1.83e9 == pytest.approx(expected, rel=1e-12)


def test_a_request_alone_is_the_sum_of_its_iterations() -> None:
    """One request of 64 + 16 tokens on a node of eight H100s: its end to end is its prefill iteration and
    its 15 decode iterations, at contexts 65 … 79, and nothing else (one node: no hand-off)."""
    spec = _spec(**{"inference.load.prompt_len": 64, "inference.load.output_len": 16})
    run = run_inference(spec)
    st = run.costs.stages[0].batches
    cycles = st.iteration(0, 0, [(64, 0, True)]) + sum(st.iteration(1, 64 + j, []) for j in range(1, 16))
    assert run.result.end_to_end_s * 1.83e9 == pytest.approx(cycles, rel=1e-12)
    assert run.result.ttft_s * 1.83e9 == pytest.approx(st.iteration(0, 0, [(64, 0, True)]), rel=1e-12)


CASES = {
    "dense, chunked, lognormal": ("llama3-8b", {"inference.scheduler.prefill": "chunked", "inference.scheduler.token_budget": 96}),
    "dense, two nodes": ("llama3-8b", {"hardware.hbm.capacity": "1.5 GB"}),
    "MoE, prefill first": ("qwen3-30b-a3b", {}),
    "paged, recompute": ("llama3-8b", {"inference.scheduler.kv_block": 16, "hardware.hbm.capacity": "2016 MB", "inference.load.lengths": {"lognormal": 1.5},
                                       "inference.tensor_parallel": 8}),
}


@pytest.mark.parametrize("case", CASES)
def test_both_executors_agree_exactly_on_gpus(case: str) -> None:
    """Every admission, first token, finish and iteration bit for bit, fast against reference."""
    model, over = CASES[case]
    spec = _spec(model, **{"inference.load.arrival": "poisson", "inference.load.rate": 400.0, "inference.load.requests": 24,
                           "inference.scheduler.batch": 6, "inference.load.prompt_len": 64, "inference.load.output_len": 12,
                           "inference.load.lengths": "lognormal", **over})
    fast, ref = (run_inference(spec.on(engine)).trace.batches for engine in ("fast", "reference"))
    for name in fast.__dataclass_fields__:
        x, y = getattr(fast, name), getattr(ref, name)
        assert (x == y if isinstance(x, tuple | int) else np.array_equal(x, y, equal_nan=True)), name
    assert (fast.decodes > 1).any()
    if case.startswith("paged"):  # the pool ran short: some requests preempted, the longest refused
        assert fast.preemptions > 0


def test_the_mapping_takes_the_fewest_nodes_and_the_energy_counts_them() -> None:
    """LLaMA-3.1-405B in bf16 (810 GB) does not fit one node of eight 80 GB H100s (640 GB): two nodes, a
    pipeline stage each; the floor is both nodes' for the whole run, and the GPUs draw 700 W while busy."""
    r = run_inference(_spec("llama3.1-405b", **{"inference.load.prompt_len": 256, "inference.load.output_len": 4})).result
    assert (r.stages, r.systems, r.gpu["nodes"], r.gpu["tensor_parallel"]) == (2, 2, 2, 8)
    static = r.energy_by_part_j["static"]
    assert static == pytest.approx(2 * 4600.0 * r.end_to_end_s, rel=1e-12)
    busy = r.gpu["gpu_busy_seconds"]
    assert r.energy_by_part_j["gpus"] == pytest.approx(busy * 700.0, rel=1e-12)
    assert r.energy_j == pytest.approx(static + busy * 700.0, rel=1e-12)
    assert r.joules_per_token == pytest.approx(r.energy_j / 4, rel=1e-12)
    one = run_inference(_spec("llama3.1-70b", **{"inference.load.prompt_len": 256, "inference.load.output_len": 4})).result
    assert (one.stages, one.systems) == (1, 1)


def test_an_moe_decode_token_reads_its_k_experts_not_all() -> None:
    """Qwen3-30B-A3B on one H100 (tensor_parallel 1: all 128 experts on it): a decode token's grouped
    GEMMs read its 8 experts' weights, so one token costs far less than 16 (which reach 128 experts)."""
    st = _station(_spec("qwen3-30b-a3b", **{"inference.tensor_parallel": 1}))
    one, many = st.experts(1)[1], st.experts(16)[1]
    assert 8 * one < many * 1.1 and one < many / 5


@pytest.mark.parametrize(("over", "key"), [
    ({"inference.grid": "8x8"}, "inference.grid"),
    ({"inference.tensor_parallel": 16}, "inference.tensor_parallel"),
    ({"inference.tensor_parallel": 3}, "inference.tensor_parallel"),
    ({"inference.kv_layout": "concat"}, "inference.kv_layout"),
    ({"inference.disaggregation.prefill_systems": 1}, "inference.disaggregation.prefill_systems"),
    ({"inference.scheduler.kv_block": 16, "inference.scheduler.preemption": "swap"}, "inference.scheduler.preemption"),
])
def test_what_a_gpu_run_cannot_do_is_one_line(over: dict, key: str) -> None:
    with pytest.raises(ConfigError) as e:
        _spec(**over)
    assert e.value.path == key and "\n" not in e.value.message


def test_the_predictions_in_model_md_are_the_code_s() -> None:
    """docs/model.md §13.7's batch-1 rows (5,000 + 500 tokens, bf16) are what ``wsesim infer`` predicts."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "model.md").read_text(encoding="utf-8")
    table = text.split("**Predictions at batch 1**")[1].split("\n\n")[1]
    rows = re.findall(r"^\| (\S+) \| (\d+) × (\w+)(?:, TP (\d+))? \| ([\d.]+) ms \| ([\d.]+) \|", table, re.M)
    assert len(rows) == 5
    for model, gpus, hardware, tp, tpot, speed in rows:
        assert tp in ("", gpus)
        r = run_inference(_spec(model.lower().replace("llama-", "llama"), hardware.lower(), **{
            "inference.tensor_parallel": int(gpus), "inference.load.prompt_len": 5000,
            "inference.load.output_len": 500})).result
        assert (f"{r.tpot_s * 1e3:.2f}", f"{r.tokens_per_s_per_request:.1f}") == (tpot, speed)


def test_a_latent_attention_model_is_refused_on_a_gpu() -> None:
    with pytest.raises(ConfigError) as e:
        _spec("deepseek-v3", "b200")
    assert e.value.source.endswith("deepseek-v3.yaml") and "latent attention" in e.value.message


def test_fp8_halves_the_kv_cache_read_and_runs_the_gemms_in_fp8() -> None:
    """``model.dtype: fp8`` on a GPU: the station's kernels run in fp8 (one byte a value) and a decode
    token's attention, HBM-bound at batch 1, reads K and V at one byte where bf16 reads two: with
    2·kv·c·d + 2·h·d values either way, its memory time is exactly half."""
    c = 4096
    bf16, fp8 = (_station(_spec("llama3-8b", **{"model.dtype": d})) for d in ("bf16", "fp8"))
    assert (fp8.gpu.dtype, fp8.gpu.elem_bytes, bf16.gpu.elem_bytes) == ("fp8", 1, 2)
    a16, a8 = (next(p.result for p in st.attention(1, c, [], True)) for st in (bf16, fp8))
    assert a8.memory == pytest.approx(a16.memory / 2, rel=1e-12)
    # the weights halve too, so a decode step is faster, but not twice: vectors stay 16-bit, kernels' fixed
    # costs stay
    assert 0.5 * bf16.iteration(1, c, []) < fp8.iteration(1, c, []) < bf16.iteration(1, c, [])


def test_a_dtype_the_hardware_has_no_arithmetic_for_is_refused() -> None:
    """fp8 on a wafer: its PEs compute in fp32, bf16 and fp16 only; refused at model.dtype, naming them."""
    with pytest.raises(ConfigError, match=r'model\.dtype.*expected a dtype wse2 computes in \(fp32, bf16, '
                                          r'fp16\), got "fp8"'):
        load_inference(model="llama3-8b", hardware="wse2", overrides={"model.dtype": "fp8"})
