"""One run (wsesim.experiments.runner) builds each of its parts once: the seeded streams, the expert
placement, and the dispatch and combine models (the wafer maps read the models the step was timed with,
not a second pair). Counted by wrapping the functions that build them, so each assertion is a count that a
second build would break. Also: the batch search routes every B it tries from the routing stream's start,
as a run at that B alone would, so sharing one stream changes no draw."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from wsesim.analysis.wafer import wafer_maps
from wsesim.config.loader import load_experiment_data
from wsesim.experiments import runner, training
from wsesim.fabric import fidelity
from wsesim.fabric.dispatch import DispatchModel
from wsesim.model.routing import route_tokens

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe", "training": {"seq_len": 64, "tiles": 1},
        "simulation": {"granularity": "pe"}}


def _counted(counts: Counter[str], name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        counts[name] += 1
        return f(*args, **kwargs)

    return wrapped


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    counts: Counter[str] = Counter()
    monkeypatch.setattr(training, "random_streams", _counted(counts, "streams", training.random_streams))
    monkeypatch.setattr(training, "expert_placement", _counted(counts, "placement", training.expert_placement))
    monkeypatch.setattr(DispatchModel, "__init__", _counted(counts, "dispatch models", DispatchModel.__init__))
    fidelity.dispatch_models.cache_clear()  # a model built by an earlier test would not be counted
    return counts


@pytest.mark.parametrize("overrides", [
    {"training.batch_per_tile": 2},
    {"training.batch_per_tile": "auto"},          # the batch search: several B tried, one placement
    {"training.global_batch": 4, "training.batch_per_tile": "auto", "training.micro_batches": "auto"},
    {"simulation.placement": "random"},           # a placement drawn from the seeded stream
])
def test_a_run_draws_its_streams_and_placement_once_and_builds_each_dispatch_model_once(
        counts: Counter[str], overrides: dict[str, Any]) -> None:
    run = runner.simulate_experiment(load_experiment_data(TINY, overrides=overrides).spec)
    assert run.result.feasible, run.result.infeasible_reason
    wafer_maps(run)  # ``wsesim run --out`` / ``--png``: the link map from the same two models
    assert counts == {"streams": 1, "placement": 1, "dispatch models": 2}  # dispatch and combine


def test_the_plan_takes_the_placement_it_was_sized_against(counts: Counter[str]) -> None:
    spec = load_experiment_data(TINY, overrides={"simulation.placement": "random"}).spec
    size = training.size_step(spec)
    plan, _, placement = training.make_plan(spec, size.batch_per_tile, size.tokens, placement=size.placement)
    assert placement is size.placement
    assert plan.expert_region_of == tuple(size.placement.expert_region_index)
    assert counts["placement"] == 1


def test_every_batch_tried_is_routed_from_the_stream_start() -> None:
    """The copy each trial routes with draws what a fresh stream from the seed draws, and leaves the
    shared stream where it was."""
    spec = load_experiment_data(TINY).spec
    _, shared = training.random_streams(spec.training.seed)
    for B in (3, 1, 2):
        tried = route_tokens(spec.model, spec.training, B * spec.training.seq_len, training._route_draw(shared))
        fresh = route_tokens(spec.model, spec.training, B * spec.training.seq_len,
                             training.random_streams(spec.training.seed)[1])
        np.testing.assert_array_equal(tried, fresh)
    np.testing.assert_array_equal(shared.random(4), training.random_streams(spec.training.seed)[1].random(4))
