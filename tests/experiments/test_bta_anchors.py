"""The BTA paper's published shapes (Soboleva et al., SC Workshops '25; README), on a reduced grid of the
shipped experiment (Qwen3-30B-A3B on WSE-2, defaults of workloads/qwen3-30b-a3b/experiment.yaml).

Nothing here feeds an expected curve to the model: each number comes out of the simulated step with
the hardware YAML's global calibration; these tests say which shapes it must show.

Acceptance (issue: sweeps and the paper's figures): G=1 throughput falls as experts grow (top_k 8);
tuned-G throughput stays within ±20 % of its mean across the expert sweep; the tuned/G=1 speedup is
1.5–4× at 128 experts / top_k 8, 4–10× at 128 experts / top_k 1, at most 1.5× at 8 experts / top_k 8,
and it grows as top_k falls and as experts grow.
"""

from __future__ import annotations

import pytest

from wsesim.config.loader import load_experiment
from wsesim.experiments.runner import run_experiment
from wsesim.experiments.tune import tune

GRID = [(8, 8), (32, 8), (128, 8), (128, 1)]


@pytest.fixture(scope="module")
def throughput() -> dict[tuple[int, int], tuple[float, float]]:
    """(experts, top_k) -> (G=1 throughput, tuned throughput), tokens/s."""
    out = {}
    for experts, top_k in GRID:
        loaded = load_experiment(overrides={"model.experts": experts, "model.top_k": top_k})
        g1, tuned = run_experiment(loaded.spec), tune(loaded).best
        assert g1.feasible and tuned.feasible and g1.tiles == 1
        out[experts, top_k] = (g1.throughput_tokens_per_s, tuned.throughput_tokens_per_s)
    return out


def _speedup(t, key):
    return t[key][1] / t[key][0]


def test_g1_falls_as_experts_grow(throughput) -> None:
    g1 = [throughput[e, 8][0] for e in (8, 32, 128)]
    assert g1[0] > g1[1] > g1[2]


def test_tuned_stays_flat_across_experts(throughput) -> None:
    tuned = [throughput[e, 8][1] for e in (8, 32, 128)]
    mean = sum(tuned) / len(tuned)
    assert all(abs(t / mean - 1) <= 0.20 for t in tuned), [round(t / mean, 3) for t in tuned]


def test_speedup_at_the_published_points(throughput) -> None:
    assert _speedup(throughput, (8, 8)) <= 1.5
    assert 1.5 <= _speedup(throughput, (128, 8)) <= 4.0
    assert 4.0 <= _speedup(throughput, (128, 1)) <= 10.0


def test_speedup_grows_with_sparsity(throughput) -> None:
    assert _speedup(throughput, (8, 8)) < _speedup(throughput, (32, 8)) < _speedup(throughput, (128, 8))
    assert _speedup(throughput, (128, 8)) < _speedup(throughput, (128, 1))


def test_tuning_never_loses_to_g1(throughput) -> None:
    assert all(tuned >= g1 for g1, tuned in throughput.values())
