"""The table of fabric fidelities (wsesim.fabric.fidelity.FABRICS): every entry loads a class of its own
name from its own module, the ``simulation.fabric`` key lists exactly its names, and the engine's dispatch
timer comes from it (flow's dispatch models built once per mesh and placement)."""

from __future__ import annotations

from typing import get_args

import numpy as np
import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.loader import load_hardware
from wsesim.config.specs import SimulationSpec
from wsesim.config.tables import load
from wsesim.fabric import fidelity
from wsesim.fabric.dispatch import dispatch_traffic
from wsesim.fabric.fidelity import FABRICS, dispatch_timer, make_fabric
from wsesim.fabric.mesh import Mesh
from wsesim.fabric.placement import place


@pytest.fixture(scope="module")
def wafer() -> tuple[Mesh, object]:
    m = Mesh.from_hardware(load_hardware("tiny8"), "pe")
    return m, place(m, 4)


def test_the_key_lists_exactly_the_table() -> None:
    assert get_args(SimulationSpec.model_fields["fabric"].annotation) == tuple(FABRICS)


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_every_entry_loads_a_class_of_its_name_in_its_module(name: str) -> None:
    entry = FABRICS[name]
    module, _, cls_name = entry.cls.partition(":")
    cls = load(entry.cls)
    assert module.startswith("wsesim.fabric.") and cls.__module__ == module and cls.__name__ == cls_name
    assert cls.mode == name and entry.description


def test_an_unknown_fidelity_lists_the_valid_ones(wafer: tuple[Mesh, object]) -> None:
    m, placement = wafer
    for make in (lambda: make_fabric("analytic", m), lambda: dispatch_timer("analytic", m, placement)):  # type: ignore[arg-type]
        with pytest.raises(ConfigError) as e:
            make()
        assert str(e.value) == "fabric: expected one of flow, packet, packet-simpy, got 'analytic'"


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_every_fidelity_times_a_dispatch_as_its_fabric_does(name: str, wafer: tuple[Mesh, object]) -> None:
    """The timer each entry gives the engine agrees with its own fabric on the same traffic, both ways
    (flow's from its precomputed bases, within rounding; the packet models exactly)."""
    m, placement = wafer
    nbytes = np.array([3000.0, 0.0, 1200.0, 640.0])
    timer = dispatch_timer(name, m, placement)  # type: ignore[arg-type]
    for reverse in (False, True):
        traffic = dispatch_traffic(m, placement, nbytes)  # type: ignore[arg-type]
        result = make_fabric(name, m).simulate(traffic.reversed() if reverse else traffic)
        cycles, busiest = timer(nbytes, reverse)
        assert cycles == pytest.approx(result.cycles, rel=1e-9)
        assert busiest == pytest.approx(result.max_link_load_bytes, rel=1e-9)


def test_flow_builds_its_dispatch_models_once_per_wafer_and_placement(wafer: tuple[Mesh, object]) -> None:
    """A tuner or sweep worker runs many steps on one wafer and placement: the bases are built once."""
    m, placement = wafer
    fidelity.dispatch_models.cache_clear()
    first = dispatch_timer("flow", m, placement)  # type: ignore[arg-type]
    second = dispatch_timer("flow", m, placement)  # type: ignore[arg-type]
    info = fidelity.dispatch_models.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    assert first(np.full(4, 100.0), False) == second(np.full(4, 100.0), False)
