"""MemoryX's weight update at the step boundary (docs/model.md §2.5): the one place that costs it.

MemoryX holds the fp32 master weights and the optimizer state and "weight updates are performed by the
MemoryX service" (Cerebras glossary, MemoryX), once per step, after the last (reduced) gradient of the last
micro-batch has arrived. The next step's first weights are the updated ones, so the update does not
overlap the weight stream: it is the latency "at the boundary between training iterations, when weights
are updated" that the glossary names as the one the stream cannot hide.

The update is Adam over every parameter of the model (all experts, embedding and LM head), in mixed
precision. Per parameter MemoryX reads the fp32 master weight, first and second moments and the fp32
gradient accumulator (16 B), writes the weight and both moments back (12 B), and writes the copy the
wafer streams next step in the model's dtype (2 B for bf16; none for an fp32 model, whose copy is the
master). About 12 FLOP against 30 B: far below any CPU's FLOP-per-byte balance, so the update is bound
by MemoryX's memory, and

    optimizer_step_cycles = total_params · bytes_per_param / memoryx.update_bandwidth · clock

It is the same for one system and for a cluster (MemoryX updates once, whatever N). Cerebras publishes
no MemoryX throughput; ``memoryx.update_bandwidth`` is an assumption with its range in the hardware YAML.
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
