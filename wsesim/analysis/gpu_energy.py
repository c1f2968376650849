"""A GPU serving run's energy and cost (docs/model.md §13.7): each GPU of a stage draws its TDP
(``power.gpu``) while its stage is busy and nothing beyond its node's floor while idle; each node in use
draws its floor (``power.node_floor``: host, NICs, NVSwitches, fans) for the whole run. A "system" is a
node: the price (``inference.economics.price_per_system_hour``) is per node-hour, the per-system figures per
node."""

from __future__ import annotations

from typing import Any

from ..config.gpu import GpuSpec
from .energy import Accounting, priced

__all__ = ["GPU_ACCOUNTING", "GPU_WORDS", "gpu_seconds", "gpu_serving_energy"]


def gpu_serving_energy(hw: GpuSpec, busy_cycles: Any, gpus_per_stage: int, *, seconds: float, nodes: int,
                       tokens: int, price_per_system_hour: float | None) -> dict[str, Any]:
    """The energy fields of a serving result on ``nodes`` nodes over ``seconds``: each station's busy
    cycles (``busy_cycles``, at the GPU's clock) × its ``gpus_per_stage`` GPUs × TDP, and every node's
    floor × ``seconds``; per output token (``tokens``), tokens/s per kW, $ per million tokens."""
    used = gpu_seconds(hw, busy_cycles, gpus_per_stage, seconds, nodes)
    gpus = used["gpu_busy_seconds"] * hw.power.gpu_watts
    static = used["node_seconds"] * hw.power.node_floor_watts
    return priced(gpus + static if seconds > 0 else None, {"gpus": gpus, "static": static}, {},
                  seconds=seconds, systems=nodes, tokens=tokens, price_per_system_hour=price_per_system_hour)


def gpu_seconds(hw: GpuSpec, busy_cycles: Any, gpus_per_stage: int, seconds: float,
                nodes: int) -> dict[str, float]:
    """The GPU-seconds at TDP (each stage's busy seconds × its GPUs) and the node-seconds at the floor
    that ``gpu_serving_energy`` prices, for the result's ``gpu`` block."""
    return {"gpu_busy_seconds": float(sum(busy_cycles)) / hw.clock_hz * gpus_per_stage,
            "node_seconds": nodes * seconds}


GPU_WORDS = {"instructions": "kernel launches from the host",
             "compute": "the GPUs' kernels (tensor cores and HBM)",
             "communication": "NCCL collectives over NVLink"}
"""The parts of a decode step on GPUs (docs/model.md §13.7), as a serving result's bottleneck names them."""


def _energy(spec: Any, costs: Any, trace: Any, busy_cycles: Any, mapping: Any, *, seconds: float,
            systems: int, tokens: int) -> dict[str, Any]:
    return gpu_serving_energy(spec.hardware, busy_cycles, mapping.grid[1], seconds=seconds, nodes=systems,
                              tokens=tokens, price_per_system_hour=spec.inference.price)


GPU_ACCOUNTING = Accounting(_energy, GPU_WORDS)
"""A node of GPUs': its GPUs at TDP while busy and its floor (``gpu_serving_energy``), in GPU words."""
