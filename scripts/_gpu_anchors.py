"""wsesim's GPU figures beside published ones (issue 41), as ``scripts/validation.py`` shows them: one
global key per GPU, ``runtime.tensor_efficiency``, set on one named matmul (the rows marked so); every
other row a prediction. The kernels are ``wsesim.kernels.gpu``'s (docs/model.md §13), the serving row
``wsesim infer``'s on a GPU node (§13.7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wsesim.config.inference import load_inference
from wsesim.config.loader import load_hardware
from wsesim.experiments.runner import run_inference
from wsesim.kernels.gpu.registry import run_gpu_kernel
from wsesim.sim.programs.builders.gpu import gpu_mapping

MAMF = ("S. Bekman, Machine Learning Engineering, \"Maximum Achievable Matmul FLOPS\" table "
        "(compute/accelerator)")
DEEPGEMM = "DeepGEMM README (deepseek-ai, H800: the H100's compute, NVLink cut)"


def _gemm(gpu: str, dtype: str, m: int, n: int, k: int, experts: int = 1) -> Callable[[], float]:
    """TFLOP/s of an M × N × K GEMM (``experts`` > 1: a grouped GEMM of M tokens an expert) on one GPU,
    launched back to back (a CUDA graph: no host launch, as the benchmarks time them)."""
    def value() -> float:
        kind = "grouped-gemm" if experts > 1 else "gemm"
        r = run_gpu_kernel(load_hardware(gpu), kind, dtype=dtype, shape=(m, k, n), experts=experts,
                           graphs=True)
        return r.flops_per_s / 1e12

    return value


def _ring_bus() -> float:
    """GB/s of bus bandwidth of a 1 GiB bf16 ring all-reduce over one H100 node's 8 GPUs, as nccl-tests
    reports it: 2(n − 1)/n · S over the time."""
    size = 1 << 30
    r = run_gpu_kernel(load_hardware("h100"), "allreduce", 1, 8, dtype="bf16", values=size // 2,
                       algorithm="ring")
    return 2 * 7 / 8 * size / r.seconds / 1e9


def _nim_decode() -> float:
    """ms per output token of LLaMA-3.1-70B in fp8 on 2 H100s (TP 2), one request of 5,000 + 500 tokens,
    as NIM's run."""
    spec = load_inference(model="llama3.1-70b", hardware="h100", overrides={
        "model.dtype": "fp8", "inference.tensor_parallel": 2, "inference.load.prompt_len": 5000,
        "inference.load.output_len": 500}).spec
    return run_inference(spec).result.tpot_s * 1e3


# The keys the MLPerf rows set, in one place (a renamed key changes here only).
KEYS = {"dtype": "model.dtype", "prompt": "inference.load.prompt_len", "output": "inference.load.output_len",
        "tp": "inference.tensor_parallel", "batch": "inference.scheduler.batch", "arrival": "inference.load.arrival",
        "rate": "inference.load.rate", "requests": "inference.load.requests"}
MLPERF = "MLPerf Inference v4.1, closed, NVIDIA"
MLPERF_LOG = MLPERF + " (results/{system}/llama2-70b-99.9/{scenario}/performance/run_1/mlperf_log_summary.txt)"
# MLPerf's Llama 2 70B requests: 290 output tokens a sample (the H100 log's 24,524.9 tokens/s over its
# 84.48 samples/s; the reference's 294.45); the prompt, 684 tokens, the OpenOrca sample's mean as the
# benchmark's descriptions quote it (not checked against the dataset here). Fixed lengths, not the
# dataset's spread.
OPENORCA = {"prompt": 684, "output": 290}


def _mlperf_spec(gpu: str, tp: int, **load: Any) -> Any:
    """LLaMA-2-70B in fp8 (weights, activations, KV cache, as NVIDIA's submissions run) on one
    tensor-parallel group of ``tp`` GPUs, MLPerf's request lengths, ``load`` the other keys (by KEYS)."""
    values = {"dtype": "fp8", "tp": tp, **OPENORCA, **load}
    return load_inference(model="llama2-70b", hardware=gpu,
                          overrides={KEYS[k]: v for k, v in values.items()}).spec


def _group_batch(gpu: str, tp: int) -> int:
    """The most requests of MLPerf's lengths one group of ``tp`` GPUs holds (weights, every request's KV
    cache at its full length, activations): the concurrency a replica runs at, found by the mapping."""
    low, high = 1, 4096
    while low < high:
        mid = (low + high + 1) // 2
        if len(gpu_mapping(_mlperf_spec(gpu, tp, batch=mid)).stages) == 1:
            low = mid
        else:
            high = mid - 1
    return low


def _offline(gpu: str, tp: int) -> Callable[[], float]:
    """Output tokens/s of a node of 8 GPUs as 8/tp replicas of tp GPUs each (NVIDIA's layout), each
    draining a full batch of MLPerf's requests, arrived together (the Offline scenario)."""
    def value() -> float:
        spec = _mlperf_spec(gpu, tp, batch=_group_batch(gpu, tp))
        return run_inference(spec).result.tokens_per_s * (8 // tp)
    return value


def _server_capacity(gpu: str, tp: int, queries: float) -> Callable[[], float]:
    """Output tokens/s the node sustains at most under MLPerf's Server load (``queries`` a second, split
    evenly over the 8/tp replicas, Poisson): each replica's capacity (the lower of its busiest stage's
    and its admission's bound, measured over 300 requests) times its requests' output tokens."""
    def value() -> float:
        replicas = 8 // tp
        spec = _mlperf_spec(gpu, tp, batch=_group_batch(gpu, tp), arrival="poisson", rate=queries / replicas,
                            requests=300)
        return run_inference(spec).result.capacity_requests_per_s * OPENORCA["output"] * replicas
    return value


def gpu_anchors(anchor: Any, prediction: str, parameter: str) -> list[Any]:
    """The GPU rows (``validation.Anchor``s)."""
    group = "GPUs (H100, H200, B200)"
    return [
        anchor(group, "bf16 GEMM 2048 × 13312 × 2048 (MAMF's best), H100", "794.5 TFLOP/s", 794.5, "TFLOP/s",
               MAMF, parameter, _gemm("h100", "bf16", 2048, 2048, 13312), digits=4,
               note="sets runtime.tensor_efficiency (82.8 %)"),
        anchor(group, "bf16 GEMM 1792 × 16128 × 3072 (MAMF's best), B200", "1,745 TFLOP/s", 1745.0, "TFLOP/s",
               MAMF, parameter, _gemm("b200", "bf16", 1792, 16128, 3072), digits=4,
               note="sets runtime.tensor_efficiency (78.1 %)"),
        anchor(group, "bf16 GEMM 8192³, H100", "797.5 TFLOP/s", 797.5, "TFLOP/s",
               "torch.matmul, zzc0721/torch-performance-test-data #79", prediction,
               _gemm("h100", "bf16", 8192, 8192, 8192), digits=4),
        anchor(group, "fp8 GEMM 1024 × 9216 × 14336, H100", "1,402.6 TFLOP/s", 1402.6, "TFLOP/s", MAMF,
               prediction, _gemm("h100", "fp8", 1024, 9216, 14336), digits=4),
        anchor(group, "fp8 GEMM 1280 × 4096 × 12032, H200", "1,453.4 TFLOP/s", 1453.4, "TFLOP/s", MAMF,
               prediction, _gemm("h200", "fp8", 1280, 4096, 12032), digits=4,
               note="H200 takes the H100's efficiency: its compute is the H100's"),
        anchor(group, "fp8 GEMM 15360 × 4096 × 3072, B200", "3,432.5 TFLOP/s", 3432.5, "TFLOP/s", MAMF,
               prediction, _gemm("b200", "fp8", 15360, 4096, 3072), digits=4),
        anchor(group, "fp8 GEMM 64 × 7168 × 16384 (M × N × K), HBM-bound, H100", "336 TFLOP/s", 336.0,
               "TFLOP/s", DEEPGEMM, prediction, _gemm("h100", "fp8", 64, 7168, 16384),
               note="HBM at its datasheet rate: measured kernels reach ~80 % of it (docs/model.md §13.5)"),
        anchor(group, "fp8 GEMM 128 × 7168 × 16384, HBM-bound, H100", "645 TFLOP/s", 645.0, "TFLOP/s",
               DEEPGEMM, prediction, _gemm("h100", "fp8", 128, 7168, 16384), note="as above"),
        anchor(group, "fp8 grouped GEMM, 4 experts × 256 tokens, 4096 × 7168, H100", "932 TFLOP/s", 932.0,
               "TFLOP/s", DEEPGEMM + ", masked layout", prediction, _gemm("h100", "fp8", 256, 4096, 7168, 4), digits=4,
               note="a group's per-expert fixed work is not modelled"),
        anchor(group, "ring all-reduce of 1 GiB, 8 H100s, bus bandwidth", "~370 GB/s", 370.0, "GB/s",
               "NCCL maintainers (NVIDIA/nccl issues): what NCCL moves over an H100's NVLink", prediction,
               _ring_bus, note="NCCL's protocol overhead is left out"),
        anchor(group, "LLaMA-3.1-70B decode at batch 1, 5,000 + 500 tokens, fp8 on 2 × H100 (TP 2)",
               "18.58 ms", 18.58, "ms", "NVIDIA NIM 1.8.0 benchmarking, Performance (fp8, 2 × H100, TP 2)",
               prediction, _nim_decode, digits=4,
               note="HBM at its datasheet rate and no per-kernel fixed latency, so too fast (§13.7)"),
        anchor(group, "MLPerf Llama 2 70B Offline, 8 × H100 (4 replicas of TP 2, fp8)", "24,524.9 tokens/s",
               24524.9, "tokens/s", MLPERF_LOG.format(system="DGX-H100_H100-SXM-80GBx8_TRT", scenario="Offline"),
               prediction, _offline("h100", 2), digits=5,
               note="slow: each replica holds 570 requests at full length where TensorRT-LLM's paged cache "
                    "holds 896 (its config), and prompts run in auto-budget iterations (256 tokens) that "
                    "launch every kernel, all-reduces not overlapped (§13.7)"),
        anchor(group, "MLPerf Llama 2 70B Offline, 8 × H200 (8 replicas of 1 GPU, fp8)", "32,124 tokens/s",
               32124.0, "tokens/s", MLPERF + " (Tom's Hardware's table of the v4.1 results)", prediction,
               _offline("h200", 1), digits=5, note="as above: 451 requests a GPU where NVIDIA's config runs 806"),
        anchor(group, "MLPerf Llama 2 70B Server, 8 × H100, 75.1 queries/s offered (TTFT ≤ 2 s, TPOT ≤ 200 ms)",
               "21,605.8 tokens/s", 21605.8, "tokens/s",
               MLPERF_LOG.format(system="DGX-H100_H100-SXM-80GBx8_TRT", scenario="Server"), prediction,
               _server_capacity("h100", 2, 75.10), digits=5,
               note="wsesim's capacity at that load, an upper bound on what meets the limits: below the "
                    "offered 75.1 queries/s, so its queue would grow (the Offline row's reasons)"),
    ]
