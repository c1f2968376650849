"""Speculative decoding (docs/model.md §11.9) and split prefill (§11.10) on tiny cases by hand: the expected
tokens of a verify pass, the rounds' contexts, a verify pass of K + 1 vectors on one PE, the hand-offs
between wafers, the KV cache's bytes and hand-off time, the timelines on both executors, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.inference import load_inference_data
from wsesim.experiments.runner import run_inference
from wsesim.model.speculative import expected_tokens, round_contexts
from wsesim.sim.cost.costing import cost_serving, wafer_handoff
from wsesim.sim.programs.builders.serving import serving_program
from wsesim.sim.programs.mapping import map_stages

# the tiny dense model of tests/sim/test_serving.py (H 64, q 64, k 32, v 32, o 64, F 96, 2 layers, vocabulary
# 256) on one PE of tiny8 (1 GHz, 4 FMAC lanes in fp16, I/O 4 B a cycle); swarmx: 2 us = 2,000 cycles a node
DENSE = {"experts": 0, "top_k": 0, "expert_intermediate": 0, "ffn_intermediate": 96}
TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 8, "output_len": 9}, "grid": "1x1", "interconnect": "swarmx"}}
SET = {**{f"model.{k}": v for k, v in DENSE.items()}, "hardware.pe.sram": "1 MiB"}
DRAFT = {"kind": "model", "name": "tiny-draft", "hidden_size": 64, "layers": 1, "heads": 4, "kv_heads": 2,
         "head_dim": 16, "ffn_intermediate": 96, "vocab_size": 256, "dtype": "fp16"}


def _spec(**overrides: object):
    return load_inference_data(TINY, overrides={**SET, **overrides}).spec


def _speculative(k: int = 4, alpha: float = 0.5, **overrides: object):
    return _spec(**{"inference.speculative": {"draft": DRAFT, "tokens": k, "acceptance": alpha}, **overrides})


def test_expected_tokens_per_verify_pass() -> None:
    """E = (1 − α^(K+1)) / (1 − α) = 1 + α + … + α^K: K = 4, α = 0.5: 1 + 0.5 + 0.25 + 0.125 + 0.0625 =
    1.9375; α = 1: K + 1; α = 0: 1 (only the target's own token)."""
    assert expected_tokens(4, 0.5) == 1.9375
    assert expected_tokens(4, 1.0) == 5.0
    assert expected_tokens(4, 0.0) == 1.0
    assert expected_tokens(2, 0.8) == pytest.approx(1 + 0.8 + 0.64)


def test_round_contexts_by_hand() -> None:
    """Prompt 8, output 9 (8 tokens after the first), E = 1.9375: ⌈8 / 1.9375⌉ = 5 rounds, from contexts
    9 + ⌊(j − 1)·E⌋ = 9 + 0, 1, 3, 5, 7; at α = 1, K = 4 (E = 5): 2 rounds, from 9 and 14."""
    assert round_contexts(8, 9, 4, 0.5) == (9, 10, 12, 14, 16)
    assert round_contexts(8, 9, 4, 1.0) == (9, 14)
    assert round_contexts(8, 9, 4, 0.0) == tuple(range(9, 17))  # α = 0: one token a round


def test_a_verify_pass_of_k_plus_1_vectors_on_one_pe_by_hand() -> None:
    """On one PE every kernel of b vectors is b times its one-vector cycles when each vector's values are
    a multiple of the 4 lanes (a GEMV K × N: b·K instructions of ⌈N/4⌉; an elementwise op over b·V values;
    a row of one PE reduces nothing): a layer at context T is b·(7,968 + 64·⌈T/4⌉ + 19T) (the one-vector
    layer of test_serving), the LM head b·64·⌈256/4⌉ = 4,096b. K = 4 (b = 5), the first round from context
    9 verifies up to T = 13: 5·(2·(7,968 + 256 + 247) + 4,096) = 5·21,038 = 105,190 cycles."""
    run = run_inference(_speculative())
    assert run.result.speculative["verify_cycles_per_round"] == 105_190 == 5 * (2 * (7968 + 64 * 4 + 19 * 13) + 4096)
    stage, = run.costs.stages
    assert stage.batches.iteration(1, 9, []) == 105_190  # the stage's iteration of one request's pass


def _gaps(run) -> list[float]:
    """The cycles between one request's outputs by hand (one stage, K = 4): after the prefill the first
    token to the draft (1 value between wafers: 2,000.5 cycles), its round of K steps from context 9, the
    drafts across (8 B: 2,002) and the verify pass; after each pass j the K + 1 verified tokens back (10 B:
    2,002.5), the round from the next pass's context c, the drafts across and the pass at c."""
    stage, draft = run.costs.stages[0].batches, run.costs.draft
    contexts = round_contexts(8, 9, 4, 0.5)
    return [(2000.5 if j == 0 else 2002.5) + draft.iteration(1, c, []) + 2002 + stage.iteration(1, c, [])
            for j, c in enumerate(contexts)]


def test_hand_offs_between_the_draft_and_the_target_by_hand() -> None:
    """Between wafers: bytes / 4 B a cycle + 2,000 cycles. After a round the K + 1 = 5 verified tokens go
    back to the draft (10 B: 2.5 + 2,000) and its K = 4 drafted ones to the target (8 B: 2 + 2,000): 4,004.5
    cycles a round besides the draft's steps. The draft station's round from context c is the draft's own
    one-request decode steps there, costed apart (``_draft_round``)."""
    spec = _speculative()
    assert wafer_handoff(spec, 10) == 2002.5 and wafer_handoff(spec, 8) == 2002.0
    run = run_inference(spec)
    assert run.result.speculative["handoff_cycles_per_round"] == 4004.5
    for c in (9, 10, 14):
        assert run.costs.draft.iteration(1, c, []) == _draft_round(spec, c)
    log = run.trace.batches
    assert np.diff(log.emitted).tolist() == _gaps(run)


def _draft_round(spec, context: int) -> float:
    """The draft's K = 4 steps from ``context``: its own one-request decode steps there, costed apart
    (its one stage hands the token back to its own grid: no hand-off between the steps)."""
    draft = spec.model_copy(update={"model": spec.inference.speculative.draft, "inference": spec.inference.model_copy(
        update={"speculative": None, "grid": "auto", "output_len": 16})})
    mapping = map_stages(draft)
    stage, = cost_serving(serving_program(draft, mapping), draft).stages
    assert stage.handoff_decode == 0.0
    return sum(stage.batches.iteration(1, context + i, ()) for i in range(4))


def test_the_timeline_by_hand_on_both_executors() -> None:
    """One request alone goes through the scheduler: the first token at the prefill's end (the plain
    run's), then the 5 passes of ``_gaps``; TPOT is their sum over the 8 tokens after the first. Both
    executors give it to the bit; the run without it is the one-request pipeline's, on the same mapping."""
    spec = _speculative()
    fast, ref = run_inference(spec.on("fast")), run_inference(spec.on("reference"))
    r = fast.result
    assert r.batching == "continuous"
    assert r.tpot_s == pytest.approx(sum(_gaps(fast)) / 8 / 1e9, rel=1e-12)
    plain = run_inference(_spec())
    assert r.ttft_s == plain.result.ttft_s
    assert r.speculative["tokens_per_s_per_request_without"] == plain.result.tokens_per_s_per_request
    a, b = fast.result.to_dict(), ref.result.to_dict()
    for d in (a, b):
        d.pop("wall_s"), d.pop("events")
        d["speculative"].pop("placement")
    assert a == b
    assert r.systems == 2 and r.speculative["systems"] == 1  # every wafer in use: the target's and the draft's
    assert r.tokens_per_s_per_system == r.tokens_per_s / 2


def test_batching_none_with_a_draft_or_prefill_wafers_is_refused_in_one_line() -> None:
    """Their wafers are stations of the scheduler: the one-token pipeline has none."""
    from wsesim.config.errors import ConfigError

    for layout in ({"inference.speculative": {"draft": DRAFT, "acceptance": 0.5}}, {"inference.disaggregation.prefill_systems": 1}):
        with pytest.raises(ConfigError) as e:
            _spec(**layout, **{"inference.scheduler.batching": "none"})
        assert "expected batching: auto or continuous with" in str(e.value) and "\n" not in str(e.value)


def test_speculative_is_deterministic_and_off_by_default() -> None:
    a, b = run_inference(_speculative(2, 0.7)).result.to_dict(), run_inference(_speculative(2, 0.7)).result.to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b
    off = run_inference(_spec()).result.to_dict()
    assert "speculative" not in off and "split_prefill" not in off


def test_without_an_interconnect_the_draft_is_infeasible_with_a_reason() -> None:
    bare = {**TINY, "inference": {k: v for k, v in TINY["inference"].items() if k != "interconnect"}}
    spec = load_inference_data(bare, overrides={**SET, "inference.speculative": {"draft": DRAFT, "acceptance": 0.5}}).spec
    r = run_inference(spec).result
    assert not r.feasible and "set inference.interconnect" in r.infeasible_reason


def test_split_prefill_kv_cache_and_its_hand_off_by_hand() -> None:
    """The KV cache of the prompt: (k + v) = 64 values a token a layer, 2 B each, 2 layers, 8 tokens:
    2,048 B, all through one prefill wafer's I/O and one decode wafer's: 2,048 / 4 + 2,000 = 2,512 cycles.
    The first token is out when the prefill wafer's prefill is (the same 1x1 grid: the same 136,380 cycles
    as without), and the first decode step starts 2,512 cycles later: the 8 tokens after the first take
    the plain run's Σ decode steps + 2,512 (one stage: no hand-off after its prefill)."""
    spec = _spec(**{"inference.disaggregation.prefill_systems": 1})
    fast, ref = run_inference(spec.on("fast")), run_inference(spec.on("reference"))
    plain = run_inference(_spec())
    sp = fast.result.split_prefill
    assert (sp["kv_bytes"], sp["kv_handoff_cycles"], sp["kv_handoff_s"]) == (2048.0, 2512.0, 2.512e-6)
    assert sp["prefill_cycles"] == 136_380 and fast.result.ttft_s == plain.result.ttft_s == 136_380 / 1e9
    stage, = plain.costs.stages  # the one-request pipeline's decode steps, the scheduler's to the bit
    assert stage.handoff_prefill == 0.0
    steps = sum(stage.batches.iteration(1, c, ()) for c in range(9, 17))  # contexts 9 … 16: 8 tokens
    assert fast.result.tpot_s == pytest.approx((steps + 2512) / 8 / 1e9, rel=1e-12)
    assert [s["prefill_cycles"] for s in fast.result.per_stage] == [0.0]
    a, b = fast.result.to_dict(), ref.result.to_dict()
    for d in (a, b):
        d.pop("wall_s"), d.pop("events")
    assert a == b


def test_split_prefill_that_does_not_fit_its_wafers_is_infeasible_with_a_reason() -> None:
    r = run_inference(_spec(**{"inference.disaggregation.prefill_systems": 1, "inference.grid": "auto",
                               "hardware.pe.sram": "64 KiB", "inference.load.prompt_len": 4096})).result
    assert not r.feasible and r.infeasible_reason.startswith("the prefill wafers: the weights do not fit 1 wafer")


def test_one_output_token_with_a_draft_is_refused_in_one_line() -> None:
    """output_len 1: the only output token is the prefill's, so no round is drafted (issue 40: an IndexError
    on the rounds' contexts); refused at inference.speculative. Two tokens: one round."""
    from wsesim.config.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        _speculative(**{"inference.load.output_len": 1})
    assert "inference.speculative: expected output_len of at least 2 with speculative" in str(e.value)
    assert "\n" not in str(e.value)
    assert run_inference(_speculative(**{"inference.load.output_len": 2})).result.speculative["rounds"] == 1


LOAD = {"inference.load.arrival": "poisson", "inference.load.rate": 2e5, "inference.load.requests": 12, "inference.scheduler.batch": 4}


def test_under_load_the_draft_is_a_station_and_both_executors_agree() -> None:
    """Twelve Poisson requests, up to four at once, with a draft: the scheduler's log bit for bit on both
    executors, the draft its last station, every decode token a verify pass of K + 1 = 5 positions."""
    spec = _speculative(**LOAD)
    fast, ref = (run_inference(spec.on(engine)) for engine in ("fast", "reference"))
    a, b = fast.trace.batches, ref.trace.batches
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        assert (x == y if isinstance(x, tuple | int) else np.array_equal(x, y, equal_nan=True)), name
    assert a.names == ("stage 0", "draft") and a.width == 5
    assert (a.stage == 1).any() and (a.decodes[a.stage == 0] > 1).any()  # the draft ran; passes batched
    r = fast.result
    assert r.batching == "continuous" and r.systems == 2  # the target's wafer and the draft's
    assert r.joules_per_token is not None and r.speculative["expected_tokens_per_verify"] == 1.9375


def test_one_request_through_the_scheduler_by_hand() -> None:
    """One request with K = 4, α = 0.5: output 9 is its first token and 5 verify passes (E = 1.9375:
    ⌊j·E⌋ = 1, 3, 5, 7, 8 tokens after j passes). The draft prefills the prompt from its admission, beside
    the target, and is done long before the target's 136,380-cycle prefill ends; the first pass waits
    only for the first token (``_gaps``). The stage's passes run at the contexts ``round_contexts`` gives."""
    run = run_inference(_speculative())
    log, costs = run.trace.batches, run.costs
    assert log.emitted.size == 6
    prefill = costs.draft.iteration(0, 0, [(8, 0, True)])
    draft_prefill = log.end[log.stage == 1][0]  # the draft's first iteration: the prompt, from cycle 0
    assert log.start[log.stage == 1][0] == 0.0 and draft_prefill == prefill < log.emitted[0] == 136_380
    assert run.result.speculative["draft_prefill_cycles"] == prefill
    assert run.result.speculative["draft_prefill_late_cycles"] == 0.0
    contexts = [c for c in log.longest[log.stage == 0].tolist() if c]
    assert tuple(contexts) == round_contexts(8, 9, 4, 0.5) == (9, 10, 12, 14, 16)
    assert run.result.tpot_s == pytest.approx((log.emitted[-1] - log.emitted[0]) / 8 / 1e9, rel=1e-12)


def test_split_prefill_under_load_is_a_pool_of_stations_both_executors_agree() -> None:
    """Twelve Poisson requests with the prompt prefilled on a wafer of its own: the prefill wafer is a
    station before the decode stage, both executors log the same, and the decode stage never takes a
    prompt (no prefill stall in its iterations)."""
    spec = _spec(**LOAD, **{"inference.disaggregation.prefill_systems": 1})
    fast, ref = (run_inference(spec.on(engine)) for engine in ("fast", "reference"))
    a, b = fast.trace.batches, ref.trace.batches
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        assert (x == y if isinstance(x, tuple | int) else np.array_equal(x, y, equal_nan=True)), name
    assert a.names == ("stage 0", "prefill 0")
    assert (a.prompt_tokens[a.stage == 0] == 0).all() and (a.decodes[a.stage == 1] == 0).all()
    assert fast.result.systems == 2 and fast.result.joules_per_token is not None


def test_the_trace_shows_drafts_verify_passes_and_hand_offs() -> None:
    """Under load the draft's iterations are spans on a thread of their own, the stages' decode iterations
    are verify passes, and every hand-off is a span from its iteration's end to its landing; with split
    prefill the prefill wafer's hand-off is the KV cache, as long as the log says it was in flight."""
    from wsesim.analysis.chrome_trace import chrome_trace

    run = run_inference(_speculative(**LOAD))
    events = chrome_trace(run.trace, clock_hz=1e9)["traceEvents"]
    threads = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"stage 0", "draft", "stage 0 hand-off", "draft hand-off"} <= threads
    cats = {e.get("cat") for e in events}
    assert {"draft", "verify", "handoff"} <= cats
    split = run_inference(_spec(**LOAD, **{"inference.disaggregation.prefill_systems": 1}))
    log = split.trace.batches
    kv = [e for e in chrome_trace(split.trace, clock_hz=1e9)["traceEvents"] if e.get("name", "").startswith("KV")]
    pool = (log.stage == 1) & (log.moved > 0)
    assert len(kv) == int(pool.sum()) > 0
    assert sorted(e["dur"] for e in kv) == pytest.approx(sorted((log.landed[pool] - log.end[pool]) / 1e3))


def test_a_draft_with_prefill_wafers_by_hand_and_under_load() -> None:
    """Both layouts: the prompt is prefilled on the prefill wafer (the first token at 136,380 cycles, as
    without) and on the draft's, from admission. The first token then goes to the draft (2,000.5 cycles)
    while the KV cache goes to the decode wafer (2,512); the first verify pass starts when both its drafts
    (2,000.5 + the round from context 9 + 2,002) and the cache have landed — here the drafts, later. Three
    wafers counted. Under load both executors log the same to the bit."""
    both = {"inference.disaggregation.prefill_systems": 1}
    run = run_inference(_speculative(**both))
    log, costs = run.trace.batches, run.costs
    assert log.names == ("stage 0", "prefill 0", "draft")
    first = log.emitted[0]
    assert first == 136_380
    drafts = first + 2000.5 + costs.draft.iteration(1, 9, []) + 2002
    kv = first + 2512
    verify = log.start[(log.stage == 0)][0]
    assert verify == max(drafts, kv) == drafts
    assert log.emitted[1] == verify + 105_190
    r = run.result
    assert r.systems == 3 and r.speculative and r.split_prefill and r.joules_per_token > 0
    fast, ref = (run_inference(_speculative(**both, **LOAD).on(engine)) for engine in ("fast", "reference"))
    a, b = fast.trace.batches, ref.trace.batches
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        assert (x == y if isinstance(x, tuple | int) else np.array_equal(x, y, equal_nan=True)), name
    assert fast.result.joules_per_token == ref.result.joules_per_token


def test_with_a_slow_io_the_drafts_wait_for_the_kv_cache() -> None:
    """At 0.04 GB/s (0.04 B a cycle) the 2,048 B cache takes 51,200 + 2,000 cycles and the drafts 1/100 of
    their bytes' time more than at 4 GB/s: the first verify pass starts when the cache lands."""
    both = {"inference.disaggregation.prefill_systems": 1, "hardware.io.bandwidth": "0.04 GB/s"}
    run = run_inference(_speculative(**both))
    log = run.trace.batches
    first = log.emitted[0]
    kv = first + 2048 / 0.04 + 2000
    drafts = first + (2 / 0.04 + 2000) + run.costs.draft.iteration(1, 9, []) + (8 / 0.04 + 2000)
    assert kv > drafts
    assert log.start[log.stage == 0][0] == kv
    fast, ref = (run_inference(_speculative(**both, **LOAD).on(engine)) for engine in ("fast", "reference"))
    assert np.array_equal(fast.trace.batches.emitted, ref.trace.batches.emitted, equal_nan=True)
