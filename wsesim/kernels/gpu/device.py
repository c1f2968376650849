"""One GPU as its kernels see it, for one data type (``Gpu``), and what a GPU kernel reports
(``GpuKernelResult``): the one home of the rates every GPU kernel reads (docs/model.md §13.1).

A GPU kernel's time is its launch (unless CUDA graphs replay it) plus the sum of its waves, each wave the
slower of its arithmetic and its HBM traffic; a collective's is its steps' latency and its bytes over the
slowest link it crosses. Everything comes from the ``kind: gpu`` preset; the one calibrated key is
``runtime.tensor_efficiency``, applied to the tensor cores' rate only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...config.errors import ConfigError
from ...config.gpu import GpuSpec, TensorSpec

__all__ = ["GPU_DTYPES", "GPU_KERNEL_FIELDS", "Gpu", "GpuKernelResult"]

GPU_DTYPES = tuple(TensorSpec.model_fields)
"""The data types a GPU kernel runs in: the tensor cores' fp16, bf16, fp8, tf32, and fp32 on its lanes."""

_BYTES = {"fp16": 2, "bf16": 2, "fp8": 1, "tf32": 4, "fp32": 4}


@dataclass(frozen=True)
class Gpu:
    """The figures of one ``kind: gpu`` preset a kernel's schedule uses, for one data type. Rates per
    second; ``sm_flops_per_s`` is one SM's achievable rate (its peak x ``tensor_efficiency``; the fp32
    lanes run at their peak: the efficiency is the tensor cores' and was measured on them)."""

    name: str
    dtype: str
    sms: int
    clock_hz: float
    elem_bytes: int
    peak_flops_per_s: float  # the whole GPU, dense, datasheet
    sm_flops_per_s: float  # one SM, achievable
    sfu_per_s: float  # one SM's special-function results per second (softmax's exp)
    hbm_bytes_per_s: float
    l2_bytes: float
    gpus_per_node: int
    nvlink_bytes_per_s: float
    nvlink_latency_s: float
    network_bytes_per_s: float
    network_latency_s: float
    launch_s: float

    @classmethod
    def of(cls, spec: GpuSpec, dtype: str = "bf16") -> Gpu:
        """``spec``'s figures in ``dtype``. Raises ``ConfigError`` at ``dtype`` for a type without a rate."""
        if dtype not in GPU_DTYPES:
            raise ConfigError(f"expected one of {', '.join(GPU_DTYPES)} on a GPU, got \"{dtype}\"",
                              path="dtype")
        peak = spec.peak_flops_per_s(dtype)
        tensor = dtype != "fp32"
        node = spec.node
        return cls(spec.name, dtype, spec.sms, spec.clock_hz, _BYTES[dtype], peak,
                   peak / spec.sms * (spec.runtime.tensor_efficiency if tensor else 1.0),
                   spec.sfu_per_clock * spec.clock_hz, spec.hbm.bandwidth_bytes_per_s, spec.l2_bytes,
                   node.gpus, node.nvlink_bytes_per_s, node.nvlink_latency_s, node.network_bytes_per_s,
                   node.network_latency_s, spec.runtime.kernel_launch_s)

    @property
    def out_bytes(self) -> int:
        """Bytes of an output value: fp8 GEMMs write 16-bit results, the others their own type."""
        return max(self.elem_bytes, 2)

    def launch(self, graphs: bool) -> float:
        """The host's cost of starting one kernel: ``runtime.kernel_launch``, or 0 when a CUDA graph
        replays it (the graph's one launch is the caller's, once per graph)."""
        return 0.0 if graphs else self.launch_s


@dataclass(frozen=True)
class GpuKernelResult:
    """One GPU kernel: its time (seconds) and its split — ``launch``, then along the waves the time each
    wave's arithmetic (``compute``) or its HBM traffic (``memory``) set, and a collective's link time
    (``communication``, its steps' latency included). ``launch + compute + memory + communication ==
    seconds``. ``tiles``, ``waves``, ``tile`` and ``split_k`` describe a tiled kernel's schedule."""

    kind: str
    algorithm: str
    gpu: Gpu
    nodes: int
    gpus: int  # per node
    shape: tuple[int, ...]
    seconds: float
    launch: float = 0.0
    compute: float = 0.0
    memory: float = 0.0
    communication: float = 0.0
    flops: float = 0.0
    hbm_bytes: float = 0.0
    link_bytes: float = 0.0  # bytes each GPU sends over its links (a collective)
    tiles: int = 0
    waves: int = 0
    tile: tuple[int, int] = (0, 0)
    split_k: int = 1
    feasible: bool = True
    reason: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def cycles(self) -> float:
        return self.seconds * self.gpu.clock_hz

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds if self.seconds > 0 else 0.0

    @property
    def efficiency(self) -> float:
        """Useful FLOPs over the GPUs' datasheet peak for the time taken (0 for a collective)."""
        peak = self.gpu.peak_flops_per_s * self.nodes * self.gpus * self.seconds
        return self.flops / peak if peak > 0 else 0.0

    @property
    def bound(self) -> str:
        """What set most of the time: ``compute``, ``memory``, ``communication`` or ``launch``."""
        parts = {"launch": self.launch, "compute": self.compute, "memory": self.memory,
                 "communication": self.communication}
        return max(parts, key=lambda k: parts[k])

    def to_dict(self) -> dict[str, Any]:
        g = self.gpu
        return {
            "cycles": self.cycles, "seconds": self.seconds, "kind": self.kind, "algorithm": self.algorithm,
            "hardware": g.name, "grid": {"rows": self.nodes, "cols": self.gpus},
            "shape": dict(zip(_SHAPE_NAMES.get(self.kind, ("m", "k", "n")), self.shape, strict=False)),
            "dtype": g.dtype, "flops": self.flops, "flops_per_s": self.flops_per_s,
            "efficiency": self.efficiency,
            "critical_path": {"launch": self.launch, "compute": self.compute, "memory": self.memory,
                              "communication": self.communication},
            "schedule": {"tiles": self.tiles, "waves": self.waves, "tile_m": self.tile[0],
                         "tile_n": self.tile[1], "split_k": self.split_k, "bound": self.bound},
            "hbm_bytes": self.hbm_bytes, "link_bytes": self.link_bytes,
            "feasible": self.feasible, "reason": self.reason, "notes": list(self.notes),
        }


_SHAPE_NAMES = {
    "grouped-gemm": ("m", "k", "n", "experts"),
    "attention": ("batch", "seq", "head_dim", "heads", "kv_heads"),
    "decode-attention": ("batch", "context", "head_dim", "heads", "kv_heads"),
    "elementwise": ("values",),
    "allreduce": ("values",), "allgather": ("values",), "reducescatter": ("values",),
    "alltoall": ("values",), "broadcast": ("values",),
}
"""What each number of a GPU kernel's shape is, by kind, for its JSON."""


GPU_KERNEL_FIELDS: dict[str, tuple[str, ...]] = {
    "cycles": ("cycles", "`seconds` at the GPU preset's clock", "§13.1"),
    "seconds": ("s", "the kernel, its launch included", "§13.1"),
    "kind": ("", "gemm, gemv, grouped-gemm, attention, decode-attention, elementwise or a collective", "§13"),
    "algorithm": ("", "tiled, flash, flash-decoding, bandwidth; a collective's ring, tree or direct", "§13"),
    "hardware": ("", "the GPU preset's name"),
    "grid_rows": ("nodes", "nodes (1 for a kernel on one GPU)", "§13.4"),
    "grid_cols": ("GPUs", "GPUs a node (1 for a kernel on one GPU)", "§13.4"),
    "shape_<dimension>": ("", "the kernel's sizes: a GEMM's m, k, n (a grouped GEMM's experts too); "
                          "attention's batch, seq or context, head_dim, heads, kv_heads; a collective's or "
                          "an element-wise kernel's values per GPU", "§13"),
    "dtype": ("", "fp16, bf16, fp8, tf32 or fp32"),
    "flops": ("FLOP", "the useful FLOPs it computes"),
    "flops_per_s": ("FLOP/s", "`flops` / `seconds`"),
    "efficiency": ("fraction", "`flops` over the GPUs' dense datasheet peak for the time taken"),
    "critical_path_launch": ("s", "the host's launch (0 under CUDA graphs)", "§13.1"),
    "critical_path_compute": ("s", "waves whose arithmetic set their time", "§13.2"),
    "critical_path_memory": ("s", "what HBM traffic added beyond the arithmetic", "§13.2"),
    "critical_path_communication": ("s", "a collective's steps and bytes over its links", "§13.4"),
    "schedule_tiles": ("count", "thread blocks (tiles) of a tiled kernel", "§13.2"),
    "schedule_waves": ("count", "waves of tiles over the SMs", "§13.2"),
    "schedule_tile_m": ("rows", "a tile's rows (attention: queries a block)", "§13.2"),
    "schedule_tile_n": ("columns", "a tile's columns (attention: keys a K/V tile)", "§13.2"),
    "schedule_split_k": ("count", "slices K is split into (1: none)", "§13.2"),
    "schedule_bound": ("", "launch, compute, memory or communication: what set most of the time", "§13.1"),
    "hbm_bytes": ("B", "bytes read from and written to HBM", "§13.2"),
    "link_bytes": ("B", "bytes each GPU sends over its links (a collective)", "§13.4"),
    "feasible": ("bool", "whether it fits (always, so far)"),
    "reason": ("", "why not (empty when it fits)"),
    "notes": ("", "what the model assumed, `; `-joined"),
}
"""The columns of ``kernels.csv`` of a GPU kernel run (``wsesim kernel KIND --hardware h100 --out DIR``):
``GpuKernelResult.to_dict`` flattened; ``shape_<dimension>`` stands for the kind's sizes. (unit, meaning[,
docs/model.md section]), as ``kernels.result.KERNEL_FIELDS``."""
