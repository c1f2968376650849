"""Work that cannot finish on this machine is refused up front (wsesim.experiments.estimate, issue 12
item 10): the runner checks the estimate before it builds a mesh or simulates, a sweep before any
point runs, ``wsesim tune`` for all its candidates; ``--workers`` beyond the CPUs warns.

Nothing here runs the refused work: the runner's plan builder is replaced by one that fails the test."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from wsesim import cli
from wsesim.config.errors import ConfigError
from wsesim.config.loader import default_experiment_path, load_experiment, load_experiment_data
from wsesim.experiments import estimate, runner, training
from wsesim.experiments.estimate import check_work, estimate_work
from wsesim.experiments.sweep import load_sweep

TINY: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 1},
                        "simulation": {"granularity": "pe"}}


def _wse2(**overrides: Any) -> Any:
    """The shipped Qwen3-30B-A3B on WSE-2 experiment (block:16, flow, 128 experts) with overrides."""
    return load_experiment(overrides=overrides).spec


@pytest.fixture
def nothing_built(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the run was built although it cannot finish")

    monkeypatch.setattr(training, "make_plan", fail)


CANNOT_FINISH = {
    "1e8-node-mesh": ({"hardware.mesh.rows": 10_000, "hardware.mesh.cols": 10_000, "simulation.granularity": "pe"},
                      "100,000,000 mesh nodes", "use a coarser simulation.granularity (block:16 or more; now pe)"),
    "pe-wse2-packet": ({"simulation.granularity": "pe", "simulation.fabric": "packet"},
                       "96,169,500 packet messages per dispatch", "use simulation.fabric: flow"),
    "packet-full-step": ({"simulation.fabric": "packet"},  # one dispatch takes 25 s; a step has 96
                         "381,969 packet messages per dispatch × 96 dispatches", "use simulation.fabric: flow"),
}


@pytest.mark.parametrize(("overrides", "counts", "advice"), CANNOT_FINISH.values(), ids=CANNOT_FINISH.keys())
@pytest.mark.usefixtures("nothing_built")
def test_a_run_that_cannot_finish_is_refused_before_anything_is_built(overrides: dict[str, Any], counts: str,
                                                                      advice: str) -> None:
    with pytest.raises(ConfigError) as info:
        runner.run_experiment(_wse2(**overrides))
    message = str(info.value)
    assert message.startswith("this run cannot finish here: it ")
    assert "needs more memory than this machine has" in message or "would run longer than" in message
    assert counts in message and advice in message
    assert "\n" not in message


def test_experts_past_the_mesh_nodes_are_each_a_region_of_the_bases() -> None:
    """Issue 30.3: 16,384 experts on 2,961 mesh nodes were counted as 2,961 regions ("about 21 s"); the
    placement makes one region per expert (several to a node), each a column of both bases and of the idle
    regions' path tables, and the run went to MemoryError."""
    from wsesim.experiments.training import expert_placement, random_streams

    spec = _wse2(**{"model.experts": 16384})
    e = estimate.estimate_work(spec)
    assert e.regions == len(expert_placement(spec, random_streams(0)[0]).regions) == 16384
    assert e.bytes > 8e9 and e.seconds > 40
    tiny = _wse2(**{"hardware": "tiny8", "model": "tiny-moe", "simulation.granularity": "pe", "model.experts": 100})
    assert estimate.estimate_work(tiny).regions == 64  # at most one per PE


def test_4096_experts_run_once_and_tuned_but_not_past_a_lower_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """One step with 4,096 experts takes ~15 s (12 s of them building the dispatch bases) and 1.8 GB on
    the 2-core machine: allowed, and so is tuning it (the bases are built once: 6 candidates ~ 30 s). With
    WSESIM_MAX_RUN_S=20 one run passes but not the six; with 10, not even one."""
    spec = _wse2(**{"model.experts": 4096})
    e = check_work(spec)
    assert (e.mesh_nodes, e.regions, e.driver) == (47 * 63, 4096, "mesh")
    assert 5 < e.seconds < 60 and 1e9 < e.bytes < 4e9
    assert e.total_seconds(6) == pytest.approx(e.setup_seconds + 6 * (e.seconds - e.setup_seconds))
    assert e.seconds < e.total_seconds(6) < 6 * e.seconds
    check_work(spec, runs=6)
    monkeypatch.setenv("WSESIM_MAX_RUN_S", "20")
    check_work(spec)
    with pytest.raises(ConfigError, match=r"would run longer than 20 s \(WSESIM_MAX_RUN_S\): .* for 6 runs .* "
                                          r"use a coarser simulation.granularity"):
        check_work(spec, runs=6)
    monkeypatch.setenv("WSESIM_MAX_RUN_S", "10")
    with pytest.raises(ConfigError, match=r"would run longer than 10 s \(WSESIM_MAX_RUN_S\)"):
        check_work(spec)
    monkeypatch.setenv("WSESIM_MAX_RUN_S", "soon")
    with pytest.raises(ConfigError, match=r"^WSESIM_MAX_RUN_S: expected a number of seconds, got 'soon'$"):
        check_work(spec)


def test_ordinary_runs_pass_and_the_estimate_follows_its_counts() -> None:
    tiny = estimate_work(load_experiment_data(TINY).spec)
    assert (tiny.mesh_nodes, tiny.regions, tiny.packet_messages) == (64, 4, 0)
    assert tiny.seconds < 0.01 and tiny.bytes < 1e9
    shipped = check_work(_wse2())  # the shipped experiment: about a second
    assert shipped.seconds < 10
    finer = estimate_work(_wse2(**{"simulation.granularity": "block:8"}))
    assert finer.mesh_nodes == 94 * 125 and finer.seconds > shipped.seconds and finer.bytes > shipped.bytes
    more = estimate_work(_wse2(**{"model.experts": 256}))
    assert more.seconds > shipped.seconds
    packet = estimate_work(load_experiment_data(TINY, overrides={"simulation.fabric": "packet"}).spec)
    assert packet.packet_messages == 64 * 5 and packet.seconds > tiny.seconds


def test_wsesim_run_refuses_with_one_line_and_exit_2(capsys: pytest.CaptureFixture[str],
                                                     nothing_built: None) -> None:
    code = cli.main(["run", "--set", "simulation.granularity=pe", "--set", "simulation.fabric=packet"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    [line] = err.splitlines()
    assert line.startswith("wsesim: this run cannot finish here: it ")


def test_wsesim_tune_counts_every_candidate(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                            nothing_built: None) -> None:
    monkeypatch.setenv("WSESIM_MAX_RUN_S", "60")
    monkeypatch.setattr(estimate, "ENGINE_SECONDS", {"fast": 20.0 / (48 * 128), "reference": 1.0})
    assert cli.main(["tune", "--json"]) == 2  # 6 candidates × 20 s > 60 s
    assert "for 6 runs" in capsys.readouterr().err


def test_a_sweep_refuses_a_point_that_cannot_finish_before_any_runs(
        write_yaml: Callable[[str, str], Path], nothing_built: None) -> None:
    sweep = {"kind": "sweep", "name": "big", "base": str(default_experiment_path()),
             "points": [{"model.experts": 8}, {"simulation.fabric": "packet"}]}
    path = write_yaml("big.yaml", yaml.safe_dump(sweep, sort_keys=False))
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert str(info.value).startswith(f"{path}: points: point 1 {{simulation.fabric=packet}}: "
                                      "this run cannot finish here")
    assert cli.main(["validate", str(path)]) == 0  # the file itself is valid: validate does not estimate


def test_more_workers_than_cpus_warns(write_yaml: Callable[[str, str], Path], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = {"kind": "sweep", "name": "one", "base": TINY, "points": [{"model.top_k": 1}]}
    path = write_yaml("one.yaml", yaml.safe_dump(sweep, sort_keys=False))
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "3"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("wsesim: warning: --workers 3 is more than the 1 CPUs here: the points share them "
                      "(no faster, more memory)")
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "1"]) == 0
    assert "warning" not in capsys.readouterr().err


# ------------------------------------------------- issue 22 #1: the estimate counts what the run runs

ALLOWED = {  # small runs whose cost each term dominates (CPU seconds measured alongside, see below)
    "micro-batches": {"training.micro_batches": 300},
    "tiles": {"training.tiles": 10_000, "hardware.pe.sram": "1 GiB"},
    "reference": {"simulation.engine": "reference", "training.micro_batches": 60},
    "mesh": {"hardware.mesh.rows": 96, "hardware.mesh.cols": 96},
    "cluster": {"cluster.systems": 4, "cluster.interconnect": "swarmx", "training.micro_batches": 60},
    "global-batch": {"training.global_batch": 48, "training.batch_per_tile": "auto", "training.tiles": 2},
}


@pytest.mark.parametrize("overrides", ALLOWED.values(), ids=ALLOWED.keys())
def test_what_is_allowed_counts_the_runs_own_work(overrides: dict[str, Any]) -> None:
    """The counts the estimate multiplies are the run's own (micro-batches, tiles, one attention span per
    micro-batch, layer, tile and pass). How long the run takes against the prediction is a benchmark's
    question (``scripts/bench_engine.py``), not a test's: a timed check fails at random on a loaded
    machine."""
    spec = load_experiment_data(TINY, overrides=overrides).spec
    e = check_work(spec)
    run = runner.simulate_experiment(spec)
    assert run.result.feasible and run.trace is not None
    assert (e.micro_batches, e.tiles) == (run.result.micro_batches, run.result.tiles)
    spans = sum(1 for s in run.trace.spans if s[1] == "attention")
    assert spans == 4 * e.micro_batches * e.layers * e.tiles


def test_global_batch_auto_counts_the_fewest_micro_batches_before_routing(monkeypatch: pytest.MonkeyPatch) -> None:
    """``global_batch`` 2^24 was routed (1.5 TiB) before the estimate looked: now nothing is routed."""
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("routed although the run cannot finish")

    monkeypatch.setattr(training, "route_tokens", fail)
    spec = _wse2(**{"training.global_batch": 2**24})
    assert estimate.fewest_micro_batches(spec) == 2**23
    with pytest.raises(ConfigError, match=r"mostly micro-batches; --set training\.global_batch=\d+ would fit"):
        runner.run_experiment(spec)


def test_the_suggested_override_fits_and_twice_it_does_not() -> None:
    spec = _wse2(**{"training.micro_batches": 100_000})
    with pytest.raises(ConfigError) as info:
        check_work(spec)
    fit = int(str(info.value).rsplit("training.micro_batches=", 1)[1].split()[0])
    check_work(spec, micro_batches=fit)
    with pytest.raises(ConfigError):
        check_work(spec, micro_batches=2 * fit + 1)


def test_the_estimate_counts_the_in_place_mapping_and_the_kernel_model() -> None:
    """Issue 29: in_place took 2× its estimate and kernel more; the estimate ignored both. In place, the
    shipped experiment (L=48, E=128, B=3 sequences of 4,096 at top_k 8, 994 PE columns) draws
    48·128·994 = 6,107,136 column counts of c = 3·4096·8 / (128·994) = 0.7726 copies each, at
    20 + 27·√c = 43.73 ns: 0.2671 s, and lays 48·128 experts' ops at 18 µs: 0.1106 s (measured on this
    machine: 0.375 s a run against 0.069 with regions); its one region, the whole wafer, builds no
    dispatch bases. The kernel model's cost pass: 48·(20 + 0.55·128) = 4,339 lookups at 7.4 µs, 0.0321 s."""
    import math

    from wsesim.config.loader import load_experiment
    from wsesim.experiments.estimate import estimate_work

    plain = estimate_work(load_experiment().spec)
    placed = estimate_work(load_experiment(overrides={"simulation.moe_mapping": "in_place"}).spec)
    kernel = estimate_work(load_experiment(overrides={"simulation.compute": "kernel"}).spec)
    c = 3 * 4096 * 8 / (128 * 994)
    assert c == pytest.approx(0.7726, abs=1e-4)
    expected = 48 * 128 * 994 * (20e-9 + 27e-9 * math.sqrt(c)) + 48 * 128 * 1.8e-5
    assert placed.terms["in_place"][0] == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.3777, abs=1e-4)
    assert "in_place" not in plain.terms and "kernel" not in plain.terms
    assert placed.regions == 1 and placed.setup_seconds < plain.setup_seconds / 5
    assert kernel.terms["kernel"][0] == pytest.approx(48 * (20 + 0.55 * 128) * 7.4e-6, rel=1e-12)
