"""Every GPU kernel by kind and algorithm: ``run_gpu_kernel`` is the one entry point (the CLI's, and
the one the training step and serving will ask when they run on GPUs), as ``run_kernel`` is the wafer's.
A kind or algorithm that only a wafer runs is refused in one line, with the reason."""

from __future__ import annotations

from ...config.errors import ConfigError
from ...config.gpu import GpuSpec
from ..kinds import GPU_ONLY
from .attention import decode_attention, elementwise, prefill_attention
from .collectives import COLLECTIVE_ALGORITHMS, collective
from .device import Gpu, GpuKernelResult
from .gemm import gemm, grouped

__all__ = ["COMPUTE_KINDS", "GPU_ALGORITHMS", "GPU_ONLY", "gpu_algorithm", "run_gpu_kernel"]

GPU_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "gemm": ("tiled",), "gemv": ("tiled",), "grouped-gemm": ("tiled",), "attention": ("flash",),
    "decode-attention": ("flash-decoding",), "elementwise": ("bandwidth",), **COLLECTIVE_ALGORITHMS}
"""Each kind a GPU runs and its algorithms, the default first."""

COMPUTE_KINDS = ("gemm", "gemv", "grouped-gemm", "attention", "decode-attention", "elementwise")
"""The kinds that run on one GPU; the others are collectives over a grid of nodes x GPUs."""

_WAFER_ONLY = {"reduce": "a reduce tree over a line of PEs, the wafer's (NCCL's collectives here: "
                         f"{', '.join(COLLECTIVE_ALGORITHMS)})"}


def gpu_algorithm(kind: str, algorithm: str | None) -> str:
    """``algorithm`` for ``kind`` on a GPU (None or empty: its default). Raises ``ConfigError`` at
    ``kind`` for a kind only a wafer runs, at ``algorithm`` for a wafer's schedule or an unknown name."""
    if kind in _WAFER_ONLY:
        raise ConfigError(f"{kind} runs on a wafer only: {_WAFER_ONLY[kind]}", path="kind")
    if kind not in GPU_ALGORITHMS:
        raise ConfigError(f"expected one of {', '.join(GPU_ALGORITHMS)} on a GPU, got \"{kind}\"",
                          path="kind")
    choices = GPU_ALGORITHMS[kind]
    if not algorithm:
        return choices[0]
    if algorithm not in choices:
        raise ConfigError(f"expected {' or '.join(choices)} for {kind} on a GPU, got \"{algorithm}\" (the "
                          "wafer's schedules run on a wafer's PEs)", path="algorithm")
    return algorithm


def run_gpu_kernel(spec: GpuSpec, kind: str, nodes: int = 1, gpus: int = 1, *, dtype: str = "bf16",
                   algorithm: str | None = None, shape: tuple[int, ...] | None = None, values: int = 1,
                   experts: int = 1, heads: int = 1, kv_heads: int = 0, causal: bool = True,
                   graphs: bool = False) -> GpuKernelResult:
    """One kernel on ``spec``'s GPUs. The compute kinds run on one GPU (``nodes`` = ``gpus`` = 1) and take
    ``shape``: a GEMM's or GEMV's (M, K, N); a grouped GEMM's (tokens per expert, K, N) with ``experts``;
    attention's (batch, seq, head_dim) and decode attention's (batch, context, head_dim) with ``heads``
    and ``kv_heads``. An element-wise kernel and the collectives take ``values`` of ``dtype`` per GPU;
    a collective runs over ``nodes`` x ``gpus``. ``graphs``: replayed from a CUDA graph, no launch cost.
    Raises ``ConfigError`` (at ``kind``, ``algorithm``, ``dtype``, ``grid``, ``shape``) for what it
    cannot run."""
    algorithm = gpu_algorithm(kind, algorithm)
    g = Gpu.of(spec, dtype)
    if kind in COMPUTE_KINDS and (nodes, gpus) != (1, 1):
        raise ConfigError(f"expected 1x1 (a {kind} runs on one GPU), got {nodes}x{gpus}", path="grid")
    if kind in ("gemm", "gemv", "grouped-gemm", "attention", "decode-attention"):
        if shape is None:
            raise ConfigError(f"{kind} needs a shape", path="shape")
        a, b, c = shape[:3]
        if kind == "gemv" and a != 1:
            raise ConfigError(f"expected M = 1 for a GEMV, got {a}", path="shape")
        if kind in ("gemm", "gemv"):
            return gemm(g, a, b, c, graphs=graphs, kind=kind)
        if kind == "grouped-gemm":
            return grouped(g, [a] * experts, b, c, graphs=graphs)
        if kv_heads and (kv_heads > heads or heads % kv_heads):
            raise ConfigError(f"expected KV heads dividing the {heads} query heads, got {kv_heads}",
                              path="heads")
        if kind == "attention":
            return prefill_attention(g, a, b, c, heads, kv_heads, causal=causal, graphs=graphs)
        return decode_attention(g, a, b, c, heads, kv_heads, graphs=graphs)
    if kind == "elementwise":
        return elementwise(g, values, graphs=graphs)
    return collective(g, kind, nodes, gpus, values * g.elem_bytes, algorithm, graphs=graphs)
