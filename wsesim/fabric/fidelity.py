"""The fabric's fidelities behind one interface (docs/model.md §6).

A ``Fabric`` times a traffic pattern on a mesh: ``simulate(traffic) -> FabricResult``. ``flow`` (vectorised
link loads: busiest link and longest route, any mesh), ``packet`` (every message through every stage of
its route, FIFO lanes per link: a vectorised discrete-event model, up to a full-wafer MoE dispatch at
block granularity) and ``packet-simpy`` (the same semantics as a SimPy process per message: the
reference ``packet`` is checked against, small meshes only) all satisfy it; ``make_fabric`` picks one by
the ``simulation.fabric`` key (and ``wsesim fabric --mode``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..config.errors import ConfigError

if TYPE_CHECKING:
    from .mesh import Mesh
    from .traffic import AnyTraffic, FabricResult


class Fabric(Protocol):
    """A fidelity of the fabric: times traffic on ``mesh`` (bytes in, cycles out)."""

    mode: str
    mesh: Mesh

    def simulate(self, traffic: AnyTraffic) -> FabricResult: ...


FABRICS: dict[str, str] = {
    "flow": "link loads and path latencies, vectorised (flow.FlowFabric)",
    "packet": "every message through every stage, a vectorised discrete-event model (packet.PacketFabric)",
    "packet-simpy": "the same as a SimPy process per message: packet's reference (packet_simpy.SimPyPacketFabric)"}
"""Fabric fidelities by name (the ``simulation.fabric`` key). A fidelity's module is imported when one is
first made: a flow run never loads the packet models."""


def make_fabric(kind: str, mesh: Mesh, routing: str = "xy") -> Fabric:
    """The fabric model ``kind`` (a key of ``FABRICS``) on ``mesh``. Raises ``ConfigError`` naming the
    valid kinds for an unknown one, or the valid routings for an unknown ``routing``."""
    if kind not in FABRICS:
        raise ConfigError(f"expected one of {', '.join(FABRICS)}, got {kind!r}", path="fabric")
    if kind == "flow":
        from .flow import FlowFabric as fidelity
    elif kind == "packet":
        from .packet import PacketFabric as fidelity  # type: ignore[assignment]
    else:
        from .packet_simpy import SimPyPacketFabric as fidelity  # type: ignore[assignment]
    return fidelity(mesh, routing)
