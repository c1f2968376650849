"""The GPU kernels (wsesim.kernels.gpu, docs/model.md §13): waves and tiles, the HBM roofline of a
few-token GEMM, FlashAttention's blocks, decode's KV read, element-wise bytes and NCCL's collectives, each
against a value derived by hand in its docstring — on a toy GPU of round numbers where the arithmetic must
be exact, on the H100 preset where the point is what an H100 does."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.gpu import GpuSpec
from wsesim.config.loader import load_hardware
from wsesim.kernels.gpu.attention import decode_attention, elementwise, prefill_attention
from wsesim.kernels.gpu.collectives import collective
from wsesim.kernels.gpu.device import Gpu
from wsesim.kernels.gpu.gemm import TILES, gemm, grouped, tile_cost
from wsesim.kernels.gpu.registry import run_gpu_kernel

TOY_DATA = {
    "kind": "gpu", "name": "toy", "sms": 4, "clock": "1 GHz",
    "tensor": {"fp16": 1024, "bf16": 1024, "fp8": 2048, "tf32": 512, "fp32": 128}, "sfu": 16,
    "hbm": {"capacity": "16 GB", "bandwidth": "1 TB/s"}, "l2": "8 MB",
    "node": {"gpus": 4, "nvlink": "100 GB/s", "nvlink_latency": "1 us", "network": "10 GB/s",
             "network_latency": "5 us"},
    "power": {"gpu": "100 W", "node_floor": "1 kW"},
    "runtime": {"tensor_efficiency": "100 %", "kernel_launch": "2 us"}}
TOY = GpuSpec.model_validate(TOY_DATA)
"""4 SMs of 1,024 bf16 FLOP a clock at 1 GHz: one SM does 1.024e12 FLOP/s; HBM 1e12 B/s."""

H100 = load_hardware("h100")


def toy(**rates: str) -> Gpu:
    spec = TOY if not rates else GpuSpec.model_validate({**TOY_DATA, "hbm": {"capacity": "16 GB", **rates}})
    return Gpu.of(spec, "bf16")


def test_a_gemm_of_exactly_sms_tiles_is_one_wave_and_one_more_tile_is_two() -> None:
    """128 x 256 tiles, K = 64 (one stage of 64 bf16 values): a tile is 2·128·256·64 = 4,194,304 FLOP,
    4.096 us on one SM at 1.024e12 FLOP/s. N = 4·256: 4 tiles on 4 SMs, one wave, 4.096 us; N = 5·256:
    5 tiles, two waves, the second holding one tile but as long: 8.192 us (HBM at 1 PB/s: compute-bound)."""
    gpu = toy(bandwidth="1 PB/s")
    one = tile_cost(gpu, [128], 64, 4 * 256, (128, 256))
    two = tile_cost(gpu, [128], 64, 5 * 256, (128, 256))
    assert (one.tiles, one.waves, two.tiles, two.waves) == (4, 1, 5, 2)
    assert one.compute == pytest.approx(4.096e-6, rel=1e-12) and one.memory == 0
    assert two.compute == pytest.approx(8.192e-6, rel=1e-12)


def test_split_k_fills_the_sms_when_there_are_fewer_tiles() -> None:
    """Two 128 x 256 tiles on 4 SMs with K = 256 (4 stages): split in s = min(4 // 2, 4) = 2, each unit
    walks 128 of K: 2·128·256·128 / 1.024e12 = 8.192 us, against 16.384 us unsplit."""
    gpu = toy(bandwidth="1 PB/s")
    c = tile_cost(gpu, [128], 256, 2 * 256, (128, 256))
    assert (c.tiles, c.split_k, c.waves) == (2, 2, 1)
    assert c.compute == pytest.approx(8.192e-6, rel=1e-12)
    assert tile_cost(gpu, [128], 256, 2 * 256, (128, 256), split=False).compute == pytest.approx(16.384e-6)


def test_a_sixteen_token_gemm_on_an_h100_reads_its_weights_at_hbm_bandwidth() -> None:
    """16 x 8192 x 8192 bf16: 64 x 64 tiles, 128 of them, one wave on 132 SMs. Its bytes: A 16·8192·2,
    B (the weights) 8192·8192·2 = 134,217,728, C 16·8192·2: 134,742,016 B in all, over 3.35 TB/s =
    40.2215 us; a tile's arithmetic, 2·64·64·8192 FLOP at 989.4/132 TFLOP/s x 82.8 %, is 10.8 us, so HBM
    sets the time (CUDA graphs: no launch)."""
    r = gemm(Gpu.of(H100, "bf16"), 16, 8192, 8192, graphs=True)
    assert (r.tile, r.tiles, r.waves, r.bound) == ((64, 64), 128, 1, "memory")
    assert r.hbm_bytes == 134_742_016
    assert r.seconds == pytest.approx(134_742_016 / 3.35e12, rel=1e-12)
    assert gemm(Gpu.of(H100, "bf16"), 16, 8192, 8192).seconds == pytest.approx(r.seconds + 2.4e-6)


def test_the_calibration_point_is_met_and_a_large_gemm_is_compute_bound() -> None:
    """hardware/h100.yaml's point: 2048 x 2048 x 13312 (M x N x K) at 794.5 TFLOP/s, launch hidden
    (128 tiles of 128 x 256 in one wave: 989.4 x 128/132 x 82.8 % = 794.4)."""
    r = gemm(Gpu.of(H100, "bf16"), 2048, 13312, 2048, graphs=True)
    assert (r.tile, r.tiles, r.waves, r.bound) == ((128, 256), 128, 1, "compute")
    assert r.flops_per_s / 1e12 == pytest.approx(794.5, abs=0.5)
    big = gemm(Gpu.of(H100, "bf16"), 8192, 8192, 8192)
    assert big.bound == "compute" and 0.6 < big.efficiency < 0.85


def test_every_tile_shape_is_at_least_its_arithmetic_and_its_compulsory_bytes() -> None:
    """Invariants: no schedule beats the whole GPU's achievable rate or reads less than A, B and C once."""
    gpu = Gpu.of(H100, "bf16")
    for m, k, n in [(1, 4096, 4096), (300, 5000, 7000), (4096, 4096, 4096)]:
        floor = max(2 * m * k * n / (gpu.sm_flops_per_s * gpu.sms), (m * k + k * n + m * n) * 2 / gpu.hbm_bytes_per_s)
        for tile in TILES:
            assert tile_cost(gpu, [m], k, n, tile).seconds >= floor * (1 - 1e-12)


def _walk(gpu: Gpu, problems: list[int], k: int, n: int, tile: tuple[int, int]) -> list[float]:
    """Each wave's HBM bytes of a GEMM without split-K, tile by tile as the module's docstring says it: each
    problem's tiles in panels of 8 tile rows walked column by column, a wave's distinct A row panels and B
    column panels read once, less what the wave before read (up to the L2), plus the C it writes."""
    tm, tn = tile
    cols, a_b, c_b = -(-n // tn), gpu.elem_bytes, gpu.out_bytes
    order = []  # every tile in launch order: (problem, tile row, tile column)
    for p, m in enumerate(problems):
        rows = -(-m // tm)
        for panel in range(0, rows, 8):
            height = min(8, rows - panel)
            order += [(p, panel + r, c) for c in range(cols) for r in range(height)]
    out, held = [], {}
    for w in range(0, len(order), gpu.sms):
        panels, written = {}, 0
        for p, i, j in order[w:w + gpu.sms]:
            h, wd = min(tm, problems[p] - i * tm), min(tn, n - j * tn)
            panels[("a", p, i)], panels[("b", p, j)] = h * k * a_b, wd * k * a_b
            written += h * wd * c_b
        kept = min(gpu.l2_bytes, sum(v for key, v in panels.items() if key in held))
        out.append(sum(panels.values()) - kept + written)
        held = panels
    return out


@pytest.mark.parametrize("problems", [[5000], [300, 17, 64, 1], [1025] * 3])
def test_the_wave_walk_reads_each_wave_s_distinct_panels(problems: list[int]) -> None:
    """The schedule's bytes and its compute/memory split are a tile-by-tile walk's (``_walk``), wave by wave,
    for a plain GEMM and grouped ones of uneven and equal problems, on every tile shape."""
    gpu = Gpu.of(load_hardware("h100"), "fp8")
    k, n = 4096, 3000
    for tile in TILES:
        c = tile_cost(gpu, problems, k, n, tile, split=False)
        waves = _walk(gpu, problems, k, n, tile)
        t_tile = 2 * tile[0] * tile[1] * -(-k // 128) * 128 / gpu.sm_flops_per_s
        mem = [b / gpu.hbm_bytes_per_s for b in waves]
        assert (c.waves, c.hbm_bytes) == (len(waves), sum(waves))
        assert c.compute == pytest.approx(sum(t_tile for x in mem if t_tile >= x), rel=1e-12)
        assert c.memory == pytest.approx(sum(x for x in mem if x > t_tile), rel=1e-12)


def test_grouped_gemm_few_tokens_pay_for_every_expert_s_weights() -> None:
    """128 experts of 2048 x 768 bf16 weights (402.7 MB): at 16 tokens each the grouped GEMM is HBM-bound
    and at least the weights over 3.35 TB/s (120.2 us); at 1,024 tokens it is compute-bound at more than
    ten times the efficiency."""
    gpu = Gpu.of(H100, "bf16")
    few, many = grouped(gpu, [16] * 128, 2048, 768, graphs=True), grouped(gpu, [1024] * 128, 2048, 768, graphs=True)
    weights = 128 * 2048 * 768 * 2
    assert few.bound == "memory" and few.hbm_bytes >= weights and few.seconds >= weights / 3.35e12
    assert many.bound == "compute" and many.efficiency > 10 * few.efficiency
    assert grouped(gpu, [0] * 4, 2048, 768).seconds == pytest.approx(2.4e-6)  # nothing to do but launch


def test_flash_attention_blocks_and_the_causal_schedule() -> None:
    """Toy GPU, 1 sequence of 256 tokens, 2 heads of 128: 2 query tiles a head, 4 blocks on 4 SMs. A key
    tile is max(4·128·128·128 / 1.024e12, 128·128 / 16e9) = max(8.192, 1.024) us. Non-causal every block
    visits 2 key tiles: one wave, 16.384 us. Causal the blocks visit 2 and 1; longest first on 4 SMs
    the makespan is still 2 tiles, 16.384 us, for 4·2·128·(256·257/2) FLOPs. HBM at 1 PB/s adds nothing."""
    gpu = toy(bandwidth="1 PB/s")
    full = prefill_attention(gpu, 1, 256, 128, 2, causal=False, graphs=True)
    causal = prefill_attention(gpu, 1, 256, 128, 2, causal=True, graphs=True)
    assert (full.tiles, full.waves) == (4, 1)
    assert full.seconds == pytest.approx(16.384e-6, rel=1e-12) and full.flops == 4 * 2 * 128 * 256**2
    assert causal.seconds == pytest.approx(16.384e-6, rel=1e-12) and causal.flops == 4 * 2 * 128 * 256 * 257 / 2


def test_causal_blocks_are_balanced_longest_first() -> None:
    """Toy GPU, 4 heads of 512 tokens (4 query tiles: 4, 3, 2, 1 key tiles): 16 blocks, 40 key tiles on
    4 SMs: longest first, each SM ends with 10 tiles (4+3+2+1 by turns): 10 x 8.192 = 81.92 us."""
    r = prefill_attention(toy(bandwidth="1 PB/s"), 1, 512, 128, 4, causal=True, graphs=True)
    assert r.seconds == pytest.approx(81.92e-6, rel=1e-12)


def test_decode_attention_reads_the_kv_cache_at_hbm_bandwidth() -> None:
    """H100, 64 requests of 4,096 tokens, 64 query heads sharing 8 KV heads of 128: the KV cache
    64·2·8·4096·128·2 B plus the queries and outputs 64·2·64·128·2 B = 1,075,838,976 B over 3.35 TB/s."""
    r = decode_attention(Gpu.of(H100, "bf16"), 64, 4096, 128, 64, 8, graphs=True)
    assert r.hbm_bytes == 1_075_838_976 and r.bound == "memory"
    assert r.seconds == pytest.approx(1_075_838_976 / 3.35e12, rel=1e-12)


def test_an_elementwise_kernel_is_its_bytes_over_hbm_and_its_launch() -> None:
    """10^6 bf16 values read and written: 4 MB at 1 TB/s, 4 us, and the 2 us launch unless graphed."""
    assert elementwise(toy(), 10**6).seconds == pytest.approx(6e-6, rel=1e-12)
    assert elementwise(toy(), 10**6, graphs=True).seconds == pytest.approx(4e-6, rel=1e-12)


def test_nccl_ring_and_tree_all_reduce_on_h100s() -> None:
    """S = 2^27 bf16 values = 268,435,456 B a GPU. One node of 8: 2·7 = 14 steps of 0.47 us and
    2·7/8·S over 450 GB/s, after a 2.4 us launch. Four nodes of 8, tree: 2·(7·0.47 + log2(4)·2.7) us and
    2·S over min(450, 8 x 50) = 400 GB/s. All-gather, one node: 7 steps and 7/8·S."""
    gpu = Gpu.of(H100, "bf16")
    s = 2**27 * 2
    ring = collective(gpu, "allreduce", 1, 8, s, "ring")
    assert ring.seconds == pytest.approx(2.4e-6 + 14 * 0.47e-6 + 2 * 7 / 8 * s / 450e9, rel=1e-12)
    tree = collective(gpu, "allreduce", 4, 8, s, "tree")
    assert tree.seconds == pytest.approx(2.4e-6 + 2 * (7 * 0.47e-6 + 2 * 2.7e-6) + 2 * s / 400e9, rel=1e-12)
    gather = collective(gpu, "allgather", 1, 8, s, graphs=True)
    assert gather.seconds == pytest.approx(7 * 0.47e-6 + 7 / 8 * s / 450e9, rel=1e-12)
    two_nodes = collective(gpu, "allreduce", 2, 8, s, "ring", graphs=True)
    assert two_nodes.seconds == pytest.approx(28 * 0.47e-6 + 2 * 2.7e-6 + 2 * 15 / 16 * s / 400e9, rel=1e-12)


def test_all_to_all_sends_inside_and_outside_the_node_side_by_side() -> None:
    """Toy GPU, 2 nodes of 4, 8 MB a GPU: 3/8 of it over NVLink (3 MB / 100 GB/s = 30 us) beside 4/8 over
    its NIC (4 MB / 10 GB/s = 400 us), after one network step (5 us)."""
    r = collective(toy(), "alltoall", 2, 4, 8e6, graphs=True)
    assert r.seconds == pytest.approx(5e-6 + 400e-6, rel=1e-12) and r.link_bytes == pytest.approx(7e6)


@pytest.mark.parametrize(("kind", "kwargs", "path"), [
    ("reduce", {}, "kind"),
    ("gemm", {"algorithm": "summa", "shape": (8, 8, 8)}, "algorithm"),
    ("gemm", {"shape": (8, 8, 8), "dtype": "fp4"}, "dtype"),
    ("gemm", {"shape": (8, 8, 8), "gpus": 2}, "grid"),
    ("gemv", {"shape": (2, 8, 8)}, "shape"),
    ("allreduce", {"gpus": 9}, "grid"),
    ("attention", {"shape": (1, 8, 8), "heads": 6, "kv_heads": 4}, "heads"),
])
def test_what_a_gpu_cannot_run_is_one_config_error(kind: str, kwargs: dict, path: str) -> None:
    with pytest.raises(ConfigError) as e:
        run_gpu_kernel(H100, kind, **kwargs)
    assert e.value.path == path and "\n" not in str(e.value)


MODEL_MD = (Path(__file__).resolve().parents[2] / "docs" / "model.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(("gpu", "dtype", "mnk", "experts", "written"), [
    ("h100", "bf16", (8192, 8192, 8192), 0, "| H100 | 794 TFLOP/s |"),
    ("h100", "fp8", (1024, 9216, 14336), 0, "| H100 | 1,430 |"),
    ("h200", "fp8", (1280, 4096, 12032), 0, "| H200 | 1,324 |"),
    ("b200", "fp8", (15360, 4096, 3072), 0, "| B200 | 3,506 |"),
    ("h100", "fp8", (64, 7168, 16384), 0, "| H100 | 422 |"),
    ("h100", "fp8", (128, 7168, 16384), 0, "| H100 | 830 |"),
    ("h100", "fp8", (256, 4096, 7168), 4, "| H100 | 1,513 |"),
])
def test_model_md_predictions_are_what_the_model_gives(gpu: str, dtype: str, mnk: tuple[int, int, int],
                                                       experts: int, written: str) -> None:
    """docs/model.md §13.5's table (M x N x K, CUDA graphs) stays equal to the code."""
    m, n, k = mnk
    g = Gpu.of(load_hardware(gpu), dtype)
    r = grouped(g, [m] * experts, k, n, graphs=True) if experts else gemm(g, m, k, n, graphs=True)
    assert f"{r.flops_per_s / 1e12:,.0f}" in written and written in MODEL_MD


def test_model_md_attention_predictions_are_what_the_model_gives() -> None:
    """§13.5's attention rows: 16k tokens a batch of 16 heads of 128 (FlashAttention-3's sizes)."""
    g = Gpu.of(H100, "bf16")
    rates = {(s, causal): prefill_attention(g, 16384 // s, s, 128, 16, causal=causal, graphs=True).flops_per_s / 1e12
             for s in (512, 16384) for causal in (False, True)}
    assert [f"{rates[k]:,.0f}" for k in sorted(rates)] == ["794", "430", "794", "805"]
    assert "| H100 | 794 (no mask), 430 (causal) |" in MODEL_MD and "| H100 | 794 (no mask), 805 (causal) |" in MODEL_MD
