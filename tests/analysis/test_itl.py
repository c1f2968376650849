"""Inter-token latency and each request's end to end (docs/model.md §11.5, §11.7): the gaps between a
request's consecutive outputs, pooled, on arrays by hand, on a two-request continuous batch by hand on
both executors, on the stage log (the gaps are done[r, t + 1] − done[r, t]; a request's mean gap is its
TPOT), and under speculative decoding (a verify pass is one output); mean, p50 and p99 as the result's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import simpy

from wsesim.analysis.requests import RequestTimes, load_figures, request_times
from wsesim.config.inference import load_inference_data
from wsesim.experiments.runner import run_inference
from wsesim.model.load import requests_of
from wsesim.sim.executors.batching import run_batches
from wsesim.sim.executors.reference_batching import serve_batches
from wsesim.sim.programs.builders.serving import serving_program
from wsesim.sim.programs.mapping import map_stages
from wsesim.sim.programs.plan import Trace
from wsesim.sim.programs.program import Program, ServeBatches

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 8, "output_len": 3}, "grid": "1x1"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
         "hardware.pe.sram": "1 MiB"}
DRAFT = {"kind": "model", "name": "tiny-draft", "hidden_size": 64, "layers": 1, "heads": 4, "kv_heads": 2,
         "head_dim": 16, "ffn_intermediate": 96, "vocab_size": 256, "dtype": "fp16"}


def _spec(**overrides: object):
    return load_inference_data(TINY, overrides={**DENSE, **overrides}).spec


def _times(emitted: list[float], outputs: list[int]) -> RequestTimes:
    n = len(outputs)
    nan = np.full(n, np.nan)
    return RequestTimes({"arrival": np.zeros(n), "admitted": nan, "started": nan, "first": nan,
                         "finished": nan}, np.ones(n), np.array(outputs), np.zeros(n, dtype=bool), 1.0,
                        np.array(emitted), np.array(outputs))


def test_gaps_stay_within_a_request_and_skip_a_refused_one() -> None:
    """Four requests of 3, 2, 1 and 2 outputs at cycles (0, 5, 9), refused (NaN, NaN), (20), (21, 30):
    the gaps are 5, 4 and 9 — never 9 → 20 nor 20 → 21 across requests, none for the refused or the
    one-token request."""
    t = _times([0, 5, 9, np.nan, np.nan, 20, 21, 30], [3, 2, 1, 2])
    assert t.itl.tolist() == [5.0, 4.0, 9.0]
    assert _times([], []).itl.size == 0


def test_mean_p50_p99_of_known_gaps() -> None:
    """Gaps 1..100 (one request of 101 outputs at 0, 1, 3, 6, ...): mean 50.5, p50 50.5 and p99 99.01
    (numpy's linear percentile: rank 0.99 · 99 = 98.01 between 99 and 100)."""
    emitted = np.concatenate(([0.0], np.cumsum(np.arange(1.0, 101.0))))
    t = _times(list(emitted), [101])
    t.cycles["finished"][:] = emitted[-1]
    figures = load_figures(_spec(), t, Trace())
    assert (figures["itl_s"], figures["itl_p50_s"]) == (50.5, 50.5)
    assert figures["itl_p99_s"] == pytest.approx(99.01, rel=1e-12)


class _HandCosts:
    """An iteration of p prompt pieces and d decode tokens costs 100·p + 10·d cycles; hand-offs none."""

    def iteration(self, decodes: int, longest: int, pieces: list) -> float:
        return 100.0 * len(pieces) + 10.0 * decodes

    def handoff(self, values: float, prompt: bool = False) -> float:
        return 0.0

    def experts(self, decodes: int, pieces: object, loads: object) -> tuple[float, float, float]:
        return (0.0, 0.0, 0.0)  # a dense stage's: no MoE layer


def _two_requests() -> tuple[object, ServeBatches]:
    spec = _spec(**{"inference.load.arrival": "poisson", "inference.load.rate": 1e5, "inference.load.requests": 2,
                    "inference.scheduler.batch": 4})
    op = serving_program(spec, map_stages(spec), requests_of(spec)).body[0]
    assert isinstance(op, ServeBatches) and op.policy == "prefill_first"
    return spec, replace(op, arrival=np.array([0.0, 15.0]), prompt=np.array([4, 4]), output=np.array([3, 2]))


def test_two_requests_batched_by_hand_on_both_executors() -> None:
    """One stage, prefill first. A (3 outputs) arrives at 0, B (2) at 15. A's prompt runs 0–100 (A's first
    token at 100); B's prompt 100–200 while A's decode waits (B's first at 200); A and B decode together
    200–220 (A's second, B's last at 220); A alone 220–230 (A's last). Gaps: A 120 and 10, B 20: ITL mean
    50, p50 20, p99 20 + 0.98 · 100 = 118 cycles, against TPOT A 65, B 20 (mean 42.5): A's stalled gap
    counts once in TPOT's mean of two requests and once among ITL's three gaps. End to end: A 230, B 205."""
    spec, op = _two_requests()
    fast = run_batches(op, [_HandCosts()])
    env = simpy.Environment()
    process = env.process(serve_batches(env, op, [_HandCosts()]))
    env.run()
    for log in (fast, process.value):
        assert log.emitted.tolist() == [100.0, 220.0, 230.0, 200.0, 220.0]
        t = request_times(spec, Program((op,)), Trace(batches=log))
        t = replace(t, clock=1.0)  # in cycles
        assert t.itl.tolist() == [120.0, 10.0, 20.0]
        assert t.tpot.tolist() == [65.0, 20.0]
        assert t.end_to_end.tolist() == [230.0, 205.0]
        figures = load_figures(spec, t, Trace(batches=log))
        assert (figures["itl_s"], figures["itl_p50_s"]) == (50.0, 20.0)
        assert figures["itl_p99_s"] == pytest.approx(118.0, rel=1e-12)
        assert (figures["e2e_mean_s"], figures["e2e_p50_s"]) == (217.5, 217.5)
        assert figures["e2e_p99_s"] == pytest.approx(205 + 0.99 * 25, rel=1e-12)


def test_stage_log_gaps_are_the_done_differences_and_average_to_tpot() -> None:
    """Without batching, 3 requests of 6 outputs through two stages: the gaps are done[r, t + 1] −
    done[r, t] exactly (``done``: each request's tokens' cycles as the log emitted them), 15 of them; each request's mean gap is its TPOT, so ITL's mean is TPOT's mean;
    end to end is each request's last token (all arrive at 0)."""
    spec = _spec(**{"inference.scheduler.batch": 3, "inference.load.output_len": 6, "inference.grid": "2x2",
                    "inference.layers_per_stage": 1, "inference.scheduler.batching": "none"})
    run = run_inference(spec)
    done = run.trace.batches.emitted.reshape(3, 6)
    t = request_times(spec, run.program, run.trace)
    assert np.array_equal(t.itl * spec.hardware.clock_hz, np.diff(done, axis=1).ravel())
    r = run.result
    assert r.itl_s == pytest.approx(r.tpot_s, rel=1e-12)
    gaps = np.diff(done, axis=1).ravel() / spec.hardware.clock_hz
    assert (r.itl_p50_s, r.itl_p99_s) == (float(np.percentile(gaps, 50)), float(np.percentile(gaps, 99)))
    assert r.e2e_mean_s == pytest.approx(done[:, -1].mean() / spec.hardware.clock_hz, rel=1e-12)
    assert r.e2e_p99_s == float(np.percentile(done[:, -1] / spec.hardware.clock_hz, 99))
    assert r.end_to_end_s == done.max() / spec.hardware.clock_hz  # the run's end, as before


def test_a_verify_pass_is_one_output() -> None:
    """Speculative decoding, K = 4, α = 0.5, 9 outputs: 5 verify passes (tests/sim/test_speculative), so 5
    gaps, not 8: the first the hand-off after the prefill and the first pass, each next the hand-off
    after a pass and the pass. ITL's mean is the span over 5, TPOT's over 8."""
    spec = _spec(**{"inference.load.output_len": 9, "inference.interconnect": "swarmx",
                    "inference.speculative": {"draft": DRAFT, "tokens": 4, "acceptance": 0.5}})
    run = run_inference(spec)
    assert run.result.speculative["rounds"] == 5
    stage, draft = run.costs.stages[0].batches, run.costs.draft  # the passes' contexts 9, 10, 12, 14, 16
    gaps = [(2000.5 if j == 0 else 2002.5) + draft.iteration(1, c, []) + 2002 + stage.iteration(1, c, [])
            for j, c in enumerate((9, 10, 12, 14, 16))]
    t = request_times(spec, run.program, run.trace)
    assert t.itl * 1e9 == pytest.approx(gaps, rel=1e-12)
    r = run.result
    assert r.itl_s == pytest.approx(sum(gaps) / 5 / 1e9, rel=1e-12)
    assert r.itl_s * 5 == pytest.approx(r.tpot_s * 8, rel=1e-12)


def test_a_one_token_run_has_no_gap() -> None:
    """One output token: no gap (ITL 0, as TPOT), end to end its first token's time."""
    r = run_inference(_spec(**{"inference.load.output_len": 1})).result
    assert (r.itl_s, r.itl_p50_s, r.itl_p99_s) == (0.0, 0.0, 0.0)
    assert r.e2e_mean_s == r.ttft_s > 0
