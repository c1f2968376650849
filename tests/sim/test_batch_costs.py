"""One scheduler's iterations (docs/model.md §11.7): what an iteration takes from the queues
(``batching.take_pieces``) and what it costs when several prompts share its pass (``BatchCosts.mixed``),
the default token budget, its events for the energy, and the steady-state figures a run reports."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.analysis.requests import percentile, request_times
from wsesim.config.errors import ConfigError
from wsesim.config.inference import load_inference, load_inference_data
from wsesim.experiments.runner import run_inference
from wsesim.sim.cost.costing import cost_serving
from wsesim.sim.executors.scheduler import take_pieces
from wsesim.sim.programs.builders.serving import default_token_budget, serving_program
from wsesim.sim.programs.mapping import map_stages

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 8, "output_len": 3}, "grid": "2x2"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
         "hardware.pe.sram": "1 MiB"}
POISSON = {"inference.load.arrival": "poisson", "inference.load.requests": 40, "inference.scheduler.batch": 4}


def _spec(**overrides: object):
    return load_inference_data(TINY, overrides={**DENSE, **overrides}).spec


def test_prefill_first_packs_whole_prompts_within_the_budget() -> None:
    """Budget 10: prompts of 4 and 5 fit (9), the third (3) would make 12 and waits; a first prompt
    longer than the budget is taken whole (prefill first never cuts)."""
    queue = [[0, 0, 4], [1, 0, 5], [2, 0, 3]]
    assert take_pieces(queue, 10, whole=True) == [(0, 0, 4), (1, 0, 5)]
    assert queue == [[2, 0, 3]]
    long = [[7, 0, 25], [8, 0, 1]]
    assert take_pieces(long, 10, whole=True) == [(7, 0, 25)] and long == [[8, 0, 1]]


def test_chunked_cuts_the_last_prompt_where_the_room_ends() -> None:
    """Room 6 (a budget of 10 less 4 decodes): 4 tokens of the first, 2 of the second, whose other 3
    wait; no room, nothing taken."""
    queue = [[0, 0, 4], [1, 0, 5]]
    assert take_pieces(queue, 6, whole=False) == [(0, 0, 4), (1, 0, 2)]
    assert queue == [[1, 2, 3]]
    assert take_pieces(queue, 0, whole=False) == [] and queue == [[1, 2, 3]]


def test_default_budget_fills_the_rows_lanes_for_an_issue() -> None:
    """WSE-3, fp16: 8 lanes, 7 cycles of issue; a 755-row grid: 755 · 8 · 7 = 42,280 tokens. tiny8 issues
    for free (0 cycles, counted as 1) on 4 lanes: a 2-row grid takes 2 · 4 · 1 = 8."""
    wse3 = load_inference(hardware="wse3", model="llama3-8b").spec
    assert default_token_budget(wse3, 755) == 42_280
    assert default_token_budget(_spec(), 2) == 8


def _costs(spec):
    program = serving_program(spec, map_stages(spec))
    return program, cost_serving(program, spec)


def test_packed_prompts_share_one_pass_of_the_kernels() -> None:
    """Two 8-token prompts in one iteration cost the kernels of one 16-token pass — every kernel at
    M = 16 rows, attention's as 16 queries against 8 keys (each prompt's own, at most the longest's) —
    and the LM head once, a GEMV of two vectors; less than the two prompts one after the other, more
    than one alone."""
    spec = _spec(**{"inference.layers_per_stage": 2})
    program, costs = _costs(spec)
    work, = program.body[0].stages
    b = costs.stages[0].batches
    grid = b.grid
    by_hand = sum(grid.on(op.region).cost(op, op.dims, 1).cycles for op in work.prefill_of(16, 8))
    by_hand += sum(grid.cost(op, op.dims, 2).cycles for op in work.lm_head)
    packed = b.iteration(0, 0, [(8, 0, True), (8, 0, True)])
    assert packed == pytest.approx(by_hand, rel=1e-12)
    one = b.iteration(0, 0, [(8, 0, True)])
    assert one < packed < 2 * one


def test_decodes_ride_in_the_prompts_pass() -> None:
    """Three decode tokens beside a prompt: one more row each of every kernel but attention's, their
    attention a decode batch's, and the LM head a GEMV of four vectors (three decodes, one prompt ending)."""
    spec = _spec(**{"inference.layers_per_stage": 2})
    program, costs = _costs(spec)
    work, = program.body[0].stages
    b = costs.stages[0].batches
    grid = b.grid
    by_hand = sum(grid.cost(op, op.dims, 1).cycles for op in work.prefill_of(11, 8) if not op.attention)
    by_hand += sum(grid.cost(op, op.dims, 1).cycles for op in work.prefill_of(8, 8) if op.attention)
    by_hand += b.batch_attention(3, 9) + sum(grid.cost(op, op.dims, 4).cycles for op in work.lm_head)
    assert b.iteration(3, 9, [(8, 0, True)]) == pytest.approx(by_hand, rel=1e-12)


def test_together_batches_by_default_and_beats_one_at_a_time() -> None:
    """LLaMA3-8B on one CS-3 stage: eight requests arriving together are one continuous batch under
    ``batching: auto`` — their prompts one pass, their decodes every iteration together — at least 3x
    the tokens/s of batch 1 (a decode step is mostly issue and hops, which eight vectors share)."""
    def run(batch: int):
        return run_inference(load_inference(hardware="wse3", model="llama3-8b", overrides={
            "inference.scheduler.batch": batch, "inference.grid": "755x1170"}).spec).result
    batched, alone = run(8), run(1)
    assert batched.batching == alone.batching == "continuous"
    assert batched.mean_batch == 8.0 and batched.largest_batch == 8
    assert batched.tokens_per_s >= 3 * alone.tokens_per_s


def test_one_request_is_the_same_batched_or_not_and_spends_no_phantom_trip() -> None:
    """One request alone has one piece of work at a time, so ``batching: none`` (one token an iteration)
    and ``continuous`` (every token queued) run the same iterations: the same TTFT, TPOT and events. Its
    events count each hand-off that was made: the last token, the request's last, never goes home (the
    one-token pipeline this scheduler replaced counted that trip: one value's hops from the last stage to
    the first)."""
    two = {"inference.layers_per_stage": 1}
    plain = run_inference(_spec(**two, **{"inference.scheduler.batching": "none"}))
    batched = run_inference(_spec(**two)).result
    assert (batched.ttft_s, batched.tpot_s) == (plain.result.ttft_s, plain.result.tpot_s)
    assert batched.energy_events == plain.result.energy_events
    log = plain.trace.batches
    assert log is not None and int(log.moved[-1]) == 0 and np.isnan(log.landed[-1])  # the last: no trip


def test_energy_is_counted_under_load_on_both_executors() -> None:
    spec = _spec(**POISSON, **{"inference.load.rate": 2e5})
    fast, ref = (run_inference(spec.on(engine)).result for engine in ("fast", "reference"))
    assert fast.joules_per_token is not None and fast.joules_per_token > 0
    assert fast.energy_events == ref.energy_events and fast.joules_per_token == ref.joules_per_token


def test_warmup_leaves_the_first_requests_out_of_the_figures() -> None:
    """TTFT p99 is the percentile over requests 10 … 39 alone; the run still counts all 40."""
    spec = _spec(**POISSON, **{"inference.load.rate": 2e5, "inference.load.warmup": 10})
    run = run_inference(spec)
    ttft = request_times(spec, run.program, run.trace).ttft
    assert run.result.ttft_p99_s == percentile(ttft[10:], 99) != percentile(ttft, 99)
    assert (run.result.requests, run.result.warmup) == (40, 10)


@pytest.mark.parametrize("overrides,message", [
    ({"inference.load.warmup": 40}, "expected a warmup below the run's 40 requests"),
    ({"inference.load.warmup": 2, "inference.load.arrival": "together"}, "expected a warmup below the run's 1 requests"),
])
def test_bad_warmups_are_one_line(overrides: dict, message: str) -> None:
    base = {} if overrides.get("inference.load.arrival") == "together" else {**POISSON, "inference.load.rate": 1.0}
    with pytest.raises(ConfigError) as e:
        _spec(**{**base, **{k: v for k, v in overrides.items() if v is not None}})
    assert message in str(e.value) and "\n" not in str(e.value)


def test_an_offered_load_beyond_capacity_is_said() -> None:
    """At 10^7 requests/s the tiny stage falls behind (busy far longer than the arrivals' span): one
    warning names the capacity; at 100/s it keeps up and says nothing."""
    over = run_inference(_spec(**POISSON, **{"inference.load.rate": 1e6})).result
    light = run_inference(_spec(**POISSON, **{"inference.load.rate": 100})).result
    said = [w for w in over.warnings if "exceeds the measured capacity" in w]
    assert len(said) == 1 and f"({over.capacity_requests_per_s:,.3g} requests/s" in said[0]
    assert not [w for w in light.warnings if "capacity" in w]
    assert over.capacity_requests_per_s > 0 and np.isfinite(over.capacity_requests_per_s)


@pytest.mark.parametrize("model", ["llama3-8b", "deepseek-v3"])
def test_prefill_runs_are_prefill_of_and_cost_the_same_to_the_bit(model: str) -> None:
    """``prefill_runs`` (one layer's kernels, the layers in a row like it) are ``prefill_of``'s kernels
    layer by layer (dense and MoE layers alike), and a piece's cycles and events summed over them are
    exactly the sums kernel by kernel over ``prefill_of`` (the same numbers added in the same order)."""
    spec = load_inference(model=model, hardware="wse3", overrides={
        "inference.load.prompt_len": 64, "inference.load.output_len": 4, "inference.grid": "755x1170"}).spec
    program, costs = _costs(spec)
    for work, stage in zip(program.body[0].stages, costs.stages, strict=True):
        b = stage.batches
        for tokens, context in ((5, 5), (37, 300), (1000, 1000)):
            ops = work.prefill_of(tokens, context)
            flat = [(k.kind, k.name, k.dims, k.region, k.attention) for like, n in
                    work.prefill_runs(tokens, context) for _ in range(n) for k in like]
            assert flat == [(k.kind, k.name, k.dims, k.region, k.attention) for k in ops]
            cycles = [b._kernel(op, op.dims, 1) for op in ops]
            assert b.prefill(tokens, context - tokens, False) == sum(cycles)
            items = [(op, op.dims, 1, 1) for op in ops]
            fmacs = hops = 0.0
            for op, dims, batch, times in items:
                c = b._cost(op, dims, batch)
                fmacs += times * c.fmacs
                hops += times * c.wavelet_hops
            got = b.counts(0, 0, 1, tokens, context, 0)
            assert (got.fmacs_fp16 + got.fmacs_fp32, got.wavelet_hops) == (fmacs, hops)
