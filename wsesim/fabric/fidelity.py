"""The fabric's fidelities behind one interface (docs/model.md §6).

A ``Fabric`` times a traffic pattern on a mesh: ``simulate(traffic) -> FabricResult``. ``flow`` (vectorised
link loads: busiest link and longest route, any mesh), ``packet`` (every message through every stage of
its route, FIFO lanes per link: a vectorised discrete-event model, up to a full-wafer MoE dispatch at
block granularity) and ``packet-simpy`` (the same semantics as a SimPy process per message: the
reference ``packet`` is checked against, small meshes only) all satisfy it; ``make_fabric`` picks one by
the ``simulation.fabric`` key (and ``wsesim fabric --mode``).
"""

from __future__ import annotations

from typing import Protocol

from ..config.errors import ConfigError
from .flow import FlowFabric
from .mesh import Mesh
from .packet import PacketFabric
from .packet_simpy import SimPyPacketFabric
from .traffic import AnyTraffic, FabricResult


class Fabric(Protocol):
    """A fidelity of the fabric: times traffic on ``mesh`` (bytes in, cycles out)."""

    mode: str
    mesh: Mesh

    def simulate(self, traffic: AnyTraffic) -> FabricResult: ...


FABRICS: dict[str, type[FlowFabric] | type[PacketFabric] | type[SimPyPacketFabric]] = {
    "flow": FlowFabric, "packet": PacketFabric, "packet-simpy": SimPyPacketFabric}
"""Fabric fidelities by name (the ``simulation.fabric`` key)."""


def make_fabric(kind: str, mesh: Mesh, routing: str = "xy") -> Fabric:
    """The fabric model ``kind`` (a key of ``FABRICS``) on ``mesh``. Raises ``ConfigError`` naming the
    valid kinds for an unknown one, or the valid routings for an unknown ``routing``."""
    if kind not in FABRICS:
        raise ConfigError(f"expected one of {', '.join(FABRICS)}, got {kind!r}", path="fabric")
    return FABRICS[kind](mesh, routing)
