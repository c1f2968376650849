"""Continuous batching (docs/model.md §11.7): the two executors against each other on small cases, a
light load against the one-request pipeline, batched decode against batch 1, a queue against M/D/1,
and the load's keys refused as the project refuses bad input."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.analysis.requests import request_times
from wsesim.config.errors import ConfigError
from wsesim.config.inference import load_inference, load_inference_data
from wsesim.experiments.runner import run_inference
from wsesim.kernels.cost import kernel_cost

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 8, "output_len": 3}, "grid": "1x1"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
         "hardware.pe.sram": "1 MiB"}
POISSON = {"inference.load.arrival": "poisson", "inference.load.rate": 2e5, "inference.load.requests": 30}


def _spec(overrides: dict | None = None, dense: bool = True):
    return load_inference_data(TINY, overrides={**(DENSE if dense else {}), **(overrides or {})}).spec


CASES = {
    "one stage, prefill first": {**POISSON, "inference.scheduler.batch": 4},
    "one stage, prefill first, prompts packed": {**POISSON, "inference.load.rate": 5e5, "inference.scheduler.batch": 6,
                                                 "inference.load.lengths": "lognormal", "inference.scheduler.token_budget": 20},
    "one stage, chunked, lognormal": {**POISSON, "inference.load.rate": 5e5, "inference.scheduler.batch": 8,
                                      "inference.load.lengths": "lognormal", "inference.scheduler.prefill": "chunked",
                                      "inference.scheduler.token_budget": 5},
    "one stage, long outputs run ahead": {**POISSON, "inference.load.rate": 5e4, "inference.scheduler.batch": 4,
                                          "inference.load.output_len": 40, "inference.load.lengths": "lognormal"},
    "two stages, together": {"inference.grid": "2x2", "inference.layers_per_stage": 1,
                             "inference.scheduler.batching": "continuous", "inference.load.requests": 10, "inference.scheduler.batch": 3},
    "two stages, chunked, lognormal": {**POISSON, "inference.grid": "2x2", "inference.layers_per_stage": 1,
                                       "inference.scheduler.batch": 6, "inference.load.lengths": "lognormal",
                                       "inference.scheduler.prefill": "chunked", "inference.scheduler.token_budget": 4},
    "MoE, two stages, chunked": {**POISSON, "inference.scheduler.batch": 4, "hardware.pe.sram": "1 MiB", "inference.grid": "2x2",
                                 "inference.layers_per_stage": 1, "inference.scheduler.prefill": "chunked",
                                 "inference.scheduler.token_budget": 3},
    "SRAM-bound, some refused": {**POISSON, "inference.load.rate": 5e5, "inference.scheduler.batch": 8,
                                 "inference.load.lengths": {"lognormal": 2.0},
                                 "hardware.pe.sram": "160 KiB", "inference.load.output_len": 8},
}


@pytest.mark.parametrize("case", CASES)
def test_both_executors_agree_exactly(case: str) -> None:
    """Every admission, first token, finish and iteration (stage, start, end, tokens) bit for bit."""
    spec = _spec(CASES[case], dense=not case.startswith("MoE"))
    fast, ref = (run_inference(spec.on(engine)).trace.batches for engine in ("fast", "reference"))
    for name in fast.__dataclass_fields__:
        x, y = getattr(fast, name), getattr(ref, name)
        assert (x == y if isinstance(x, tuple | int) else np.array_equal(x, y, equal_nan=True)), name
    assert (fast.decodes > 1).any()  # some iterations batched several decode tokens


def test_one_station_runs_its_decode_iterations_ahead(monkeypatch) -> None:
    """On one station alone the fast executor runs a decode batch's next iterations ahead while nothing
    else can happen (``Scheduler.run_ahead``); the reference executor never does, and the test above
    holds the two logs equal. Here: that the case above does run iterations ahead (else it proves nothing)."""
    from wsesim.sim.executors.scheduler import Scheduler

    ahead = []
    run_ahead = Scheduler.run_ahead

    def counted(self, it, until):
        last = run_ahead(self, it, until)
        ahead.append(last.index - it.index)
        return last

    monkeypatch.setattr(Scheduler, "run_ahead", counted)
    log = run_inference(_spec(CASES["one stage, long outputs run ahead"]).on("fast")).trace.batches
    assert sum(ahead) > len(log.stage) // 2  # most iterations were run ahead
    assert max(ahead) > 1 and (log.decodes > 1).any()


def test_refusals_and_sram_bound_are_seen() -> None:
    """The mapping sized for 8 requests of 8 + 8 tokens; lognormal lengths (σ = 2) make some requests too
    long for the stage alone (refused, and counted) and hold the in-flight batch below its cap of 8."""
    r = run_inference(_spec(CASES["SRAM-bound, some refused"])).result
    assert (r.refused, r.requests, r.largest_batch) == (11, 30, 6)


def test_light_load_reproduces_one_request_exactly() -> None:
    """Poisson arrivals far apart (rate → 0): each request alone in the pipeline, so its TTFT and TPOT are
    the one-request run's to the bit (arrivals are whole cycles, and the costs at batch one are the
    same sums), on LLaMA3-8B on one CS-3 stage and on the tiny model's two stages."""
    for base, over in ((None, {"inference.load.prompt_len": 512, "inference.load.output_len": 16}),
                       (TINY, {**DENSE, "inference.grid": "2x2", "inference.layers_per_stage": 1})):
        def spec(extra: dict, base=base, over=over):
            if base is None:
                return load_inference(model="llama3-8b", hardware="wse3", overrides={**over, **extra}).spec
            return load_inference_data(base, overrides={**over, **extra}).spec
        one = run_inference(spec({})).result
        light = run_inference(spec({"inference.load.arrival": "poisson", "inference.load.rate": 1e-3,
                                    "inference.load.requests": 3})).result
        assert (light.ttft_p50_s, light.ttft_p99_s) == (one.ttft_s,) * 2  # every request's, to the bit
        assert (light.tpot_p50_s, light.tpot_p99_s) == (one.tpot_s,) * 2
        assert light.ttft_s == pytest.approx(one.ttft_s, rel=1e-15)  # a mean of three: rounding only
        assert light.tpot_s == pytest.approx(one.tpot_s, rel=1e-15)
        assert light.mean_batch == 1.0 and light.largest_batch == 1


def test_batch_8_decodes_several_times_faster_than_batch_1() -> None:
    """LLaMA3-8B on one 755 × 1,170 CS-3 stage, 8 requests at once: each decode iteration runs the 8
    tokens as GEMVs of 8 vectors (the same hops, 8× the FMACs and wavelets), so the decode tokens/s is
    8 / TPOT(8) against 1 / TPOT(1): 9,020 against 1,383 tokens/s, 6.5× (WSE-3's SRAM ports feeding its 8
    lanes)."""
    def run(batch: int):
        return run_inference(load_inference(model="llama3-8b", hardware="wse3", overrides={
            "inference.load.prompt_len": 1024, "inference.scheduler.batching": "continuous", "inference.scheduler.batch": batch,
            "inference.grid": "755x1170"}).spec).result
    one, eight = run(1), run(8)
    assert eight.mean_batch == 8.0
    ratio = (8 / eight.tpot_s) / (1 / one.tpot_s)
    assert 4 < ratio < 8
    assert ratio == pytest.approx(6.52, abs=0.05)


def test_skinny_gemv_by_hand() -> None:
    """On one tiny8 PE (4 fp16 lanes, no issue cost, nothing to reduce) a GEMV M × K × N is M·K vector
    instructions of N: ⌈N/4⌉ cycles each, so 8 × 64 × 32 = 16,384 cycles at M = 8, 8 × M = 1's 2,048."""
    hw = _spec().hardware
    one, eight = (kernel_cost(hw, "gemv", 1, 1, dtype="fp16", algorithm="meshgemv", shape=(m, 64, 128))
                  for m in (1, 8))
    assert (one.cycles, eight.cycles) == (2048.0, 16384.0)


@pytest.mark.parametrize("rho,tolerance", [(0.5, 0.05), (0.8, 0.10)])
def test_one_stage_queue_against_m_d_1(rho: float, tolerance: float) -> None:
    """One request in flight at a time (batch 1) and one output token: every request is served by one
    prefill iteration of the same cycles S (deterministic service), arrivals Poisson at ρ/S: an M/D/1
    queue, whose mean wait is ρ·S / (2(1 − ρ)) (Pollaczek–Khinchine). 20,000 requests, seed 0: the
    measured mean queueing (arrival to the start of its prefill) within 5 % at ρ = 0.5 and 10 % at
    0.8 (about three standard errors of the mean at that sample size, the waits being correlated)."""
    base = _spec({"inference.load.output_len": 1})
    service = run_inference(base).result.ttft_s  # S: the prefill alone
    spec = _spec({"inference.load.output_len": 1, "inference.load.arrival": "poisson", "inference.load.rate": rho / service,
                  "inference.load.requests": 20_000})
    run = run_inference(spec)
    waits = request_times(spec, run.program, run.trace).queueing
    assert waits.mean() / (rho * service / (2 * (1 - rho))) == pytest.approx(1.0, abs=tolerance)


def test_same_seed_same_requests_other_seed_other() -> None:
    a, b, c = (run_inference(_spec({**CASES["one stage, chunked, lognormal"], "inference.load.seed": s}))
               for s in (7, 7, 8))
    assert np.array_equal(a.program.body[0].arrival, b.program.body[0].arrival)
    assert a.result.to_dict() | {"wall_s": 0} == b.result.to_dict() | {"wall_s": 0}
    assert not np.array_equal(a.program.body[0].prompt, c.program.body[0].prompt)


@pytest.mark.parametrize("overrides,message", [
    ({"inference.load.arrival": "poisson"}, "inference.load.rate: expected rate with arrival: poisson, got none"),
    ({"inference.load.rate": 3}, "inference.load.rate: expected no rate with arrival: together (rate belongs to "
                                 "arrival: poisson)"),
    ({"inference.load.arrival": "poisson", "inference.load.rate": 3},
     "inference.load.requests: expected requests with arrival: poisson, got none"),
    ({"inference.chunk": 64}, "inference.chunk: moved to inference.scheduler.token_budget"),
    ({"inference.load.arrival": "trace", "inference.load.file": "t.csv", "inference.load.lengths": "lognormal"},
     "inference.load.lengths: expected no lengths with arrival: trace (lengths belongs to arrival: together or "
     "poisson)"),
    ({"inference.load.arrival": "trace"}, "inference.load.file: expected file with arrival: trace, got none"),
    ({"inference.slo": {"ttft": "1 ms"}}, "inference.slo.tpot"),
])
def test_bad_load_keys_are_one_line(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        _spec(overrides)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_trace_in_the_azure_columns(tmp_path) -> None:
    """The Azure LLM inference trace 2023's columns: TIMESTAMP (a date and time), ContextTokens,
    GeneratedTokens; arrivals from the first row, in whole cycles (tiny8's clock: 1 GHz)."""
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.0000000,8,3\n"
                    "2023-11-16 18:15:46.0000020,5,1\n2023-11-16 18:15:46.0000500,12,2\n")
    spec = _spec({"inference.load.arrival": "trace", "inference.load.file": str(path), "inference.scheduler.batch": 2})
    run = run_inference(spec)
    op = run.program.body[0]
    assert op.arrival.tolist() == [0.0, 2000.0, 50000.0]
    assert op.prompt.tolist() == [8, 5, 12] and op.output.tolist() == [3, 1, 2]
    assert run.result.requests == 3 and run.result.refused == 0
    first_two = _spec({"inference.load.arrival": "trace", "inference.load.file": str(path), "inference.load.requests": 2})
    assert run_inference(first_two).program.body[0].prompt.tolist() == [8, 5]
    with pytest.raises(ConfigError, match="expected at most the trace's 3 requests, got 4"):
        _spec({"inference.load.arrival": "trace", "inference.load.file": str(path), "inference.load.requests": 4})


@pytest.mark.parametrize("text,message", [
    ("when,prompt,output\n0,1,1\n", "expected a header with columns arrival_s, prompt_len, output_len"),
    ("arrival_s,prompt_len,output_len\n0,1,1\n0.5,0,2\n", "row 3: expected prompt_len as a whole number"),
    ("arrival_s,prompt_len,output_len\n1,1,1\n0.5,4,2\n", "expected arrival times in order, got row 3"),
    ("arrival_s,prompt_len,output_len\n", "expected at least one request row"),
    ("arrival_s,prompt_len,output_len\nsoon,1,1\n", "expected arrival_s as seconds or a date and time"),
    # a zone on one time and none on the next (a TypeError once); a blank row between is no row
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46+00:00,8,3\n\n2023-11-16 18:15:47,5,1\n",
     "row 4: expected every arrival with a time zone or every one without, got '2023-11-16 18:15:47' without"),
    ("arrival_s,prompt_len,output_len\n2023-11-16 18:15:46,8,3\n2023-11-16 18:15:47+01:00,5,1\n",
     "row 3: expected every arrival with a time zone or every one without"),
    ("arrival_s,prompt_len,output_len\n1,1,1\n\n0.5,4,2\n", "expected arrival times in order, got row 4"),
])
def test_bad_traces_are_one_line(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        _spec({"inference.load.arrival": "trace", "inference.load.file": str(path)})
    assert message in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)
