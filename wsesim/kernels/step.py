"""The kernel model as the training step's cost model (``simulation.compute: kernel``, docs/model.md
§4.1): an op costs the simulated cycles of its GEMMs on the PEs that run it — the whole wafer, or an
expert's region — instead of its FLOPs over one global ``gemm_efficiency``.

    cycles = task_overhead + Σ GEMM cycles (the weight-streaming GEMM, §10.7)

Every GEMM runs as the machine's own dataflow (``stream.py``): activations resident, the weights'
rows (or, for attention's core, the keys' and values' rows) streamed down the columns, partial sums
reduced around the rows; the GEMMs that contract over the tokens (weight gradients, attention's key and
value gradients: ``model.shapes.over_tokens``) stream along the rows and reduce down the columns. The
GEMMs' cycles include their wavelets, latencies and the weights' pass down the columns, so neither the
constant model's fill/drain nor its feed is added. The weights come out of the staging buffer
(``staged``): the I/O that brings them there is the weight stream the engine simulates
(``sim.executors.links``), and the gradients leave through its gradient link, so the edge is charged once. A
GEMM's cycles depend on the tokens only through each PE's block, so they are rounded up to whole blocks
before the cached simulation (``cost.kernel_cost`` rounds and caches).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config.specs import HardwareSpec
from ..model.costs import ExpertCosts, OpCost
from ..model.shapes import EXPERT_SHARE, LayerShapes, expert_op_matmuls, over_tokens
from .cost import kernel_cost, lanes_dtype
from .kinds import GemmAlgorithm

__all__ = ["kernel_op_cost", "kernel_region_expert_costs", "step_gemms"]


def step_gemms(hw: HardwareSpec, dtype: str, rows: int, cols: int, name: str, backward: bool,
               matmuls: Sequence[tuple[int, int, int]]) -> float:
    """The cycles of op ``name``'s GEMMs, one after another, on ``rows`` × ``cols`` PEs: each the
    weight-streaming GEMM, or its weight-gradient form where it contracts over the tokens, with the
    weights already staged; from the kernel layer's one cached front door."""
    forms = over_tokens(name, backward, len(matmuls))
    return sum(kernel_cost(hw, "gemm", rows, cols, dtype=dtype, shape=tuple(shape), staged=True,
                           algorithm=GemmAlgorithm.STREAM_DW if dw else GemmAlgorithm.STREAM).cycles
               for shape, dw in zip(matmuls, forms, strict=True))


def kernel_op_cost(hw: HardwareSpec, rows: int, cols: int, name: str, backward: bool,
                   matmuls: Sequence[tuple[int, int, int]], flops: float, weight_bytes: float,
                   bytes_per_value: int) -> OpCost:
    """A whole-wafer op's cost from its GEMMs (``model.shapes.wafer_op_matmuls``)."""
    compute = step_gemms(hw, lanes_dtype(bytes_per_value), rows, cols, name, backward, matmuls)
    return OpCost(flops=flops, weight_bytes=weight_bytes, compute=compute, feed=0.0, fill_drain=0.0,
                  overhead=hw.runtime.task_overhead_cycles)


def kernel_region_expert_costs(hw: HardwareSpec, shapes: LayerShapes, tokens: np.ndarray, rows: np.ndarray,
                               cols: np.ndarray) -> ExpertCosts:
    """The ``regions`` mapping under the kernel model: expert e's op is its GEMMs on its own
    ``rows[e] × cols[e]`` region on the ``tokens[layer, e]`` routed there (an expert with no tokens costs
    its launch and its weights' pass down the region's columns: the feed)."""
    dtype = lanes_dtype(shapes.model.bytes_per_value)
    region = np.stack([rows.astype(int), cols.astype(int)], axis=1)
    cycles, bound = {}, {}
    for op in EXPERT_SHARE:
        for backward in (False, True):
            weight_bytes = (2.0 if backward else 1.0) * shapes.expert_op_bytes(op)
            compute = np.zeros(tokens.shape)
            for r, c in np.unique(region, axis=0):  # experts on regions of one shape: each count once
                mine = (region[:, 0] == r) & (region[:, 1] == c)
                counts, where = np.unique(tokens[:, mine], return_inverse=True)
                per_count = np.array([step_gemms(hw, dtype, int(r), int(c), op, backward,
                                                 expert_op_matmuls(shapes, op, int(n), backward))
                                      if n > 0 else 0.0 for n in counts])
                compute[:, mine] = per_count[where].reshape(tokens[:, mine].shape)
            feed = weight_bytes / (cols[None, :] * hw.fabric.link_bytes_per_cycle)
            cycles[op, backward] = hw.runtime.task_overhead_cycles + np.maximum(compute, feed)
            bound[op, backward] = compute >= feed
    return ExpertCosts(cycles, bound)
