"""The on-wafer fabric: the mesh and expert placement, traffic patterns, and two fidelities (flow and
packet) behind one interface, plus the MoE dispatch model the engine times its fabric phases with.

The names below are imported on first use, so ``import wsesim.fabric.mesh`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {name: "dispatch" for name in (
    "FABRICS", "AnyTraffic", "DispatchModel", "FabricResult", "FlowFabric", "OuterTraffic", "PacketFabric",
    "Traffic", "all_to_all", "dispatch_traffic", "hotspot", "link_loads", "make_fabric", "outer_link_loads",
    "routes_per_node", "row_multicast", "single_message", "transpose", "uniform_random")}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
