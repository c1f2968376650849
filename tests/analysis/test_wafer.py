"""Per-node wafer maps (wsesim.analysis.wafer): shapes, bounds, and the JSON round trip ``wsesim plot --wafer``
relies on. Runs on tiny8: at PE granularity the node grid is 8 × 8, at ``block:2`` it is 4 × 4.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from wsesim.analysis.wafer import WaferMaps, wafer_maps
from wsesim.config.loader import load_experiment_data
from wsesim.experiments.runner import simulate_experiment
from wsesim.experiments.runs import Run
from wsesim.model.memory import EXPERT_PARTS, training_memory

TINY: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2},
                        "simulation": {"granularity": "pe"}}
CASES = {
    "pe": {},
    "block-2": {"simulation.granularity": "block:2"},
    "32-experts": {"model.experts": 32},
    "zipf-store": {"training.routing": "zipf:2", "training.activations": "store"},
    "random-placement": {"simulation.placement": "random", "training.seed": 5},
    "3-experts-zipf": {"model.experts": 3, "training.routing": "zipf:1.5", "training.batch_per_tile": "auto"},
}


@pytest.fixture(scope="module", params=list(CASES))
def run_and_maps(request: pytest.FixtureRequest) -> tuple[Run, WaferMaps]:
    run = simulate_experiment(load_experiment_data(TINY, overrides=CASES[request.param]).spec)
    assert run.result.feasible, run.result.infeasible_reason
    return run, wafer_maps(run)


def test_shapes_are_the_mesh_node_grid(run_and_maps: tuple[Run, WaferMaps]) -> None:
    run, maps = run_and_maps
    grid = (run.mesh.rows, run.mesh.cols)
    assert (maps.rows, maps.cols, maps.block) == (*grid, run.mesh.block)
    assert maps.rows * maps.block == run.plan.hw.mesh.rows and maps.cols * maps.block == run.plan.hw.mesh.cols
    for name in ("busy", "sram", "link", "region"):
        assert np.shape(getattr(maps, name)) == grid, name


def test_busy_is_a_fraction(run_and_maps: tuple[Run, WaferMaps]) -> None:
    _, maps = run_and_maps
    busy = np.asarray(maps.busy)
    assert (busy >= 0).all() and (busy <= 1).all()
    assert busy.max() > 0


def test_sram_high_water_between_the_non_expert_part_and_capacity(run_and_maps: tuple[Run, WaferMaps]) -> None:
    """Every PE holds at least the largest phase's non-expert parts, and no more than fits."""
    run, maps = run_and_maps
    plan, r = run.plan, run.result
    mem = training_memory(plan.hw, plan.model, plan.training, batch_per_tile=plan.batch_per_tile, expert_load=1.0)
    components = {c for p in mem.phases for c in p.components}
    assert set(EXPERT_PARTS) & components  # the names the lower bound leaves out still exist
    non_expert = max(sum(v for k, v in p.components.items() if k not in EXPERT_PARTS) for p in mem.phases)
    sram = np.asarray(maps.sram)
    assert maps.sram_capacity == r.sram_capacity_bytes_per_pe
    assert sram.min() >= non_expert
    assert sram.max() <= maps.sram_capacity
    assert sram.max() == r.peak_sram_bytes_per_pe  # the busiest region's high-water is the result's peak


def test_regions_and_links(run_and_maps: tuple[Run, WaferMaps]) -> None:
    run, maps = run_and_maps
    region = np.asarray(maps.region)
    assert sorted(e for experts in maps.region_experts for e in experts) == list(range(run.plan.model.experts))
    assert set(np.unique(region)) - {-1} == set(range(len(maps.region_experts)))
    link = np.asarray(maps.link)
    assert (link >= 0).all()
    assert link.max() > 0  # dispatch and combine cross the fabric
    assert maps.gantt and all(end >= start for _, _, start, end in maps.gantt)
    assert maps.step_cycles == run.result.step_cycles


def test_json_round_trip(run_and_maps: tuple[Run, WaferMaps]) -> None:
    _, maps = run_and_maps
    text = json.dumps(maps.to_dict(), allow_nan=False)
    back = WaferMaps.from_dict(json.loads(text))
    assert back == maps
    assert json.dumps(back.to_dict(), allow_nan=False) == text


# ------------------------------------------------------------------------ issue 12 item 14: what the Gantt shows


def test_gantt_has_the_layers_weights_and_the_regions_that_waited_longest(run_and_maps: tuple[Run, WaferMaps]) -> None:
    from wsesim.analysis.wafer import GANTT_REGIONS

    run, maps = run_and_maps
    layer = maps.gantt_layer
    arrivals = [g for g in maps.gantt if g[0] == "weights in"]
    chunks = [k for k, a in zip(run.trace.io_in.names, run.trace.io_in.arrival, strict=True)
              if len(k) > 2 and k[1] == layer and not np.isnan(a)]
    assert len(arrivals) == len(chunks) > 0
    waited: dict[int, float] = {}
    for ops in run.trace.expert_ops:
        if ops.layer == layer:
            for e, w in zip(ops.experts.tolist(), ops.weight_wait.tolist(), strict=True):
                r = run.placement.expert_region_index[e]
                waited[r] = waited.get(r, 0.0) + w
    shown = {int(g[0].split()[1]) for g in maps.gantt if g[0].startswith("region")}
    assert len(shown) == min(GANTT_REGIONS, len(waited))
    assert min(waited[r] for r in shown) >= max([waited[r] for r in waited if r not in shown], default=0.0)
    ops = {(g[0], g[2]) for g in maps.gantt if g[0].startswith("region") and not g[1].endswith("weight_wait")}
    for lane, name, start, end in maps.gantt:
        if name.endswith("weight_wait"):
            assert end > start and (lane, end) in ops  # a wait ends where its op starts


def test_hottest_region_and_expert_ranges() -> None:
    from wsesim.analysis.wafer import expert_ranges, hottest_region

    maps = WaferMaps(2, 3, 1, 1e9, 1.0, [[0.0] * 3] * 2, [[1.0] * 3] * 2, 2.0, [[0.0] * 3] * 2,
                     [[0, 0, 1], [-1, 1, 1]], [[0, 1], [2, 3, 4, 7]], 0, [], "t")
    assert hottest_region(maps, [[1.0, 1.0, 5.0], [9.0, 5.0, 5.0]]) == (1, (0, 1, 2, 2))
    assert hottest_region(maps, [[1.0] * 3] * 2) is None  # all equal: nothing to mark
    assert expert_ranges([7, 0, 1, 2, 4]) == "0-2,4,7" and expert_ranges([3]) == "3"
