"""Tuning G (wsesim.experiments.tune): the candidates the memory model admits, and the best feasible throughput.

On tiny8 at PE granularity with seq_len 32 a whole tune is a few dozen millisecond-runs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from wsesim.config.loader import load_experiment_data
from wsesim.experiments import tune as tune_module
from wsesim.experiments.tune import TuneResult, candidates, tune
from wsesim.model.memory import max_tiles

TINY: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 32, "batch_per_tile": "auto", "tiles": 1},
                        "simulation": {"granularity": "pe"}}


def _loaded(**overrides: Any) -> Any:
    return load_experiment_data(TINY, overrides=overrides)


@pytest.fixture(scope="module", params=["auto", 2, 5], ids=lambda b: f"B={b}")
def tuned(request: pytest.FixtureRequest) -> tuple[Any, TuneResult]:
    loaded = _loaded(**{"training.batch_per_tile": request.param})
    return loaded, tune(loaded)


def test_g1_is_always_a_candidate_and_first(tuned: tuple[Any, TuneResult]) -> None:
    loaded, result = tuned
    assert candidates(loaded.spec)[0][0] == 1
    assert result.candidates[0].tiles == 1
    assert len({(c.tiles, c.batch_per_tile) for c in result.candidates}) == len(result.candidates)


def test_best_is_the_fastest_feasible_candidate(tuned: tuple[Any, TuneResult]) -> None:
    _, result = tuned
    feasible = [c for c in result.candidates if c.feasible]
    assert feasible
    assert result.best.feasible
    assert result.best in result.candidates
    assert result.best.throughput_tokens_per_s == max(c.throughput_tokens_per_s for c in feasible)


def test_candidates_fit_the_memory_model(tuned: tuple[Any, TuneResult]) -> None:
    """Each (G, B) is admitted by the memory model's tile limit for its B."""
    loaded, _ = tuned
    spec = loaded.spec
    for G, B in candidates(spec):
        assert isinstance(B, int) and B >= 1
        assert G == 1 or max_tiles(spec.hardware, spec.model, spec.training, batch_per_tile=B) >= G


def test_with_a_fixed_batch_only_g_varies() -> None:
    loaded = _loaded(**{"training.batch_per_tile": 2})
    pairs = candidates(loaded.spec)
    assert {B for _, B in pairs} == {2}
    gs = [G for G, _ in pairs]
    assert gs == sorted(set(gs)) and gs[0] == 1 and len(gs) > 2
    spec = loaded.spec
    assert gs[-1] == max_tiles(spec.hardware, spec.model, spec.training, batch_per_tile=2)


def test_auto_batch_tries_several_b() -> None:
    pairs = candidates(_loaded().spec)
    assert len({B for _, B in pairs}) > 2
    assert len({G for G, _ in pairs}) > 2


def test_tuning_beats_or_matches_g1() -> None:
    result = tune(_loaded(**{"training.batch_per_tile": 2}))
    g1 = result.candidates[0]
    assert g1.tiles == 1 and g1.feasible
    assert result.best.throughput_tokens_per_s >= g1.throughput_tokens_per_s
    assert result.best.tiles > 1  # on tiny8, more tiles amortise the weight stream


def test_ties_go_to_the_smaller_g(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every candidate reporting the same throughput: the smallest G wins."""
    real = tune_module.run_experiment

    def flat(spec: Any) -> Any:
        return dataclasses.replace(real(spec), throughput_tokens_per_s=1.0)

    monkeypatch.setattr(tune_module, "run_experiment", flat)
    result = tune(_loaded(**{"training.batch_per_tile": 2}))
    assert result.best.tiles == 1


def test_nothing_fits_gives_the_infeasible_g1_candidate() -> None:
    result = tune(_loaded(**{"training.seq_len": 4096}))
    assert not any(c.feasible for c in result.candidates)
    assert result.best is result.candidates[0]
    assert result.best.tiles == 1 and result.best.infeasible_reason


def test_to_dict_has_best_and_candidates(tuned: tuple[Any, TuneResult]) -> None:
    _, result = tuned
    data = result.to_dict()
    assert set(data) == {"best", "candidates", "baseline", "gain_over_baseline"}
    assert data["best"] == result.best.to_dict()
    assert [c["tiles"] for c in data["candidates"]] == [c.tiles for c in result.candidates]


def test_the_gain_is_over_the_b_a_run_at_g1_picks() -> None:
    """Issue 29: tiny8 at seq_len 32 admits G=1 candidates B = 16 … 19 (``_geometric`` lists every B whose
    largest G is 1), sorted smallest B first; ``wsesim run`` at G=1 picks B=19 (auto: the largest that fits),
    the sweep's ``speedup`` baseline. The gain must divide by that run, not by the B=16 candidate."""
    from wsesim.experiments.runner import run_experiment

    loaded = _loaded()
    result = tune(loaded)
    run = run_experiment(loaded.spec)  # tiles 1, batch_per_tile auto
    assert result.candidates[0].batch_per_tile < run.batch_per_tile  # the case the old ratio got wrong
    assert result.baseline is not None and result.baseline in result.candidates
    assert (result.baseline.tiles, result.baseline.batch_per_tile) == (1, run.batch_per_tile)
    assert result.baseline.throughput_tokens_per_s == run.throughput_tokens_per_s
    assert result.gain == result.best.throughput_tokens_per_s / run.throughput_tokens_per_s
