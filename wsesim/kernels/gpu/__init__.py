"""GPU kernels (docs/model.md §13): GEMM and grouped GEMM as thread-block tiles in waves over the SMs,
attention as FlashAttention computes it and as decode reads the KV cache, element-wise kernels at HBM
bandwidth, and NCCL's ring and tree collectives over NVLink and the network — on a ``kind: gpu`` preset.
``run_gpu_kernel`` (``registry``) is the one entry point, as ``run_kernel`` is the wafer's."""
