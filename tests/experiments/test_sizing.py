"""B is sized in one place (``experiments.training.size_step``): ``wsesim memory training`` reports the B
that ``wsesim run`` runs, sized for the load its routing gives, not for balanced routing."""

from __future__ import annotations

import json

import pytest

from wsesim import cli
from wsesim.config.loader import load_experiment
from wsesim.experiments.runner import run_experiment
from wsesim.experiments.training import size_step

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
        "--set", "training.seq_len=64"]


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert cli.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("extra", [
    [],
    ["--set", "training.tiles=2", "--set", "training.routing=zipf:2"],  # balanced says B=6; the hot region fits 4
    ["--set", "training.routing=zipf:1.2", "--set", "model.experts=3"],
])
def test_memory_training_reports_the_batch_run_runs(capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    mem = _json(capsys, "memory", "training", *TINY, *extra, "--json")
    run = _json(capsys, "run", *TINY, *extra, "--json")
    assert mem["batch_per_tile"] == mem["auto_batch_per_tile"] == run["batch_per_tile"]
    assert mem["peak_bytes_per_pe"] == run["peak_sram_bytes_per_pe"]
    assert mem["binding_phase"] == run["binding_memory_phase"]


def test_a_hot_region_lowers_auto_below_the_balanced_batch() -> None:
    """The case that drifted: with zipf:2 at G=2 the busiest region holds more per PE than the mean."""
    spec = load_experiment(hardware="tiny8", model="tiny-moe", overrides={
        "simulation.granularity": "pe", "training.seq_len": 64, "training.tiles": 2,
        "training.routing": "zipf:2"}).spec
    size = size_step(spec)
    assert size.expert_load > 1.0
    assert size.feasible and size.memory.feasible
    assert size.batch_per_tile == run_experiment(spec).batch_per_tile


def test_a_given_batch_is_kept_and_checked() -> None:
    spec = load_experiment(hardware="tiny8", model="tiny-moe", overrides={
        "simulation.granularity": "pe", "training.seq_len": 64, "training.batch_per_tile": 40}).spec
    size = size_step(spec)
    assert size.batch_per_tile == 40
    assert not size.feasible and size.reason.startswith("SRAM: phase")
