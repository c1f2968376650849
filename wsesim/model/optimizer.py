"""MemoryX's weight update at the step boundary (docs/model.md §2.5, with its sources and why the
bandwidth is an assumption): the one place that costs it.

Once per step, after the last (reduced) gradient of the last micro-batch has arrived, MemoryX runs Adam
over every parameter in mixed precision; the next step's weights are the updated ones, so the update
does not overlap the weight stream. It is bound by MemoryX's memory (about 12 FLOP against 30 B a
parameter), so

    optimizer_step_cycles = total_params · bytes_per_param / memoryx.update_bandwidth · clock

the same for one system and for a cluster (MemoryX updates once, whatever N).
"""

from __future__ import annotations

from ..config.specs import HardwareSpec, ModelSpec
from .shapes import LayerShapes

ADAM_STATE_BYTES = 4 * 4 + 3 * 4
"""Bytes per parameter Adam moves in MemoryX besides the streamed copy: reads fp32 weight, m, v and
gradient; writes fp32 weight, m, v."""


def optimizer_bytes_per_param(model: ModelSpec) -> int:
    """Bytes MemoryX reads and writes per parameter in one Adam step (docs/model.md §2.5)."""
    copy = model.bytes_per_value if model.bytes_per_value < 4 else 0  # an fp32 model streams the master
    return ADAM_STATE_BYTES + copy


def optimizer_step_cycles(hw: HardwareSpec, model: ModelSpec) -> float:
    """Cycles (of the wafer's clock) MemoryX takes to step the optimizer over every parameter."""
    total_bytes = LayerShapes(model).total_params * optimizer_bytes_per_param(model)
    return total_bytes / hw.memoryx.update_bandwidth_bytes_per_s * hw.clock_hz
