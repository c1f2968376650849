"""The cost model: the cycles an op (its FLOPs and weight bytes counted by ``wsesim.model.shapes``)
takes on a rectangular region of PEs. Pure functions, no SimPy (docs/model.md §4, which derives when an
op is compute-bound). An op on a region of ``P`` PEs (``rows × cols``) costs, in clock cycles::

    cycles = task_overhead + fill_drain + max(compute, feed)
    compute     = FLOPs / (P · 2·simd_width · gemm_efficiency)  the datapath, at the fraction of peak it
                                                                sustains inside a distributed GEMM
    feed        = weight_bytes / (rows · link_bytes_per_cycle)  each PE row's share of the weights passes
                                                                its PEs through one link per cycle
    fill_drain  = 2·ramp + (rows + cols) · hop_latency       a wavefront crossing the region

``OpCost.bound`` names the binding term ("compute" or "feed").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config.specs import HardwareSpec
from .shapes import EXPERT_SHARE, LayerShapes


@dataclass(frozen=True)
class OpCost:
    """Cycles of one op on one region, by term (all in clock cycles)."""

    flops: float
    weight_bytes: float
    compute: float
    feed: float
    fill_drain: float
    overhead: float

    @property
    def cycles(self) -> float:
        return self.overhead + self.fill_drain + max(self.compute, self.feed)

    @property
    def bound(self) -> str:
        return "compute" if self.compute >= self.feed else "feed"


def _terms(hw: HardwareSpec, rows: Any, cols: Any, flops: Any, weight_bytes: Any) -> tuple[Any, Any, Any]:
    """(compute, feed, fill_drain) cycles for scalars or arrays: the formula above, written once."""
    compute = flops / (rows * cols * hw.flops_per_cycle_per_pe * hw.runtime.gemm_efficiency)
    feed = weight_bytes / (rows * hw.fabric.link_bytes_per_cycle)
    fill_drain = hw.fabric.latency(rows + cols)
    return compute, feed, fill_drain


def op_cost(hw: HardwareSpec, rows: int, cols: int, flops: float, weight_bytes: float = 0.0) -> OpCost:
    """The cost of an op of ``flops`` FLOPs using ``weight_bytes`` of weights on a ``rows × cols`` region."""
    compute, feed, fill_drain = _terms(hw, rows, cols, flops, weight_bytes)
    return OpCost(flops=flops, weight_bytes=weight_bytes, compute=compute, feed=feed, fill_drain=fill_drain,
                  overhead=hw.runtime.task_overhead_cycles)


def op_cycles(hw: HardwareSpec, rows: np.ndarray, cols: np.ndarray, flops: np.ndarray,
              weight_bytes: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """``op_cost`` over arrays (same formula): cycles, and True where compute bounds the op."""
    compute, feed, fill_drain = _terms(hw, rows, cols, flops, weight_bytes)
    return hw.runtime.task_overhead_cycles + fill_drain + np.maximum(compute, feed), compute >= feed


@dataclass(frozen=True)
class ExpertCosts:
    """Cycles of every expert op of a step: ``cycles[op, backward]`` and ``compute_bound[op, backward]``
    are arrays ``[layer, expert]`` (op ``gate_up`` or ``down``; backward does input and weight
    gradients, two matmuls, so the weights pass the PEs twice)."""

    cycles: dict[tuple[str, bool], np.ndarray]
    compute_bound: dict[tuple[str, bool], np.ndarray]


def region_expert_costs(hw: HardwareSpec, shapes: LayerShapes, tokens: np.ndarray, rows: np.ndarray,
                        cols: np.ndarray) -> ExpertCosts:
    """The ``regions`` mapping: expert e's op runs on its own ``rows[e] × cols[e]`` region on the
    ``tokens[layer, e]`` routed there, costed by ``op_cycles``."""
    cycles, bound = {}, {}
    n = tokens.astype(float)
    for op in EXPERT_SHARE:
        for backward in (False, True):
            weight_bytes = (2.0 if backward else 1.0) * shapes.expert_op_bytes(op)
            cycles[op, backward], bound[op, backward] = op_cycles(
                hw, rows, cols, shapes.expert_op_flops(op, n, backward), weight_bytes)
    return ExpertCosts(cycles, bound)


def in_place_expert_costs(hw: HardwareSpec, shapes: LayerShapes, lane_copies: np.ndarray, rows: int,
                          cols: int) -> ExpertCosts:
    """The ``in_place`` mapping (docs/model.md §4): every expert's op runs on the whole wafer while its
    weights pass across it, each PE computing only for the copies it holds of that expert.

    A PE row holds ``1/rows`` of the op's weights; each weight element, passing a PE, meets that PE's
    copies of the expert, ``simd_width`` copies per instruction (a SIMD lane holds copies of one expert
    only). The slowest column (``lane_copies[layer, e]``, its most copies of expert e) sets the pace::

        compute = (op_params / rows) · ceil(lane_copies / simd_width) / gemm_efficiency
        feed    = op_params · bytes_per_value / (rows · link_bytes_per_cycle)

    With every column full of one expert's copies this is the whole-wafer GEMM's FLOPs over the wafer's
    FMAC rate; with few copies per column the ceiling makes a copy dearer than its FLOPs, and a column
    with none idles while the weights pass (the feed term still counts them).
    """
    cycles, bound = {}, {}
    vectors = np.ceil(lane_copies / hw.pe.simd_width)
    fill_drain = hw.fabric.latency(rows + cols)
    for op, share in EXPERT_SHARE.items():
        params = share * shapes.expert_params
        for backward in (False, True):
            factor = 2.0 if backward else 1.0
            compute = factor * (params / rows) * vectors / hw.runtime.gemm_efficiency
            feed = factor * shapes.expert_op_bytes(op) / (rows * hw.fabric.link_bytes_per_cycle)
            cycles[op, backward] = hw.runtime.task_overhead_cycles + fill_drain + np.maximum(compute, feed)
            bound[op, backward] = compute >= feed
    return ExpertCosts(cycles, bound)
