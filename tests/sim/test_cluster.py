"""A cluster of wafers (issue 11, docs/model.md §9): the tree's shape, one system equal to today's
single wafer exactly, N systems never more than N times one, more interconnect bandwidth never slower,
more latency never faster, and the tree's timing as the closed forms say."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from wsesim.config.loader import load_experiment, load_experiment_data
from wsesim.experiments.runner import run_experiment, simulate_experiment
from wsesim.sim.programs.cluster import tree_depth, tree_for

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2}, "simulation": {"granularity": "pe"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96}


def tree(bandwidth: str = "4 GB/s", latency: str = "100 ns", fan_out: int = 2) -> dict[str, Any]:
    return {"name": "t", "fan_out": fan_out, "link_bandwidth": bandwidth, "latency": latency}


def _run(overrides: dict[str, Any]):
    return run_experiment(load_experiment_data(TINY, overrides=overrides).spec)


@pytest.mark.parametrize(("systems", "fan_out", "depth"), [
    (1, 4, 0), (2, 4, 1), (4, 4, 1), (5, 4, 2), (16, 4, 2), (17, 4, 3), (64, 4, 3), (65, 4, 4), (64, 2, 6), (3, 2, 2)])
def test_tree_depth(systems: int, fan_out: int, depth: int) -> None:
    assert tree_depth(systems, fan_out) == depth


def test_the_tree_from_the_swarmx_preset() -> None:
    """16 CS-2s behind 1:4 nodes: 2 levels of 2 µs = 3,400 cycles at 850 MHz; the path at the slower of a
    CS-2's 150 GB/s and the port's 195 GB/s (a CS-3's I/O); 16 CS-3s run at the 195 GB/s."""
    spec = load_experiment(overrides={"cluster.systems": 16, "cluster.interconnect": "swarmx"}).spec
    t = tree_for(spec.hardware, spec.cluster)
    assert (t.depth, t.latency, t.rate) == (2, pytest.approx(3400), pytest.approx(150e9 / 850e6))
    assert tree_for(spec.hardware, spec.cluster.model_copy(update={"systems": 1})) is None
    cs3 = load_experiment(hardware="wse3", overrides={"cluster.systems": 16, "cluster.interconnect": "swarmx"}).spec
    assert tree_for(cs3.hardware, cs3.cluster).rate == pytest.approx(195e9 / 850e6)


@pytest.mark.parametrize("overrides", [{}, DENSE, {**DENSE, "training.micro_batches": 3},
                                       {"training.activations": "store", "hardware.runtime.staging_buffer": "256 B"}])
def test_one_system_is_todays_single_wafer_exactly(overrides: dict[str, Any]) -> None:
    alone = _run(overrides).to_dict()
    one = _run({**overrides, "cluster.systems": 1, "cluster.interconnect": tree("1 GB/s", "1 ms")}).to_dict()
    for d in (alone, one):
        d.pop("wall_s")
    assert one == alone
    assert (one["systems"], one["scaling_efficiency"]) == (1, 1.0)
    assert one["cluster_throughput_tokens_per_s"] == one["throughput_tokens_per_s"]


CLUSTERS = [
    ({}, 2, tree()), ({}, 8, tree("1 GB/s")), ({}, 64, tree("16 GB/s", "2 us", 4)),
    (DENSE, 5, tree("2 GB/s", "37 ns")), ({**DENSE, "training.micro_batches": 3}, 16, tree("3 GB/s", "1 us")),
    ({"hardware.runtime.staging_buffer": "256 B", "training.activations": "store"}, 4, tree("8 GB/s", "500 ns")),
]


@pytest.mark.parametrize(("overrides", "systems", "net"), CLUSTERS)
def test_n_systems_never_give_more_than_n_times_one(overrides: dict[str, Any], systems: int,
                                                    net: dict[str, Any]) -> None:
    one = _run(overrides)
    many = _run({**overrides, "cluster.systems": systems, "cluster.interconnect": net})
    assert many.systems == systems and many.global_batch == systems * one.global_batch
    assert many.cluster_throughput_tokens_per_s == pytest.approx(systems * many.throughput_tokens_per_s, rel=1e-15)
    assert many.cluster_throughput_tokens_per_s <= systems * one.throughput_tokens_per_s
    assert many.step_cycles >= one.step_cycles and 0 < many.scaling_efficiency <= 1
    assert many.scaling_efficiency == pytest.approx(one.step_cycles / many.step_cycles, rel=1e-15)
    assert (many.io_bytes_in, many.io_bytes_out) == (one.io_bytes_in, one.io_bytes_out)  # per system


@pytest.mark.parametrize("overrides", [{}, DENSE, {"hardware.runtime.staging_buffer": "256 B"},
                                       {**DENSE, "training.micro_batches": 2, "hardware.runtime.staging_buffer": "512 B"}])
def test_more_interconnect_bandwidth_is_never_slower(overrides: dict[str, Any]) -> None:
    cycles = [_run({**overrides, "cluster.systems": 8, "cluster.interconnect": tree(bw)}).step_cycles
              for bw in ("0.5 GB/s", "1 GB/s", "2 GB/s", "3 GB/s", "4 GB/s", "8 GB/s", "1 TB/s")]
    assert all(a >= b for a, b in zip(cycles, cycles[1:], strict=False)), cycles
    assert cycles[0] > cycles[-1]
    assert cycles[-2] == cycles[-1]  # past the wafer's own 4 GB/s the ports are not the bottleneck


@pytest.mark.parametrize("overrides", [{}, {"hardware.runtime.staging_buffer": "256 B"}])
def test_more_latency_or_more_levels_are_never_faster(overrides: dict[str, Any]) -> None:
    by_latency = [_run({**overrides, "cluster.systems": 8, "cluster.interconnect": tree("4 GB/s", f"{ns} ns")}).step_cycles
                  for ns in (0, 10, 100, 1000, 10000)]
    assert all(a <= b for a, b in zip(by_latency, by_latency[1:], strict=False)), by_latency
    by_size = [_run({**overrides, "cluster.systems": n, "cluster.interconnect": tree()}).step_cycles
               for n in (2, 3, 4, 8, 16, 64)]
    assert all(a <= b for a, b in zip(by_size, by_size[1:], strict=False)), by_size


def test_the_tree_adds_its_latency_to_every_chunk_and_to_the_last_gradient() -> None:
    """8 systems, fan-out 2: 3 levels of 100 ns (100 cycles at 1 GHz); ports at 2 GB/s, half the wafer's
    I/O: every chunk takes size / 2 + 300 cycles from leaving MemoryX to arriving, and the step ends 300
    cycles after its last gradient left the wafer (the reduce_drain phase), plus MemoryX's optimizer step."""
    run = simulate_experiment(load_experiment_data(TINY, overrides={
        **DENSE, "cluster.systems": 8, "cluster.interconnect": tree("2 GB/s")}).spec)
    io = run.trace.io_in
    np.testing.assert_allclose(io.arrival - io.start, io.sizes / 2 + 300)
    last_left = max(float(batch[1][-1]) for batch in run.trace.gradient_batches)
    assert run.result.step_cycles == pytest.approx(last_left + 300 + run.result.phases["optimizer_step"])
    assert run.result.phases["reduce_drain"] == pytest.approx(300)
    assert sum(run.result.phases.values()) == pytest.approx(run.result.step_cycles)
