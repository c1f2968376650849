"""``experiments.runs``: one record of what a run gives back, for a training step and a serving run alike
(``Run``), each result a ``Result``; an infeasible one keeps what says why (a serving run's mapping)."""

from __future__ import annotations

from wsesim.config.inference import load_inference_data
from wsesim.config.loader import load_experiment_data
from wsesim.experiments.runner import run_inference, simulate_experiment
from wsesim.experiments.runs import Result, Run

TRAIN = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe", "training": {"seq_len": 64, "tiles": 1},
         "simulation": {"granularity": "pe"}}
SERVE = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
         "inference": {"load": {"prompt_len": 8, "output_len": 3}, "grid": "1x1"}}


def test_a_training_step_and_a_serving_run_give_the_same_record() -> None:
    step = simulate_experiment(load_experiment_data(TRAIN).spec)
    served = run_inference(load_inference_data(SERVE, overrides={"hardware.pe.sram": "1 MiB"}).spec)
    for run, serving in ((step, False), (served, True)):
        assert isinstance(run, Run) and isinstance(run.result, Result)
        assert run.result.feasible and run.result.to_dict()["feasible"] is True
        assert run.serving is serving
        assert run.trace is not None and run.program is not None and run.costs is not None
    assert step.plan is not None and step.mapping is None
    assert served.plan is None and served.mapping is not None


def test_an_infeasible_serving_run_keeps_its_mapping_and_says_why() -> None:
    """A stage of 1 PE with 16 KiB cannot hold the tiny model's layer: nothing runs, the reason is the
    mapping's."""
    run = run_inference(load_inference_data(SERVE, overrides={"hardware.pe.sram": "16 KiB"}).spec)
    assert not run.result.feasible and run.result.infeasible_reason
    assert run.serving and run.mapping is not None and not run.mapping.feasible
    assert run.trace is None and run.program is None
