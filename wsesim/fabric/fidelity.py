"""The fabric's fidelities behind one interface, and the one table of them (docs/model.md §6).

A ``Fabric`` times a traffic pattern on a mesh: ``simulate(traffic) -> FabricResult``. ``flow`` (vectorised
link loads: busiest link and longest route, any mesh), ``packet`` (every message through every stage of
its route, FIFO lanes per link: a vectorised discrete-event model, up to a full-wafer MoE dispatch at
block granularity) and ``packet-simpy`` (the same semantics as a SimPy process per message: the
reference ``packet`` is checked against, small meshes only) all satisfy it.

``FABRICS`` is the table of them, by the ``simulation.fabric`` key (and ``wsesim fabric --mode``): each
entry says where its class is (imported when one is first made, so a flow run never loads the packet
models), what it is, and how the engine times an MoE dispatch with it. A new fidelity is its module and
one entry here (and its name in ``SimulationSpec.fabric``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from ..config.tables import entry, load

if TYPE_CHECKING:
    import numpy as np

    from .dispatch import DispatchModel
    from .mesh import Mesh
    from .placement import Placement
    from .traffic import AnyTraffic, FabricResult


class Fabric(Protocol):
    """A fidelity of the fabric: times traffic on ``mesh`` (bytes in, cycles out)."""

    mode: str
    mesh: Mesh

    def simulate(self, traffic: AnyTraffic) -> FabricResult: ...


DispatchTimer = Callable[["np.ndarray", bool], tuple[float, float]]
"""The fabric as the engine sees it: (bytes per expert, reverse) -> (cycles, busiest link's bytes); the
reverse is the combine, expert outputs going back to their tokens."""


@dataclass(frozen=True)
class Fidelity:
    """One fabric fidelity: ``cls`` its class as ``"module:Class"`` (made with ``(mesh, routing)``),
    ``description`` what it models, and ``dispatch(name, mesh, placement)`` the engine's timer of an MoE
    dispatch on that wafer and placement."""

    cls: str
    description: str
    dispatch: Callable[[str, Mesh, Placement], DispatchTimer]


@lru_cache(maxsize=8)
def dispatch_models(mesh: Mesh, placement: Placement) -> dict[bool, DispatchModel]:
    """Dispatch (False) and combine (True) flow models of a mesh and placement, built once per process
    and kept for the last few (a tuner or a sweep worker runs many steps on the same wafer and
    placement; a run's wafer maps read the link loads of the models its step was timed with)."""
    # local: keeps wsesim.fabric's modules out of every command's start
    from .dispatch import DispatchModel

    dispatch, combine = DispatchModel.pair(mesh, placement)
    return {False: dispatch, True: combine}


def _flow_dispatch(kind: str, mesh: Mesh, placement: Placement) -> DispatchTimer:
    """Flow times a dispatch from the placement's precomputed link and path bases (``DispatchModel``)."""
    models = dispatch_models(mesh, placement)
    return lambda nbytes, reverse: models[reverse].cycles(nbytes)


def _simulated_dispatch(kind: str, mesh: Mesh, placement: Placement) -> DispatchTimer:
    """A fidelity that simulates traffic times each dispatch as its messages, simulated."""
    # local: keeps wsesim.fabric's modules out of every command's start
    from .dispatch import dispatch_traffic

    fabric = make_fabric(kind, mesh)

    def timed(nbytes: np.ndarray, reverse: bool) -> tuple[float, float]:
        traffic = dispatch_traffic(mesh, placement, nbytes)
        result = fabric.simulate(traffic.reversed() if reverse else traffic)
        return result.cycles, result.max_link_load_bytes

    return timed


FABRICS: dict[str, Fidelity] = {
    "flow": Fidelity("wsesim.fabric.flow:FlowFabric", "link loads and path latencies, vectorised",
                     _flow_dispatch),
    "packet": Fidelity("wsesim.fabric.packet:PacketFabric",
                       "every message through every stage, a vectorised discrete-event model",
                       _simulated_dispatch),
    "packet-simpy": Fidelity("wsesim.fabric.packet_simpy:SimPyPacketFabric",
                             "the same as a SimPy process per message: packet's reference",
                             _simulated_dispatch),
}
"""Fabric fidelities by name (the ``simulation.fabric`` key)."""


def make_fabric(kind: str, mesh: Mesh, routing: str = "xy") -> Fabric:
    """The fabric model ``kind`` (a key of ``FABRICS``) on ``mesh``. Raises ``ConfigError`` naming the
    valid kinds for an unknown one, or the valid routings for an unknown ``routing``."""
    fidelity: Callable[[Mesh, str], Fabric] = load(entry(FABRICS, kind, "fabric").cls)
    return fidelity(mesh, routing)


def dispatch_timer(kind: str, mesh: Mesh, placement: Placement) -> DispatchTimer:
    """How the engine times an MoE dispatch and combine with the fidelity ``kind`` on ``mesh`` and
    ``placement`` (``ConfigError`` naming the valid kinds for an unknown one)."""
    return entry(FABRICS, kind, "fabric").dispatch(kind, mesh, placement)
