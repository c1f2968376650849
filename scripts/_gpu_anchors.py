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
    """ms per output token of LLaMA-3.1-70B in bf16 on 4 H100s (TP 4), one request of 5,000 + 500 tokens:
    each GPU reads the 35 GB a token that NIM's fp8 run on 2 H100s (TP 2) reads."""
    spec = load_inference(model="llama3.1-70b", hardware="h100", overrides={
        "inference.tensor_parallel": 4, "inference.prompt_len": 5000, "inference.output_len": 500}).spec
    return run_inference(spec).result.tpot_s * 1e3


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
        anchor(group, "LLaMA-3.1-70B decode at batch 1, 5,000 + 500 tokens, 35 GB read a GPU a token",
               "18.58 ms", 18.58, "ms", "NVIDIA NIM 1.8.0 benchmarking, Performance (fp8, 2 × H100, TP 2)",
               prediction, _nim_decode, digits=4,
               note="wsesim: bf16 on 4 H100s (TP 4), the same bytes a GPU; no fp8 dtype; HBM at its datasheet "
                    "rate and no per-kernel fixed latency, so too fast (§13.7)"),
    ]
