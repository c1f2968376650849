"""The on-wafer fabric: the mesh and expert placement, traffic patterns, three fidelities (flow, packet and
its SimPy reference packet-simpy) behind one ``Fabric`` protocol, and the MoE dispatch model the engine
times its fabric phases with.

The names below are imported on first use, so ``import wsesim.fabric.mesh`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Fabric": "fidelity", "FABRICS": "fidelity", "make_fabric": "fidelity",
    "FlowFabric": "flow", "link_loads": "flow", "outer_link_loads": "flow",
    "PacketFabric": "packet", "SimPyPacketFabric": "packet_simpy",
    "DispatchModel": "dispatch", "dispatch_traffic": "dispatch",
    "Mesh": "mesh", "Region": "mesh",
    "Placement": "placement", "place": "placement",
    **{name: "traffic" for name in ("AnyTraffic", "FabricResult", "OuterTraffic", "Traffic", "all_to_all",
                                    "colours_per_node", "hotspot", "routes_per_node", "row_multicast",
                                    "single_message", "transpose", "uniform_random")},
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
