"""The paged KV cache (``inference.scheduler.kv_block``, docs/model.md §11.7): a pool of blocks whose size comes from the
SRAM bound admission reads, admission by free blocks, preemption of the latest-arrived decode when the pool
runs out, recompute against swap, both executors bit for bit, and the keys refused in one line.

The hand-derived case (``_run``): the tiny dense model on one 1 × 1 stage, two requests arriving together,
prompt 4 and output 6 each, blocks of 4 tokens, a pool of 4 blocks set on the op by hand. Admission takes
⌈4/4⌉ = 1 block each (2 free); iteration 1 prefills both prompts and gives their first tokens; the decodes
at contexts 5, 6, 7, 8 (iterations 2-5) hold ⌈5/4⌉ = 2 blocks each from iteration 2 on (0 free); at
context 9 (iteration 6, the last output) each needs a third block and none is free: request 0, the earlier,
keeps its claim and request 1, the latest, is preempted, its 8 tokens of cache (prompt 4 + outputs 1-4)
given up. Request 0's last token frees its 3 blocks; request 1 is readmitted with ⌈9/4⌉ = 3 and
(recompute) prefills its 9 tokens in iteration 7, whose end is its sixth output; or (swap) its 8 tokens
went out to MemoryX before iteration 6 started and come back in after request 0 leaves, then decode at
context 9 in iteration 7. A token's cache is 2 layers × 2 · kv_heads 2 · head_dim 16 · 2 B = 256 B, so 8
tokens are 2,048 B: 512 cycles each way at tiny8's 4 B a cycle of I/O.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.inference import load_inference_data
from wsesim.config.tables import entry
from wsesim.experiments.auto_grid import map_for
from wsesim.experiments.runner import run_inference
from wsesim.model.load import requests_of
from wsesim.model.serving import kv_pool_tokens, requests_fit
from wsesim.sim.cost.costing import cost_serving
from wsesim.sim.executors.engines import ENGINES
from wsesim.sim.programs.builders.serving import serving_program

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 4, "output_len": 6}, "grid": "1x1"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
         "hardware.pe.sram": "1 MiB"}
TWO = {"inference.scheduler.batch": 2, "inference.scheduler.batching": "continuous", "inference.scheduler.kv_block": 4, "inference.scheduler.token_budget": 16}
SWAP_CYCLES = 8 * 256 / 4  # 8 tokens of 256 B at 4 B a cycle


def _spec(overrides: dict):
    return load_inference_data(TINY, overrides={**DENSE, **overrides}).spec


def _run(preemption: str, engine: str = "fast", blocks: int = 4):
    """The module docstring's case; returns (its batch log, its op)."""
    spec = _spec({**TWO, "inference.scheduler.preemption": preemption})
    program = serving_program(spec, map_for(spec), requests_of(spec))
    op = replace(program.body[0], kv_block=(4, blocks, preemption))
    program = replace(program, body=(op,))
    costs = cost_serving(program, spec)
    assert len(op.stages) == 1
    return entry(ENGINES, engine, "engine")(None, program, costs).batches, op, costs


def test_the_pool_is_the_room_admission_reserves() -> None:
    """The pool is the most tokens ``requests_fit`` holds at the cap and the longest prompt: one more does
    not fit. The tiny dense model's two layers on one PE: a token is 256 B; the weights, the activations
    of two requests and the pool's tokens fill the usable SRAM to within one token."""
    spec = _spec(TWO)
    stage = map_for(spec).stages[0]
    m, mem = spec.model, stage.memory
    tokens = kv_pool_tokens(m, mem, 2, 1, 1, 2, 4)
    assert requests_fit(m, mem, 2, 1, 1, "shift", 2, tokens, 0, 4)
    assert not requests_fit(m, mem, 2, 1, 1, "shift", 2, tokens + 1, 0, 4)
    activations = max(2 * 64 * 2 * 2, 4 * 64 * 2 * 4)  # two hidden vectors a request, or four of the prompt's
    assert tokens == int((mem.usable - mem.weights - activations) // 256)
    op = run_inference(spec).program.body[0]
    assert op.kv_block == (4, tokens // 4, "recompute")


def test_preemption_by_hand_recompute() -> None:
    """Seven iterations: both prompts; four batches of two decodes; request 0's last decode alone (request 1
    preempted at its start, 8 tokens dropped); request 1's 9 tokens prefilled again, its last output."""
    log, _, costs = _run("recompute")
    assert log.decodes.tolist() == [0, 2, 2, 2, 2, 1, 0]
    assert log.prompt_tokens.tolist() == [8, 0, 0, 0, 0, 0, 9]
    assert log.preemptions == 1
    assert log.kv_events.tolist() == [[0, 1, log.start[5], log.start[5], 8]]
    assert log.start[5] == log.end[4]  # no wait: a dropped cache frees its blocks at once
    assert log.end[6] - log.start[6] == costs.stages[0].batches.prefill(9, 0, True)
    assert log.finished[1] == log.end[6] and log.finished[0] == log.end[5]
    assert log.admitted[1] == 0  # its first admission is kept


def test_swap_costs_the_io_time_by_hand() -> None:
    """The same case swapped: iteration 6 starts 512 cycles later (the swap out leaving), the swap in takes
    512 more after request 0 leaves, and request 1's last output is a decode at context 9, not a prefill:
    so swap's finish less recompute's is 512 + 512 + decode(1, 9) − prefill(9), by hand."""
    rec, _, costs = _run("recompute")
    swp, _, _ = _run("swap")
    batches = costs.stages[0].batches
    assert swp.decodes.tolist() == [0, 2, 2, 2, 2, 1, 1] and swp.prompt_tokens.tolist() == [8, 0, 0, 0, 0, 0, 0]
    out_at, back_at = swp.end[4], swp.end[5]
    assert swp.kv_events.tolist() == [[1, 1, out_at, out_at + SWAP_CYCLES, 8],
                                      [2, 1, back_at, back_at + SWAP_CYCLES, 8]]
    assert swp.start[5] - rec.start[5] == SWAP_CYCLES
    assert swp.start[6] - swp.end[5] == SWAP_CYCLES
    by_hand = 2 * SWAP_CYCLES + batches.iteration(1, 9, ()) - batches.prefill(9, 0, True)
    assert swp.finished[1] - rec.finished[1] == pytest.approx(by_hand, abs=1e-6)
    assert swp.preemptions == 1


def test_a_pool_with_room_preempts_nothing_and_equals_the_whole_reservation() -> None:
    """Six blocks hold both requests' last contexts (2 × ⌈9/4⌉): no preemption, and every time the same as
    the cache reserved whole (no kv_block), which admits both too."""
    paged, _, _ = _run("recompute", blocks=6)
    spec = _spec({"inference.scheduler.batch": 2, "inference.scheduler.batching": "continuous", "inference.scheduler.token_budget": 16})
    whole = run_inference(spec).trace.batches
    assert paged.preemptions == 0 and len(paged.kv_events) == 0
    for name in ("admitted", "first", "finished", "start", "end", "emitted"):
        assert np.array_equal(getattr(paged, name), getattr(whole, name)), name


def test_a_request_longer_than_the_pool_is_refused() -> None:
    """Request 0's last decode holds 4 + 6 − 1 = 9 tokens: ⌈9/4⌉ = 3 blocks; a pool of 2 refuses both."""
    log, _, _ = _run("recompute", blocks=2)
    assert log.refused.tolist() == [True, True]


def test_a_block_larger_than_the_pool_refuses_every_request_and_says_so() -> None:
    r = run_inference(_spec({**TWO, "inference.scheduler.kv_block": 16_000_000})).result
    assert not r.feasible and r.refused == 2
    assert r.infeasible_reason.endswith("on the pool of 0 blocks of 16,000,000 tokens)")


LOADS = {
    "one stage, prefill first": {},
    "one stage, chunked": {"inference.scheduler.prefill": "chunked", "inference.scheduler.token_budget": 5},
    "two stages, chunked": {"inference.grid": "2x2", "inference.layers_per_stage": 1, "hardware.pe.sram": "48 KiB",
                            "inference.scheduler.prefill": "chunked", "inference.scheduler.token_budget": 6},
}


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
@pytest.mark.parametrize("load_", LOADS)
def test_both_executors_agree_exactly_with_preemptions(load_: str, preemption: str) -> None:
    """A Poisson load of lognormal lengths on a pool that runs out: every field of the log bit for bit, and
    some requests preempted."""
    spec = _spec({"inference.load.arrival": "poisson", "inference.load.rate": 5e5, "inference.load.requests": 30,
                  "inference.scheduler.batch": 8, "inference.load.lengths": "lognormal", "inference.load.prompt_len": 8,
                  "inference.load.output_len": 12, "inference.scheduler.kv_block": 4, "inference.scheduler.preemption": preemption,
                  "hardware.pe.sram": "200 KiB", **LOADS[load_]})
    fast, ref = (run_inference(spec.on(engine)).trace.batches for engine in ("fast", "reference"))
    for name in fast.__dataclass_fields__:
        x, y = getattr(fast, name), getattr(ref, name)
        assert (x == y if isinstance(x, tuple | int) else np.array_equal(x, y, equal_nan=True)), name
    assert fast.preemptions > 0
    assert (fast.kv_events[:, 0] == (1 if preemption == "swap" else 0)).any()


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_sampled_moe_routing_with_preemptions_agrees_and_has_its_energy(preemption: str) -> None:
    """The MoE model's zipf-routed decodes on a 2 × 4 grid whose pool runs out: both executors bit for
    bit, with its joules; a swap's bytes cross the I/O, so swapping costs I/O energy recompute does not."""
    spec = load_inference_data({**TINY, "inference": {"load": {"prompt_len": 8, "output_len": 12}, "grid": "2x4"}},
                               overrides={"inference.load.arrival": "poisson", "inference.load.rate": 5e5,
                                          "inference.load.requests": 30, "inference.scheduler.batch": 8,
                                          "inference.load.lengths": "lognormal", "inference.moe.routing": "zipf:1.2",
                                          "inference.scheduler.kv_block": 4, "inference.scheduler.preemption": preemption,
                                          "hardware.pe.sram": "24 KiB"}).spec
    fast, ref = (run_inference(spec.on(engine)) for engine in ("fast", "reference"))
    assert fast.result.to_dict() | {"wall_s": 0, "events": 0} == ref.result.to_dict() | {"wall_s": 0, "events": 0}
    assert fast.result.preemptions > 0 and fast.result.joules_per_token > 0
    assert (fast.result.energy_events["io_bytes"] > 0) == (preemption == "swap")


def test_the_result_reports_the_preemptions() -> None:
    r = run_inference(_spec({"inference.load.arrival": "poisson", "inference.load.rate": 5e5, "inference.load.requests": 30,
                             "inference.scheduler.batch": 8, "inference.load.lengths": "lognormal", "inference.load.prompt_len": 8,
                             "inference.load.output_len": 12, "inference.scheduler.kv_block": 4, "inference.scheduler.preemption": "swap",
                             "hardware.pe.sram": "200 KiB"})).result
    assert (r.kv_block, r.preemption) == (4, "swap") and r.kv_blocks > 0 and r.preemptions > 0 and r.swap_s > 0
    plain = run_inference(_spec({"inference.load.arrival": "poisson", "inference.load.rate": 5e5, "inference.load.requests": 3,
                                 "inference.scheduler.batch": 8})).result
    assert (plain.kv_block, plain.kv_blocks, plain.preemption, plain.preemptions, plain.swap_s) == (0, 0, "", 0, 0)


@pytest.mark.parametrize(("overrides", "message"), [
    ({**TWO, "inference.scheduler.kv_block": 0}, "inference.scheduler.kv_block: expected a value > 0, got 0"),
    ({**TWO, "inference.scheduler.kv_block": "16 tokens"}, 'inference.scheduler.kv_block: expected an integer, got "16 tokens"'),
    ({**TWO, "inference.scheduler.kv_block": 2.5}, "inference.scheduler.kv_block: expected an integer, got 2.5"),
    ({"inference.scheduler.kv_block": 16, "inference.scheduler.batching": "none"},
     "inference.scheduler.kv_block: expected batching: auto or continuous with kv_block"),
    ({**TWO, "inference.kv_layout": "concat"}, "inference.scheduler.kv_block: expected kv_layout: shift with kv_block"),
    ({"inference.scheduler.preemption": "swap"}, "inference.scheduler.preemption: expected no preemption without kv_block"),
    ({**TWO, "inference.scheduler.preemption": "drop"}, "inference.scheduler.preemption: expected 'recompute' or 'swap'"),
])
def test_bad_kv_block_keys_are_one_line(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        _spec(overrides)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_trace_shows_the_preemption_and_the_swaps() -> None:
    """The hand-derived swap case in the Chrome trace: one thread for the cache, a span out and a span in,
    each 512 cycles (0.512 us at tiny8's 1 GHz), named by the request."""
    from wsesim.analysis.chrome_trace import chrome_trace
    from wsesim.sim.programs.plan import Trace

    log, _, _ = _run("swap")
    events = chrome_trace(Trace(batches=log), clock_hz=1e9)["traceEvents"]
    kv = [e for e in events if e.get("cat") == "kv"]
    assert [(e["name"], e["dur"]) for e in kv] == [("swap out r1", pytest.approx(0.512)),
                                                  ("swap in r1", pytest.approx(0.512))]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e.get("tid") == kv[0]["tid"]}
    assert names == {"KV cache: preemptions, MemoryX I/O"}


DRAFT = {"kind": "model", "name": "tiny-draft", "hidden_size": 64, "layers": 1, "heads": 4, "kv_heads": 2,
         "head_dim": 16, "ffn_intermediate": 96, "vocab_size": 256, "dtype": "fp16"}
LAYOUTS = {"draft": {"inference.speculative": {"draft": DRAFT, "tokens": 3, "acceptance": 0.7}},
           "split prefill": {"inference.disaggregation.prefill_systems": 1},
           "both": {"inference.speculative": {"draft": DRAFT, "tokens": 3, "acceptance": 0.7},
                    "inference.disaggregation.prefill_systems": 1}}


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_paged_target_cache_composes_with_a_draft_and_prefill_wafers(layout: str, preemption: str) -> None:
    """A draft's and the prefill wafers' stations beside a paged target cache that runs out: the target's
    decode stage gives each verify pass the blocks of its K + 1 positions, a preempted request recomputes
    through the prefill wafers (or swaps to MemoryX and back to the first decode stage) and the draft keeps
    its own cache whole (it prefills each prompt once). Every request is served, some preempted, both
    executors bit for bit; with room for every request the paged run is the whole reservation's."""
    base = {"inference.load.arrival": "poisson", "inference.load.rate": 5e5, "inference.load.requests": 24, "inference.scheduler.batch": 8,
            "inference.load.lengths": "lognormal", "inference.load.prompt_len": 8, "inference.load.output_len": 12,
            "inference.grid": "2x4", "inference.interconnect": "swarmx", **LAYOUTS[layout]}
    spec = _spec({**base, "inference.scheduler.kv_block": 4, "inference.scheduler.preemption": preemption,
                  "hardware.pe.sram": "24 KiB"})
    fast, ref = (run_inference(spec.on(engine)) for engine in ("fast", "reference"))
    for name in fast.trace.batches.__dataclass_fields__:
        x, y = getattr(fast.trace.batches, name), getattr(ref.trace.batches, name)
        assert (x == y if isinstance(x, tuple | int) else np.array_equal(x, y, equal_nan=True)), name
    r = fast.result
    assert r.feasible and r.refused == 0 and r.preemptions > 0, r.infeasible_reason
    assert np.isfinite(fast.trace.batches.finished).all()
    roomy = _spec({**base, "inference.scheduler.kv_block": 4})
    whole = _spec(base)
    a, b = run_inference(roomy).trace.batches, run_inference(whole).trace.batches
    assert a.preemptions == 0 and np.array_equal(a.emitted, b.emitted)
