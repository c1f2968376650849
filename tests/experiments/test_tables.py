"""The plug-in tables the runner composes from: engines (``sim.executors.engines.ENGINES``), MoE mappings
(``mappings.MOE_MAPPINGS``) and fabric fidelities (``fabric.fidelity.FABRICS``, tested in tests/fabric).
Each key of the specs lists exactly its table's names, every entry loads, an unknown name lists the
valid ones, and no layer outside sim/ special-cases a name of a table."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import numpy as np
import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.loader import load_experiment_data
from wsesim.config.specs import SimulationSpec
from wsesim.experiments import mappings
from wsesim.experiments.mappings import MOE_MAPPINGS, moe_mapping
from wsesim.experiments.training import expert_placement, make_plan, random_streams
from wsesim.fabric.fidelity import FABRICS
from wsesim.sim.executors.engines import ENGINES, engine_for

PACKAGE = Path(__file__).resolve().parents[2] / "wsesim"
TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 2}, "simulation": {"granularity": "pe"}}


@pytest.mark.parametrize(("key", "table"), [("engine", ENGINES), ("moe_mapping", MOE_MAPPINGS), ("fabric", FABRICS)])
def test_each_simulation_key_lists_exactly_its_table(key: str, table: dict[str, object]) -> None:
    assert get_args(SimulationSpec.model_fields[key].annotation) == tuple(table)


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_engine_loads_a_step_function_from_the_sim_layer(name: str) -> None:
    engine = ENGINES[name]
    assert engine.__module__.startswith("wsesim.sim.executors.") and engine.__name__ == "simulate"
    spec = load_experiment_data(TINY, overrides={"simulation.engine": name}).spec
    assert engine_for(spec) is engine


def test_an_unknown_engine_or_mapping_lists_the_valid_ones() -> None:
    spec = load_experiment_data(TINY).spec
    spec = spec.model_copy(update={"simulation": spec.simulation.model_copy(update={"engine": "turbo",
                                                                                    "moe_mapping": "sideways"})})
    with pytest.raises(ConfigError) as e:
        engine_for(spec)
    assert str(e.value) == "simulation.engine: expected one of fast, reference, got 'turbo'"
    with pytest.raises(ConfigError) as e:
        expert_placement(spec, random_streams(0)[0])
    assert str(e.value) == "simulation.moe_mapping: expected one of regions, in_place, got 'sideways'"


@pytest.mark.parametrize("name", sorted(MOE_MAPPINGS))
def test_every_mapping_places_and_costs_the_experts(name: str) -> None:
    spec = load_experiment_data(TINY, overrides={"simulation.moe_mapping": name}).spec
    mapping = moe_mapping(name)
    assert mapping.description and mapping is MOE_MAPPINGS[name]
    placement = expert_placement(spec, random_streams(spec.training.seed)[0])
    assert len(placement.expert_region_index) == spec.model.experts
    tokens = np.full((spec.model.layers, spec.model.experts), 8)
    plan = make_plan(spec, 1, tokens, placement=placement)[0]
    costs = mapping.expert_costs(plan)
    assert plan.cost_experts is mapping.expert_costs
    assert all(c.shape == tokens.shape and (c > 0).all() for c in costs.cycles.values())
    if name == "in_place":  # one region, the whole wafer, shared by all
        assert len(placement.regions) == 1 and placement.regions[0].pes == spec.hardware.pes


def test_the_in_place_spread_is_a_stream_of_its_own() -> None:
    """The third child of the seed: the placement and routing streams are the first two, unchanged."""
    place_rng, route_rng = random_streams(7)
    spread = mappings.spread_stream(7)
    children = np.random.default_rng(7).spawn(3)
    for made, child in zip((place_rng, route_rng, spread), children, strict=True):
        assert made.random() == child.random()


_KEYS = {"fabric", "engine", "moe_mapping", "mode"}
"""The attributes that hold a table's name: ``simulation.fabric``, ``.engine``, ``.moe_mapping`` and a
fabric's ``mode``."""


def _names_a_key(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in _KEYS or isinstance(node, ast.Name) and node.id in _KEYS


def _special_cases(path: Path, root: Path = PACKAGE) -> list[str]:
    """Where a table's key is compared with a name (``== "flow"``, ``in ("a", "b")``) or a prefix of one
    (``.startswith("packet")``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            hit = any(map(_names_a_key, operands)) and any(
                isinstance(o, ast.Constant) and isinstance(o.value, str)
                or isinstance(o, ast.Tuple | ast.List | ast.Set) and any(isinstance(e, ast.Constant) for e in o.elts)
                for o in operands)
        else:
            hit = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                   and node.func.attr in ("startswith", "endswith") and _names_a_key(node.func.value))
        if hit:
            found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("folder", ["model", "fabric", "experiments", "analysis", "output", "cli"])
def test_no_table_name_is_special_cased_outside_its_table(folder: str) -> None:
    """A fidelity, mapping or engine is chosen by its table, never by comparing its name (``== "flow"``,
    ``== "in_place"``, ``.startswith("packet")``): adding one touches its table and its module only."""
    assert [s for p in sorted((PACKAGE / folder).rglob("*.py")) for s in _special_cases(p)] == []


def test_the_special_case_check_sees_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('if spec.simulation.fabric == "flow":\n    pass\nif "in_place" != sim.moe_mapping: pass\n'
                     'if sim.fabric.startswith("packet"): pass\nif engine in ("fast", "x"): pass\n'
                     'x = "flow"  # == "flow" in a comment\nif e.driver == "packet": pass\n'
                     'if sim.executors.engine == other: pass\n', encoding="utf-8")
    assert [int(s.split(":")[1]) for s in _special_cases(probe, tmp_path)] == [1, 3, 4, 5]
