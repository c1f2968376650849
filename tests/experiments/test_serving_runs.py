"""Serving runs end to end (docs/model.md §11.4, §11.5) through ``run_inference`` and ``search_mapping``:
the executors' timelines derived by hand from the cycles each stage reports in ``result.per_stage``,
for both engines, which must agree exactly; and the search over grids.

Each stage's decode step depends on the context it runs at, but ``per_stage`` reports it at the run's
longest context only (the last token's, S + T − 1). So the step of the t-th output token, at context
S + t, is read off a run whose output ends there (``output_len`` t + 1): ``_steps``. The mapping, and so
the prefill, does not depend on the output length when the grid and layers per stage are fixed.

tiny8 runs at 1 GHz: a cycle is 1 ns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from wsesim.config.inference import load_inference_data
from wsesim.experiments.inference import search_mapping, spread
from wsesim.experiments.runner import run_inference

if TYPE_CHECKING:  # only for annotations: the result is reached through run_inference's run
    from wsesim.analysis.serving import ServeResult

BASE: dict[str, Any] = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
                        "inference": {"load": {"prompt_len": 16, "output_len": 4}, "scheduler": {"batching": "none"}}}
"""The one-token pipeline of docs/model.md §11.4 (``batching: none``; ``auto`` batches a batch of more than one)."""
CLOCK = 1e9
ENGINES = ["fast", "reference"]
ONE_PE = {"inference.grid": "1x1", "hardware.pe.sram": "1 MiB"}
"""The whole model as one stage on one PE: nothing is communicated, the hand-off back is to itself."""
LINK = {"kind": "interconnect", "name": "test-link", "fan_out": 4, "link_bandwidth": "1 Tbit/s",
        "latency": "100 ns"}
TWO_WAFERS = {"inference.grid": "8x8", "inference.layers_per_stage": 1, "inference.interconnect": LINK}
"""Each layer a stage of the whole 8 × 8 wafer: stage 0 (layer 0, the embedding) on wafer 0, stage 1
(layer 1, the LM head) on wafer 1, so the hand-offs are the I/O link's and the interconnect's."""


def _spec(**overrides: Any) -> Any:
    return load_inference_data(BASE, overrides=overrides).spec


def _result(engine: str = "fast", **overrides: Any) -> ServeResult:
    return run_inference(_spec(**overrides).on(engine)).result


def _steps(engine: str, output_len: int, **overrides: Any) -> list[list[float]]:
    """``steps[s][t - 1]``: stage s's decode step for the t-th output token (t = 1 … output_len − 1),
    each read off the run that ends at that token's context."""
    runs = [_result(engine, **overrides, **{"inference.load.output_len": t + 1}) for t in range(1, output_len)]
    return [[r.per_stage[s]["decode_cycles"] for r in runs] for s in range(len(runs[0].per_stage))]


def _same(a: float, b: float) -> bool:
    return a == pytest.approx(b, rel=1e-12, abs=1e-18)


# ------------------------------------------------------------------------------------ one stage


@pytest.mark.parametrize("engine", ENGINES)
def test_one_stage_one_request_by_hand(engine: str) -> None:
    """One stage, one request, 4 tokens: the first token is the prefill, P cycles; each further token t
    one decode step d_t at context 16 + t, plus the hand-off back h (0: the token returns to the same
    grid). So TTFT = P, the end P + 3h + d₁ + d₂ + d₃, TPOT (3h + d₁ + d₂ + d₃) / 3.

    On one PE (tests/sim/test_serving.py) the attention kernels at context T cost 64·⌈T/4⌉ (scores: 64
    instructions of T) + 3T (softmax) + 16T (context) a layer. From T = 17 to 18 and from 18 to 19,
    ⌈T/4⌉ stays 5: 19 cycles a layer more, 38 for the two layers. Today P = 227,388 (a prompt of 16:
    every instruction's length a multiple of the 4 lanes, so as before the per-instruction count) and
    d = 15,326, 15,364, 15,402 (the old 15,230, 15,300, 15,370, which had 35T a layer, plus
    2·(64·5 + 19T − 35T) = 96, 64, 32)."""
    r = _result(engine, **ONE_PE)
    assert r.feasible and r.stages == 1 and r.systems == 1
    stage = r.per_stage[0]
    P, h = stage["prefill_cycles"], stage["handoff_decode_cycles"]
    d = _steps(engine, 4, **ONE_PE)[0]
    assert h == 0.0
    assert d[1] - d[0] == 38 and d[2] - d[1] == 38
    assert d[2] == stage["decode_cycles"]
    assert _same(r.ttft_s, P / CLOCK)
    assert _same(r.end_to_end_s, (P + 3 * h + sum(d)) / CLOCK)
    assert _same(r.tpot_s, (3 * h + sum(d)) / 3 / CLOCK)
    assert _same(r.tokens_per_s_per_request, 1 / r.tpot_s)
    assert _same(r.tokens_per_s, 4 / r.end_to_end_s)
    assert _same(r.prefill_tokens_per_s, 16 / r.ttft_s)
    assert r.decode_step_cycles == d[2] + h  # one token through every stage at the longest context
    assert stage["waiting_cycles"] == 0.0 and stage["busy"] == 1.0


@pytest.mark.parametrize("engine", ENGINES)
def test_a_batch_on_one_stage_queues_first_come_first_served(engine: str) -> None:
    """Three requests arrive at cycle 0 at one stage (h = 0), 3 tokens each. Request r's prompt is served
    r-th: its first token leaves at (r + 1)·P. Every request's next token has arrived before the stage
    frees, so the stage then serves token 1 of requests 0, 1, 2, then token 2 of 0, 1, 2:

        first tokens   P, 2P, 3P                          TTFT = mean = 2P
        token 1        3P + d₁, 3P + 2d₁, 3P + 3d₁
        token 2        3P + 3d₁ + d₂, … + 2d₂, … + 3d₂    end = 3P + 3d₁ + 3d₂
        TPOT = mean over r of (3P + 3d₁ + (r+1)·d₂ − (r+1)·P) / 2 = (P + 3d₁ + 2d₂) / 2
        waiting: prompts 0 + P + 2P; token 1 (3P − P) + (3P + d₁ − 2P) + (3P + 2d₁ − 3P);
                 token 2 (2d₁) + (d₁ + d₂) + (2d₂): 6P + 6d₁ + 3d₂ in all
        tokens/s = 9 / end, the same as one request's 3 / (P + d₁ + d₂): one stage is never idle
        either way.

    Today: first tokens at 227,388, 454,776 and 682,164 cycles, the end at 3P + 3·15,326 + 3·15,364 = 774,234."""
    batch = {**ONE_PE, "inference.scheduler.batch": 3, "inference.load.output_len": 3}
    r = _result(engine, **batch)
    stage = r.per_stage[0]
    P = stage["prefill_cycles"]
    d1, d2 = _steps(engine, 3, **ONE_PE)[0]
    end = 3 * P + 3 * d1 + 3 * d2
    assert _same(r.ttft_s, (P + 2 * P + 3 * P) / 3 / CLOCK)
    assert _same(r.tpot_s, (P + 3 * d1 + 2 * d2) / 2 / CLOCK)
    assert _same(r.end_to_end_s, end / CLOCK)
    assert _same(r.tokens_per_s, 9 / (end / CLOCK))
    assert _same(stage["waiting_cycles"], 6 * P + 6 * d1 + 3 * d2)
    assert _same(stage["busy"], 1.0)
    alone = _result(engine, **{**batch, "inference.scheduler.batch": 1})
    assert _same(alone.tokens_per_s, r.tokens_per_s)
    assert r.tokens_per_s_per_request < alone.tokens_per_s_per_request


# ------------------------------------------------------------------------------------ two stages


def _handoffs(r: ServeResult) -> tuple[float, float, float]:
    """The hand-offs between the two wafers, by hand: bytes / 4 B a cycle of I/O + 100 cycles of the
    interconnect's latency. Stage 0's prompt: 16·64 values · 2 B / 4 + 100 = 612; its token's
    activations 64·2/4 + 100 = 132; stage 1's new token back: 1·2/4 + 100 = 100.5."""
    hp, h0, h1 = 16 * 64 * 2 / 4 + 100, 64 * 2 / 4 + 100, 1 * 2 / 4 + 100
    assert _same(r.per_stage[0]["handoff_decode_cycles"], h0)
    assert _same(r.per_stage[1]["handoff_decode_cycles"], h1)
    return hp, h0, h1


@pytest.mark.parametrize("engine", ENGINES)
def test_two_stages_one_request_by_hand(engine: str) -> None:
    """One request through stage 0 (wafer 0) and stage 1 (wafer 1), 3 tokens: the first leaves at
    P₀ + 612 + P₁; each further token t costs the token back (100.5), stage 0's step, its hand-off (132)
    and stage 1's step. Today: 3,960 + 612 + 4,149 = 8,721, then 100.5 + 694 + 132 + 883 = 1,809.5 a
    token (steps 694 and 883), the end 8,721 + 2 · 1,809.5 = 12,340."""
    r = _result(engine, **TWO_WAFERS, **{"inference.load.output_len": 3})
    assert r.stages == 2 and r.systems == 2 and r.layers_per_stage == [1, 1]
    assert [s["wafer"] for s in r.per_stage] == [0, 1]
    hp, h0, h1 = _handoffs(r)
    P0, P1 = r.per_stage[0]["prefill_cycles"], r.per_stage[1]["prefill_cycles"]
    d0, d1 = _steps(engine, 3, **TWO_WAFERS)
    first = P0 + hp + P1
    step = [h1 + d0[t] + h0 + d1[t] for t in range(2)]
    assert _same(r.ttft_s, first / CLOCK)
    assert _same(r.end_to_end_s, (first + sum(step)) / CLOCK)
    assert _same(r.tpot_s, sum(step) / 2 / CLOCK)
    assert _same(r.decode_step_cycles, d0[1] + h0 + d1[1] + h1)
    assert [s["waiting_cycles"] for s in r.per_stage] == [0.0, 0.0]


@pytest.mark.parametrize("engine", ENGINES)
def test_two_stages_two_requests_fill_the_pipeline(engine: str) -> None:
    """Two requests, 3 tokens, the two wafers as above. A visit starts at the later of its arrival and the
    end of the stage's previous visit. Both stages serve request 0 before request 1 at every token, as
    long as request 1's prompt reaches stage 1 (2P₀ + 612) before request 0's second token does (at the
    earliest P₀ + 612 + P₁ + 100.5 + d₀ + 132): so P₀ < P₁ + 232.5 + d₀, asserted. Then by hand:

        stage 0  r0 prompt [0, P₀]            r1 prompt [P₀, 2P₀]
        stage 1  r0 prompt [P₀+612, A]        r1 prompt [max(2P₀+612, A), B]    A, B: first tokens
        token t, request r: stage 0 from max(r's last token + 100.5, stage 0 free), d₀ long;
                            stage 1 from max(that end + 132, stage 1 free), d₁ long.

    Today (P₀ 3,960, P₁ 4,149, d₀ 694, d₁ 883): A = 8,721, B = 8,721 + 4,149 = 12,870 (request 1 waits
    3,960 at stage 0 and 8,721 − 8,532 = 189 at stage 1; request 0's second token then waits 12,870 −
    9,647.5 = 3,222.5 at stage 1 for request 1's prompt); tokens leave at 13,753 and 15,562.5 (request 0),
    14,679.5 and 16,489 (request 1): 6 tokens in 16,489 ns, against one request's 3 in 12,340 — more
    tokens/s in all, fewer per request."""
    two = {**TWO_WAFERS, "inference.load.output_len": 3}
    r = _result(engine, **two, **{"inference.scheduler.batch": 2})
    hp, h0, h1 = _handoffs(r)
    P0, P1 = r.per_stage[0]["prefill_cycles"], r.per_stage[1]["prefill_cycles"]
    d0, d1 = _steps(engine, 3, **TWO_WAFERS)
    assert P1 + h1 + d0[0] + h0 > P0  # the order of service derived above holds

    waited = [P0, 0.0]  # request 1's prompt queues behind request 0's at stage 0
    a = P0 + hp + P1
    b_arrives = 2 * P0 + hp
    b = max(b_arrives, a) + P1
    waited[1] += max(b_arrives, a) - b_arrives
    done = {0: [a], 1: [b]}
    free0, free1 = 2 * P0, b
    for t in range(2):
        for req in (0, 1):
            arrives0 = done[req][-1] + h1
            start0 = max(arrives0, free0)
            free0 = start0 + d0[t]
            arrives1 = free0 + h0
            start1 = max(arrives1, free1)
            free1 = start1 + d1[t]
            waited[0] += start0 - arrives0
            waited[1] += start1 - arrives1
            done[req].append(free1)
    end = max(done[0][-1], done[1][-1])

    assert _same(r.ttft_s, (a + b) / 2 / CLOCK)
    assert _same(r.tpot_s, sum((done[q][2] - done[q][0]) / 2 for q in (0, 1)) / 2 / CLOCK)
    assert _same(r.end_to_end_s, end / CLOCK)
    assert _same(r.tokens_per_s, 6 / (end / CLOCK))
    for s, w in enumerate(waited):
        assert _same(r.per_stage[s]["waiting_cycles"], w)
    assert _same(r.per_stage[0]["busy"], (2 * P0 + 2 * sum(d0)) / end)
    assert _same(r.per_stage[1]["busy"], (2 * P1 + 2 * sum(d1)) / end)
    alone = _result(engine, **two)
    assert r.tokens_per_s > alone.tokens_per_s
    assert r.tokens_per_s_per_request < alone.tokens_per_s_per_request


# ------------------------------------------------------------------------------------ the engines agree

AGREE = [
    {**ONE_PE, "inference.scheduler.batch": 3, "inference.load.output_len": 3},
    {**TWO_WAFERS, "inference.scheduler.batch": 2, "inference.load.output_len": 3},
    {"inference.grid": "2x2", "inference.layers_per_stage": 1, "inference.scheduler.batch": 3,
     "inference.load.output_len": 5},
    {"model.layers": 3, "inference.grid": "2x2", "inference.layers_per_stage": 1, "inference.scheduler.batch": 4,
     "inference.kv_layout": "concat", "inference.load.prompt_len": 32},
    {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
     "model.layers": 4, "inference.grid": "4x4", "inference.layers_per_stage": 1, "inference.scheduler.batch": 2},
]


@pytest.mark.parametrize("overrides", AGREE, ids=range(len(AGREE)))
def test_the_two_engines_give_the_same_result(overrides: dict[str, Any]) -> None:
    """Every figure of the result equal, not merely close (``events`` counts what each engine counts and
    ``wall_s`` is the host's time; the fast engine's events are its iterations, one a stage visit
    without batching: S · B · T)."""
    fast, ref = (_result(e, **overrides).to_dict() for e in ENGINES)
    assert fast["feasible"]
    assert fast["events"] == fast["stages"] * fast["batch"] * fast["output_len"]
    for key in ("events", "wall_s"):
        fast.pop(key), ref.pop(key)
    assert fast == ref


# ------------------------------------------------------------------------------------ search_mapping


def _comparable(r: ServeResult) -> dict[str, Any]:
    return {k: v for k, v in r.to_dict().items() if k not in ("wall_s",)}


def test_search_keeps_the_fastest_per_request_and_returns_every_candidate() -> None:
    """A 16 × 16 mesh: grids 16 × 16, 16 × 8, 8 × 16 and 8 × 8, all holding tiny-moe. Each candidate's
    result is the run at that grid; the best is the largest (tokens/s per request, tokens/s). Today
    16 × 8 wins (751,315 against 699,790 tokens/s per request at 16 × 16: its rows of 8 allreduce over
    fewer hops, and its columns of 16 hold the same layer), so the best is neither the first candidate
    nor a square."""
    mesh = {"hardware.mesh.rows": 16, "hardware.mesh.cols": 16}
    best, results = search_mapping(_spec(**mesh))
    assert [r.grid for r in results] == ["16x16", "16x8", "8x16", "8x8"]
    assert all(r.feasible for r in results)
    for r in results:
        assert _comparable(r) == _comparable(_result(**mesh, **{"inference.grid": r.grid}))
    top = max(results, key=lambda r: (r.tokens_per_s_per_request, r.tokens_per_s))
    assert best.result.grid == top.grid and best.mapping.grid == (16, 8)
    assert _comparable(best.result) == _comparable(top)


def test_search_skips_a_candidate_that_does_not_fit_and_says_why() -> None:
    """150 layers at 40 a stage (4 stages) on one 16 × 24 wafer: 16 × 24, 16 × 12 and 16 × 8 give 1, 2,
    3 grids a wafer, too few; 8 × 12 gives 4 (40 · 74,560 / 96 = 31,067 B a PE of weights); 8 × 8
    would need 40 · 74,560 / 64 = 46,600 B a PE, more than 36,864. The infeasible grids larger than the
    one that fits are returned with their reasons and zero figures, the smaller one is left out."""
    spec = _spec(**{"hardware.mesh.rows": 16, "hardware.mesh.cols": 24, "model.layers": 150,
                    "inference.systems": 1, "inference.layers_per_stage": 40})
    best, results = search_mapping(spec)
    assert [(r.grid, r.feasible) for r in results] == [("16x24", False), ("16x12", False), ("16x8", False),
                                                        ("8x12", True)]
    big = results[0]
    assert "do not fit 1 wafer at 16x24" in big.infeasible_reason
    assert "1 stage holds 40 of 150 layers" in big.infeasible_reason
    assert big.tokens_per_s == 0 and big.ttft_s == 0
    assert results[-1].stages == 4
    assert best.result.feasible and best.result.grid == "8x12"


def test_search_with_nothing_that_fits_says_so() -> None:
    """1,000 layers on one 16 × 16 wafer fit no grid: every candidate is infeasible with its reason, and
    the search's answer is infeasible too (the largest grid's reason)."""
    spec = _spec(**{"hardware.mesh.rows": 16, "hardware.mesh.cols": 16, "model.layers": 1000,
                    "inference.systems": 1})
    best, results = search_mapping(spec)
    assert [r.grid for r in results] == ["16x16", "16x8", "8x16", "8x8"]
    assert not any(r.feasible for r in results) and all(r.infeasible_reason for r in results)
    assert not best.result.feasible
    assert best.result.infeasible_reason == results[0].infeasible_reason
    assert "do not fit 1 wafer" in best.result.infeasible_reason


def test_search_spreads_its_runs_when_every_grid_fits() -> None:
    """``spread``: all of a short list, else ``limit`` evenly along it, the first and the last kept."""
    items: list[Any] = list(range(10))
    assert spread(items, 20) == items
    assert spread(items, 4) == [0, 3, 6, 9]
