"""A training step on a GPU node (docs/model.md §13.8, which lists every op's kernels): the training
program's ops (``builders.training``) costed by the GPU kernels (``wsesim.kernels.gpu``) on one GPU of the
node, in the program's order; the step is that GPU's stream of kernels. Weights are resident: nothing
streams.

The node's n GPUs form n/tp data-parallel groups of tp = ``training.tensor_parallel``, each GPU of a group
on its ``tensor_slice`` of each layer (Megatron-LM's layout), each attention and FFN or MoE block ending
in an all-reduce of the group's activations. An MoE model's experts are split whole over all n GPUs, and
every MoE layer's experts are costed at the slots of the step's worst layer's busiest GPU: a bound on the
others (within the routing's spread), and one grouped-GEMM schedule a shape instead of one a layer (each
takes the kernel layer a good part of a second). A backward grouped GEMM is the input gradient's, then
the weight gradient's, costed as a grouped GEMM of the forward's shape (the same FLOPs and weight bytes).

A GEMM of more than ``PIECE_TILES`` tiles of 64×64 is costed as equal pieces of its rows, one after
another: the kernel layer walks a GEMM's tiles one by one, and a piece of 2¹⁶ small tiles still runs
dozens of waves of the large ones, so splitting adds at most one partial wave in ~60 (< 2 %). The host
launches kernels ahead of the GPU: a kernel costs its launch only where the launch is longer than its
work.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from math import ceil
from typing import Any

import numpy as np

from ...config.specs import DTYPE_BYTES
from ...kernels.gpu.attention import elementwise, prefill_attention
from ...kernels.gpu.collectives import collective
from ...kernels.gpu.device import Gpu, GpuKernelResult
from ...kernels.gpu.gemm import gemm, grouped
from ...model.gpu_memory import ADAM_BYTES, split_params, tensor_slice
from ...model.shapes import FFN_MATRICES, LayerShapes
from ...model.vocabulary import OpKind, Pass
from ..programs.program import Experts, Op, Transfer, WaferOp

__all__ = ["FLASH_BACKWARD", "PIECE_TILES", "GpuStep", "cost_gpu_step", "expert_share"]

FLASH_BACKWARD = 2.5
"""FlashAttention's backward over its forward: 5 matrix products a block to 2 (Dao, FlashAttention-2,
2023, §3.1-3.2), at the forward's rate."""

PIECE_TILES = 1 << 16
"""Tiles of 64×64 a GEMM is costed in at most (see the module's docstring)."""

_PARTS = ("attention", "attention_core", "norms", "ffn", "router", "experts", "dispatch", "combine",
          "lm_head", "gradient_allreduce", "optimizer")
_TP_PART = "tensor_allreduce"  # a part only under tensor parallelism (tp = 1 reports what it always did)


@dataclass(frozen=True)
class GpuStep:
    """One GPU's step: its seconds by part (``_PARTS``; they sum to ``seconds``), the kernels it ran, the
    FLOPs it executed and the bytes its all-to-alls and all-reduce sent a GPU."""

    seconds: float
    parts: dict[str, float]
    kernels: int
    flops: float
    link_bytes: float


def expert_share(tokens: np.ndarray, gpus: int) -> np.ndarray:
    """``[layers, gpus]`` routed slots of each GPU's experts (⌈E/gpus⌉ consecutive experts a GPU)."""
    layers, experts = tokens.shape
    per = ceil(experts / gpus) if experts else 1
    out = np.zeros((layers, gpus), dtype=np.int64)
    for g in range(gpus):
        out[:, g] = tokens[:, g * per:(g + 1) * per].sum(axis=1)
    return out


class _Step:
    def __init__(self, spec: Any, gpu: Gpu, batch_per_tile: int, tokens: np.ndarray) -> None:
        self.spec, self.gpu, self.t = spec, gpu, spec.training
        self.tp, self.m = self.t.tensor_parallel, tensor_slice(spec.model, self.t.tensor_parallel)
        self.s, self.n = LayerShapes(self.m), spec.hardware.node.gpus
        self.dp = self.n // self.tp
        self.mlp_done: set[int] = set()  # layers whose FFN or MoE block has run its backward
        self.B, self.tokens = batch_per_tile, tokens
        self.parts: dict[str, float] = defaultdict(float)
        self.kernels, self.flops, self.link = 0, 0.0, 0.0
        share = expert_share(tokens, self.n) if self.m.experts else np.zeros((0, 0))
        # the layer whose busiest GPU holds the most routed slots, and that GPU: every MoE layer's experts
        # are costed at its slots (see the module's docstring)
        self.worst = divmod(int(share.argmax()), self.n) if share.size else (0, 0)

    def add(self, part: str, r: GpuKernelResult, times: int = 1) -> None:
        work = r.seconds - r.launch
        self.parts[part] += times * max(work, r.launch)
        self.kernels += times
        self.flops += times * r.flops
        self.link += times * r.link_bytes

    def gemms(self, part: str, matmuls: Any, times: int = 1) -> None:
        for m, k, n in matmuls:
            pieces = ceil(ceil(m / 64) * ceil(n / 64) / PIECE_TILES)
            self.add(part, _gemm(self.gpu, ceil(m / pieces), k, n), times * pieces)

    def tensor_allreduce(self, op: WaferOp, attention: bool) -> None:
        """Megatron's f or g after ``op`` (the group's T·H activations summed over its tp GPUs): after every
        forward and backward attention and FFN or MoE block, and after a recomputed attention that rebuilds
        its layer's FFN input (one before that layer's backward block); none at tp = 1."""
        if self.tp == 1:
            return
        if op.pass_ == Pass.RECOMPUTE and (not attention or op.layer in self.mlp_done):
            return
        if not attention and op.pass_ == Pass.BWD:
            self.mlp_done.add(op.layer)
        nbytes = float(self.B * self.t.tiles * self.t.seq_len * self.m.hidden_size * self.m.bytes_per_value)
        self.add(_TP_PART, collective(self.gpu, "allreduce", 1, self.tp, nbytes))

    # ------------------------------------------------------------------------------------- the ops
    def wafer_op(self, op: WaferOp) -> None:
        g, m, H = self.gpu, self.m, self.m.hidden_size
        backward = op.pass_ == Pass.BWD
        grads = 2 if backward else 1  # an element-wise op's backward reads and writes as much again
        if op.kind == OpKind.ATTENTION:
            tiles, rows = op.tiles, self.B * self.t.seq_len
            self.gemms("attention", op.matmuls[: 4 if backward else 2], tiles)  # projections, not the core
            flash = prefill_attention(g, self.B, self.t.seq_len, self.s.qk_head_dim, m.heads, m.kv_heads)
            scale = FLASH_BACKWARD if backward else 1.0
            core = GpuKernelResult(flash.kind, flash.algorithm, g, 1, 1, flash.shape,
                                   flash.launch + scale * (flash.seconds - flash.launch), launch=flash.launch,
                                   flops=scale * flash.flops)
            self.add("attention_core", core, tiles)
            q, k, _, _ = self.s.qkvo_widths
            self.add("norms", elementwise(g, rows * (q + k)), grads * tiles)  # RoPE
            self.add("norms", elementwise(g, rows * H), 2 * grads * tiles)  # the two RMSNorms
            self.add("norms", elementwise(g, rows * H, reads=2), 2 * grads * tiles)  # the two residuals
            self.tensor_allreduce(op, attention=True)
        elif op.kind == OpKind.FFN:
            rows = self.B * self.t.tiles * self.t.seq_len
            self.gemms("ffn", op.matmuls)
            reads = FFN_MATRICES[m.ffn_activation] - 1  # SwiGLU's gate and up, GELU's up
            self.add("ffn", elementwise(g, rows * m.ffn_intermediate, reads=reads), grads)
            self.tensor_allreduce(op, attention=False)
        elif op.kind == OpKind.ROUTER:
            rows = self.B * self.t.tiles * self.t.seq_len
            self.gemms("router", op.matmuls)
            self.add("router", elementwise(g, rows * m.experts), grads)  # softmax and top-k over the logits
            self.tensor_allreduce(op, attention=False)  # the MoE block's (its shared expert's and experts')
        elif op.kind == OpKind.LM_HEAD:
            rows = self.B * self.t.seq_len
            self.gemms("lm_head", op.matmuls, op.tiles)
            self.add("lm_head", elementwise(g, rows * m.vocab_size), op.tiles)  # the loss's softmax
        else:
            raise ValueError(f"no GPU kernels for {op.kind!r}")  # in_place ops are refused by the spec

    def transfer(self, op: Transfer) -> None:
        """A layer's routed copies to their experts' GPUs (or back): an all-to-all of one GPU's share."""
        nbytes = float(self.tokens[op.layer].sum()) / self.n * self.m.hidden_size * self.m.bytes_per_value
        self.add("combine" if op.reverse else "dispatch", collective(self.gpu, "alltoall", 1, self.n, nbytes))

    def experts(self, op: Experts) -> None:
        """The busiest GPU's experts of the layer, as grouped GEMMs on their routed slots."""
        m, H, I = self.m, self.m.hidden_size, self.m.expert_intermediate  # noqa: E741 (the config's name)
        per = ceil(m.experts / self.n)
        layer, g = self.worst
        slots = tuple(int(x) for x in self.tokens[layer, g * per:(g + 1) * per])
        for k, n in ((H, 2 * I), (I, H)):
            pieces = ceil(sum(ceil(x / 64) for x in slots) * ceil(max(k, n) / 64) / PIECE_TILES)
            part = tuple(ceil(x / pieces) for x in slots)
            if op.backward:  # the input gradient's, then the weight gradient's (see the module's docstring)
                self.add("experts", _grouped(self.gpu, part, n, k), pieces)
            self.add("experts", _grouped(self.gpu, part, k, n), pieces)
        self.add("experts", elementwise(self.gpu, sum(slots) * I, reads=2), 2 if op.backward else 1)

    def tail(self) -> None:
        m, t = self.m, self.t
        dense, mine = split_params(m, self.n)
        grad = DTYPE_BYTES[t.weight_gradient_dtype]
        self.add("gradient_allreduce", collective(self.gpu, "allreduce", 1, self.dp, float(dense * grad)))
        params = ceil(dense / self.dp) + mine  # Adam reads weight, gradient and state; writes weight, state
        moved = params * (2 * m.bytes_per_value + grad + 2 * ADAM_BYTES)
        self.add("optimizer", elementwise(self.gpu, ceil(moved / (2 * self.gpu.elem_bytes))))


@lru_cache(maxsize=4096)
def _gemm(gpu: Gpu, m: int, k: int, n: int) -> GpuKernelResult:
    """``gemm``, kept per process: a sweep's steps share their shapes."""
    return gemm(gpu, m, k, n)


@lru_cache(maxsize=1024)
def _grouped(gpu: Gpu, slots: tuple[int, ...], k: int, n: int) -> GpuKernelResult:
    return grouped(gpu, slots, k, n)


def cost_gpu_step(spec: Any, gpu: Gpu, batch_per_tile: int, tokens: np.ndarray,
                  ops: tuple[Op, ...]) -> GpuStep:
    """One GPU's step (see the module's docstring): ``ops`` the training program's micro-batch
    (``builders.training.micro_batch_ops``), ``tokens[layer, expert]`` the routed slots of the node's
    n/tp·G·B·S tokens (tp = ``training.tensor_parallel``, the ops written for one GPU's ``tensor_slice``)."""
    step = _Step(spec, gpu, batch_per_tile, tokens)
    for op in ops:
        if isinstance(op, WaferOp):
            step.wafer_op(op)
        elif isinstance(op, Transfer):
            step.transfer(op)
        elif isinstance(op, Experts):
            step.experts(op)
        # Weights and GradientOut cost nothing here: the weights are resident, the gradients reduced after
    step.tail()
    parts = {p: step.parts.get(p, 0.0) for p in _PARTS + ((_TP_PART,) if step.tp > 1 else ())}
    return GpuStep(sum(parts.values()), parts, step.kernels, step.flops, step.link)
