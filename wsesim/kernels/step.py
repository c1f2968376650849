"""The kernel model as the training step's cost model (``simulation.compute: kernel``, docs/model.md
§10.5): an op costs the simulated cycles of its GEMMs on the PEs that run it — the whole wafer, or an
expert's region — instead of its FLOPs over one global ``gemm_efficiency``.

    cycles = task_overhead + max(Σ GEMM cycles (SUMMA, §10.3), feed)

The GEMMs' cycles include their own wavelets and latencies, so the constant model's fill/drain term is
not added again; ``feed`` — the weights passing each PE row, one link per cycle — stays a floor, as the
weights of a weight-streamed op still cross the wafer. A GEMM's cycles depend on M and N only through
each PE's block (⌈M/P⌉, ⌈N/Q⌉), so shapes are rounded up to whole blocks before the cached simulation:
a step asks for a few dozen distinct simulations (``cost.kernel_cost`` rounds and caches).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config.specs import HardwareSpec
from ..model.costs import ExpertCosts, OpCost
from ..model.shapes import EXPERT_SHARE, LayerShapes, expert_op_matmuls
from .cost import kernel_cost, lanes_dtype

__all__ = ["STEP_GEMM", "kernel_op_cost", "kernel_region_expert_costs"]

STEP_GEMM = "summa"
"""The training step's GEMM algorithm: SUMMA runs on any rectangle (regions are rarely square)."""


def _gemm(hw: HardwareSpec, dtype: str, rows: int, cols: int, m: int, k: int, n: int) -> float:
    """One GEMM's cycles on ``rows`` × ``cols`` PEs, from the kernel layer's one cached front door."""
    return kernel_cost(hw, "gemm", rows, cols, dtype=dtype, algorithm=STEP_GEMM, shape=(m, k, n)).cycles


def kernel_op_cost(hw: HardwareSpec, rows: int, cols: int, matmuls: Sequence[tuple[int, int, int]],
                   flops: float, weight_bytes: float, bytes_per_value: int) -> OpCost:
    """A whole-wafer op's cost from its GEMMs (``model.shapes.wafer_op_matmuls``)."""
    dtype = lanes_dtype(bytes_per_value)
    compute = sum(_gemm(hw, dtype, rows, cols, m, k, n) for m, k, n in matmuls)
    feed = weight_bytes / (rows * hw.fabric.link_bytes_per_cycle)
    return OpCost(flops=flops, weight_bytes=weight_bytes, compute=compute, feed=feed, fill_drain=0.0,
                  overhead=hw.runtime.task_overhead_cycles)


def kernel_region_expert_costs(hw: HardwareSpec, shapes: LayerShapes, tokens: np.ndarray, rows: np.ndarray,
                               cols: np.ndarray) -> ExpertCosts:
    """The ``regions`` mapping under the kernel model: expert e's op is its GEMMs on its own
    ``rows[e] × cols[e]`` region on the ``tokens[layer, e]`` routed there (an expert with no tokens costs
    its launch and its weights' feed)."""
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
                per_count = np.array([sum(_gemm(hw, dtype, int(r), int(c), mm, k, nn)
                                          for mm, k, nn in expert_op_matmuls(shapes, op, int(n), backward))
                                      if n > 0 else 0.0 for n in counts])
                compute[:, mine] = per_count[where].reshape(tokens[:, mine].shape)
            feed = weight_bytes / (rows[None, :] * hw.fabric.link_bytes_per_cycle)
            cycles[op, backward] = hw.runtime.task_overhead_cycles + np.maximum(compute, feed)
            bound[op, backward] = compute >= feed
    return ExpertCosts(cycles, bound)
