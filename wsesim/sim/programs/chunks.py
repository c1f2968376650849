"""The weight-chunk plan (docs/model.md §2): every weight tensor the inbound link streams in one step,
split into chunks, in the order of first use. Both engines run from the same plan.

Order: the embedding, the forward pass layer by layer (attention, router with the shared expert, then
each expert's ``gate_up`` and ``down``; a dense layer: attention, then its FFN), the LM head, then the
backward pass from the last layer down (router, each expert's ``down`` and ``gate_up``, attention; a dense
layer: FFN, attention). With recompute the backward copy of a layer comes in forward order and serves the
recompute first; a model whose largest layer does not fit in half the staging buffer cannot hold a layer
from recompute to backward and streams every layer once more (pass ``rec``). A tensor larger than a
quarter of the buffer is cut into equal pieces, so that two always fit.

With gradient accumulation (docs/model.md §2.4) the step is ``micro_batches`` such sequences, one after
another: every weight streams in again for every micro-batch. ``keys`` and ``expert_chunks`` index the
first; micro-batch i's chunk is the first's index plus ``i · per_micro_batch``.

Chunk keys are ``(pass, layer, tensor[, expert])`` or ``(tensor,)``; sizes are bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import Any

import numpy as np

from ...config.specs import HardwareSpec, ModelSpec
from ...model.shapes import BACKWARD_OPS, FORWARD_OPS, LayerShapes
from ...model.vocabulary import Copy, Tensor

ChunkKey = tuple[Any, ...]


@dataclass(frozen=True)
class ChunkPlan:
    """The chunks of one step, in stream order.

    ``names[i]``/``sizes[i]`` are chunk i's key and bytes; ``keys[key]`` the (first, last) chunk of a
    whole-wafer tensor (embedding, attention, router, dense FFN, LM head); ``expert_chunks[pass, layer,
    op]`` an int array ``[pieces, experts]`` of the chunk indices of the experts' tensors;
    ``rec_pass`` is ``"bwd"`` when the recompute uses the backward copy, ``"rec"`` when it has its own.
    """

    names: tuple[ChunkKey, ...]
    sizes: np.ndarray
    keys: dict[ChunkKey, tuple[int, int]]
    expert_chunks: dict[tuple[str, int, str], np.ndarray]
    recompute: bool
    rec_pass: Copy
    staging_bytes: float  # the whole wafer's staging SRAM: half for weights in, half for gradients out
    micro_batches: int = 1
    per_micro_batch: int = 0  # chunks of one micro-batch (the offset between micro-batches)

    @property
    def restreamed_for_recompute(self) -> bool:
        return self.recompute and self.rec_pass == Copy.REC

    def __len__(self) -> int:
        return len(self.names)


class _Builder:
    def __init__(self, max_chunk: float) -> None:
        self.max_chunk = max_chunk
        self.names: list[ChunkKey] = []
        self.sizes: list[float] = []
        self.keys: dict[ChunkKey, tuple[int, int]] = {}
        self.expert_chunks: dict[tuple[str, int, str], np.ndarray] = {}

    def split(self, nbytes: float) -> list[float]:
        """A tensor's chunk sizes: whole, or equal pieces of at most ``max_chunk``."""
        pieces = 1 if nbytes <= self.max_chunk else int(np.ceil(nbytes / self.max_chunk))
        return [nbytes if pieces == 1 else nbytes / pieces] * pieces

    def add(self, key: ChunkKey, nbytes: float) -> None:
        first, sizes = len(self.sizes), self.split(nbytes)
        self.names.extend([key] * len(sizes))
        self.sizes.extend(sizes)
        self.keys[key] = (first, first + len(sizes) - 1)

    def add_experts(self, s: LayerShapes, pass_: str, layer: int, ops: tuple[str, ...]) -> None:
        """Every expert's ``ops``, expert by expert (all of one expert's before the next's): every expert
        has the same pieces, so the chunks are one expert's pattern repeated."""
        E, first = s.model.experts, len(self.sizes)
        pattern: list[tuple[str, float]] = []  # (op, bytes) of one expert's chunks
        offset: dict[str, int] = {}
        for op in ops:
            offset[op] = len(pattern)
            pattern += [(op, size) for size in self.split(s.expert_op_bytes(op))]
        ops = [op for op, _ in pattern]  # (pass, layer, op, expert) for each expert, its ops in turn:
        self.names.extend(zip(repeat(pass_), repeat(layer), ops * E, sorted(list(range(E)) * len(ops))))
        self.sizes.extend([size for _, size in pattern] * E)
        experts = np.arange(E, dtype=np.int64) * len(pattern)
        for op in ops:
            pieces = sum(1 for o, _ in pattern if o == op)
            self.expert_chunks[pass_, layer, op] = (first + offset[op] + np.arange(pieces)[:, None]
                                                    + experts[None, :])

    def add_layer(self, s: LayerShapes, pass_: str, layer: int, backward_first: bool) -> None:
        """A layer's chunks in the order of their first use."""
        b = s.model.bytes_per_value
        if s.model.is_dense(layer):  # attention and the FFN, each a whole-wafer tensor
            order = (Tensor.FFN, Tensor.ATTENTION) if backward_first else (Tensor.ATTENTION, Tensor.FFN)
            for tensor in order:
                self.add((pass_, layer, tensor),
                         (s.ffn_params if tensor == Tensor.FFN else s.attention_params) * b)
            return
        ops = BACKWARD_OPS if backward_first else FORWARD_OPS
        if not backward_first:
            self.add((pass_, layer, Tensor.ATTENTION), s.attention_params * b)
        self.add((pass_, layer, Tensor.ROUTER), s.router_stage_params * b)
        self.add_experts(s, pass_, layer, ops)
        if backward_first:
            self.add((pass_, layer, Tensor.ATTENTION), s.attention_params * b)


@lru_cache(maxsize=16)
def plan_chunks(hw: HardwareSpec, model: ModelSpec, recompute: bool, micro_batches: int = 1) -> ChunkPlan:
    """The step's chunk plan (cached: a tuner or a sweep runs many steps of the same model and wafer).
    The returned plan is shared: treat its arrays as read-only."""
    if micro_batches > 1:  # the same sequence again for every micro-batch
        one = plan_chunks(hw, model, recompute)
        sizes = np.tile(one.sizes, micro_batches)
        sizes.flags.writeable = False
        return ChunkPlan(one.names * micro_batches, sizes, one.keys, one.expert_chunks, recompute,
                         one.rec_pass, one.staging_bytes, micro_batches, len(one))
    s, b = LayerShapes(model), model.bytes_per_value
    staging = hw.runtime.staging_bytes * hw.pes
    rec_pass = Copy.BWD if s.layer_params * b <= staging / 2 else Copy.REC
    restream = recompute and rec_pass == Copy.REC
    build = _Builder(max_chunk=staging / 4)  # a chunk at most half its buffer: two always fit
    build.add((Tensor.EMBEDDING,), s.embedding_params * b)
    for layer in range(model.layers):
        build.add_layer(s, Copy.FWD, layer, backward_first=False)
    if s.lm_head_params:
        build.add((Tensor.LM_HEAD,), s.lm_head_params * b)
    for layer in reversed(range(model.layers)):
        if restream:
            build.add_layer(s, Copy.REC, layer, backward_first=False)
        build.add_layer(s, Copy.BWD, layer, backward_first=not (recompute and rec_pass == Copy.BWD))
    sizes = np.array(build.sizes)
    sizes.flags.writeable = False
    return ChunkPlan(tuple(build.names), sizes, build.keys, build.expert_chunks, recompute, rec_pass, staging,
                     1, len(sizes))
