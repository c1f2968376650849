"""Attention and element-wise kernels on a GPU (docs/model.md §13.3, which gives the formulas).

**Prefill** as FlashAttention computes it: one thread block per (sequence, query head, tile of ``BLOCK``
queries), streaming its head's K and V in tiles of ``BLOCK`` keys, each the longer of its two GEMMs on the
tensor cores and its exponentials on the special-function units (overlapped as FlashAttention-3 does).
Under a causal mask the blocks differ in length: issued longest first, each SM taking the next as it
finishes one (``_makespan``). The kernel takes the longer of that and its HBM traffic (Q, O, and each KV
head's K and V once); what HBM adds beyond the arithmetic is ``memory``.

**Decode** (flash-decoding) reads the whole KV cache once per step at HBM bandwidth, the arithmetic (each
KV head's query rows padded to the 64 rows a warpgroup's MMA takes) the roofline's other side. **Element-
wise and norm** kernels move their bytes at HBM bandwidth and nothing else.
"""

from __future__ import annotations

import heapq
import math

from .device import Gpu, GpuKernelResult

__all__ = ["BLOCK", "MMA_ROWS", "decode_attention", "elementwise", "prefill_attention"]

BLOCK = 128
"""Queries in a FlashAttention block, and keys in each K/V tile it streams (FlashAttention-2/3 on Hopper)."""

MAX_SCHEDULED = 200_000
"""Blocks a causal prefill schedules one by one; past it, the list schedule's bound (``_makespan``)."""

MMA_ROWS = 64
"""The fewest rows a Hopper warpgroup MMA computes: a decode step's query group is padded to it."""


def _makespan(visits: list[int], repeats: int, sms: int) -> float:
    """Key tiles until the last SM finishes: ``visits`` (one head's blocks, in issue order) issued
    ``repeats`` times, each block to the SM that frees first. With equal blocks, ``ceil(blocks/sms)``
    waves of one block; past ``MAX_SCHEDULED`` blocks, the list schedule's bound: the larger of the
    longest block and the total spread over the SMs."""
    if len(set(visits)) == 1:
        return math.ceil(len(visits) * repeats / sms) * visits[0]
    if len(visits) * repeats > MAX_SCHEDULED:
        return max(max(visits), sum(visits) * repeats / sms)
    free = [0] * min(sms, len(visits) * repeats)
    for _ in range(repeats):
        for v in visits:
            heapq.heapreplace(free, free[0] + v)
    return max(free)


def _heads(heads: int, kv_heads: int) -> int:
    return kv_heads if 0 < kv_heads <= heads else heads


def prefill_attention(gpu: Gpu, batch: int, seq: int, head_dim: int, heads: int, kv_heads: int = 0, *,
                      causal: bool = True, graphs: bool = False) -> GpuKernelResult:
    """Attention over ``batch`` sequences of ``seq`` tokens, ``heads`` query heads of ``head_dim`` sharing
    ``kv_heads`` K/V heads (0: as many as query heads), causal or not (FlashAttention's forward pass)."""
    kv = _heads(heads, kv_heads)
    tiles = math.ceil(seq / BLOCK)
    per_tile = max(4 * BLOCK * BLOCK * head_dim / gpu.sm_flops_per_s, BLOCK * BLOCK / gpu.sfu_per_s)
    # each (sequence, head)'s blocks in issue order, its longest first: the key tiles each visits
    visits = [min(tiles, q + 1) if causal else tiles for q in reversed(range(tiles))]
    blocks = batch * heads * tiles
    compute = _makespan(visits, batch * heads, gpu.sms) * per_tile
    # Q read and O written once; each (sequence, KV head)'s K and V read once (a head's blocks run
    # together, so the L2 serves its K and V to all of them)
    total = batch * (2 * heads + 2 * kv) * seq * head_dim * gpu.elem_bytes
    memory = max(0.0, total / gpu.hbm_bytes_per_s - compute)
    waves = math.ceil(blocks / gpu.sms)
    pairs_scored = seq * (seq + 1) / 2 if causal else seq * seq
    flops = 4.0 * batch * heads * head_dim * pairs_scored
    launch = gpu.launch(graphs)
    notes = (f"{'causal, ' if causal else ''}blocks of {BLOCK} queries, K/V tiles of {BLOCK} keys; softmax's "
             "exponentials overlapped with the MMAs (FlashAttention-3)",)
    return GpuKernelResult("attention", "flash", gpu, 1, 1, (batch, seq, head_dim, heads, kv),
                           launch + compute + memory, launch=launch, compute=compute, memory=memory,
                           flops=flops, hbm_bytes=total, tiles=blocks, waves=waves, tile=(BLOCK, BLOCK),
                           notes=notes)


def decode_attention(gpu: Gpu, batch: int, context: int, head_dim: int, heads: int, kv_heads: int = 0, *,
                     graphs: bool = False) -> GpuKernelResult:
    """One decode step's attention: ``batch`` requests each with ``context`` cached tokens, one new query
    token per request (flash-decoding over the context)."""
    kv = _heads(heads, kv_heads)
    group = heads // kv
    nbytes = batch * (2 * kv * context * head_dim + 2 * heads * head_dim) * gpu.elem_bytes
    padded = max(group, MMA_ROWS)
    work = 4.0 * batch * kv * padded * context * head_dim / (gpu.sm_flops_per_s * gpu.sms)
    exps = batch * kv * padded * context / (gpu.sfu_per_s * gpu.sms)
    arithmetic = max(work, exps)
    mem = nbytes / gpu.hbm_bytes_per_s
    launch = gpu.launch(graphs)
    compute, memory = (arithmetic, 0.0) if arithmetic > mem else (0.0, mem)
    shape = (batch, context, head_dim, heads, kv)
    return GpuKernelResult("decode-attention", "flash-decoding", gpu, 1, 1, shape,
                           launch + compute + memory, launch=launch, compute=compute, memory=memory,
                           flops=4.0 * batch * heads * context * head_dim, hbm_bytes=nbytes)


def elementwise(gpu: Gpu, values: int, *, reads: int = 1, writes: int = 1,
                graphs: bool = False) -> GpuKernelResult:
    """An element-wise or norm kernel over ``values`` values: each read ``reads`` times and written
    ``writes`` times (an RMSNorm or an activation: 1 and 1; a residual add: 2 and 1), at HBM bandwidth."""
    nbytes = values * (reads + writes) * gpu.elem_bytes
    mem = nbytes / gpu.hbm_bytes_per_s
    launch = gpu.launch(graphs)
    return GpuKernelResult("elementwise", "bandwidth", gpu, 1, 1, (values,), launch + mem, launch=launch,
                           memory=mem, hbm_bytes=nbytes)
