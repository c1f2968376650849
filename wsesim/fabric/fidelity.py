"""The fabric's fidelities behind one interface (docs/model.md §6).

A ``Fabric`` times a traffic pattern on a mesh: ``simulate(traffic) -> FabricResult``. ``flow`` (vectorised
link loads: busiest link and longest route, any mesh) and ``packet`` (SimPy, per-hop wormhole timing and
FIFO contention, small meshes) both satisfy it; ``make_fabric`` picks one by the ``simulation.fabric`` key.
"""

from __future__ import annotations

from typing import Protocol

from ..config.errors import ConfigError
from .flow import FlowFabric
from .mesh import Mesh
from .packet import PacketFabric
from .traffic import AnyTraffic, FabricResult


class Fabric(Protocol):
    """A fidelity of the fabric: times traffic on ``mesh`` (bytes in, cycles out)."""

    mode: str
    mesh: Mesh

    def simulate(self, traffic: AnyTraffic) -> FabricResult: ...


FABRICS: dict[str, type[FlowFabric] | type[PacketFabric]] = {"flow": FlowFabric, "packet": PacketFabric}
"""Fabric fidelities by name (the ``simulation.fabric`` key)."""


def make_fabric(kind: str, mesh: Mesh, routing: str = "xy") -> Fabric:
    """The fabric model ``kind`` (a key of ``FABRICS``) on ``mesh``. Raises ``ConfigError`` naming the
    valid kinds for an unknown one, or the valid routings for an unknown ``routing``."""
    if kind not in FABRICS:
        raise ConfigError(f"expected one of {', '.join(FABRICS)}, got {kind!r}", path="fabric")
    return FABRICS[kind](mesh, routing)
