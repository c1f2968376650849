"""The Chrome / Perfetto trace export (wsesim.analysis.chrome_trace): structure, tracks that never overlap, and
step-timeline spans that add back up to the result's ``phases``.

Runs on tiny8 at PE granularity: 4 experts give 4 region threads (one span per op); 32 experts give
32 regions, more than ``MAX_REGION_TRACKS`` (16), so regions are grouped two per thread.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from wsesim.analysis import chrome_trace as chrome_trace_module
from wsesim.analysis.chrome_trace import MAX_REGION_TRACKS, chrome_trace
from wsesim.config.loader import load_experiment_data
from wsesim.experiments.runner import simulate_experiment
from wsesim.experiments.runs import Run

TINY: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2},
                        "simulation": {"granularity": "pe"}}
CASES = {
    "4-experts": {},
    "store": {"training.activations": "store", "training.routing": "zipf:1.5"},
    "32-experts-grouped": {"model.experts": 32},
}


@pytest.fixture(scope="module", params=list(CASES))
def run(request: pytest.FixtureRequest) -> Run:
    r = simulate_experiment(load_experiment_data(TINY, overrides=CASES[request.param]).spec)
    assert r.result.feasible, r.result.infeasible_reason
    return r


def _spans(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def _by_thread(spans: list[dict[str, Any]]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    out: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in spans:
        out[(e["pid"], e["tid"])].append(e)
    return out


def _assert_serial(spans: list[dict[str, Any]], what: str) -> None:
    """No two spans overlap (ends may touch, within floating-point rounding of the µs conversion)."""
    spans = sorted(spans, key=lambda e: (e["ts"], e["dur"]))
    for a, b in zip(spans, spans[1:], strict=False):
        end = a["ts"] + a["dur"]
        assert b["ts"] >= end - 1e-9 * max(1.0, end), f"{what}: {a} overlaps {b}"


def test_structure(run: Run) -> None:
    trace = chrome_trace(run.trace, run.plan)
    text = json.dumps(trace, allow_nan=False)  # loadable: plain JSON, no NaN or infinities
    assert json.loads(text) == trace
    assert {"traceEvents", "displayTimeUnit", "otherData"} <= set(trace)
    assert trace["otherData"]["clock_hz"] == run.plan.hw.clock_hz
    spans = _spans(trace)
    assert spans
    for e in spans:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["dur"] >= 0 and e["ts"] >= 0
        assert isinstance(e["args"], dict)
    assert {e["pid"] for e in spans} == {1, 2, 3}
    assert {e["ph"] for e in trace["traceEvents"]} == {"X", "M", "C"}


def test_metadata_names_every_thread_used(run: Run) -> None:
    trace = chrome_trace(run.trace, run.plan)
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    processes = {e["pid"] for e in meta if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_name"}
    used = {(e["pid"], e["tid"]) for e in _spans(trace)}
    assert {pid for pid, _ in used} <= processes
    assert used <= threads
    assert all(e["args"]["name"] for e in meta if e["name"] in ("process_name", "thread_name"))


def test_step_timeline_tracks_never_overlap(run: Run) -> None:
    """pid 2 is the step's own timeline: each thread is serial, and so are all of them together
    (the phases partition the step)."""
    spans = [e for e in _spans(chrome_trace(run.trace, run.plan)) if e["pid"] == 2]
    threads = _by_thread(spans)
    assert {tid for _, tid in threads} == {1, 2, 3, 4}
    for (pid, tid), thread in threads.items():
        _assert_serial(thread, f"pid {pid} tid {tid}")
    _assert_serial(spans, "pid 2, all threads")


def test_each_expert_region_thread_is_serial(run: Run) -> None:
    spans = [e for e in _spans(chrome_trace(run.trace, run.plan)) if e["pid"] == 3]
    threads = _by_thread(spans)
    assert 1 <= len(threads) <= MAX_REGION_TRACKS
    for (pid, tid), thread in threads.items():
        _assert_serial(thread, f"pid {pid} tid {tid}")


def test_io_tracks_are_serial(run: Run) -> None:
    """One inbound and one outbound link: each carries one transfer at a time."""
    spans = [e for e in _spans(chrome_trace(run.trace, run.plan)) if e["pid"] == 1]
    for (pid, tid), thread in _by_thread(spans).items():
        _assert_serial(thread, f"pid {pid} tid {tid}")


def test_step_spans_add_up_to_the_phases(run: Run) -> None:
    trace = chrome_trace(run.trace, run.plan)
    clock_hz = trace["otherData"]["clock_hz"]
    totals: dict[str, float] = defaultdict(float)
    for e in _spans(trace):
        if e["pid"] == 2:
            totals[e["name"]] += e["dur"] * clock_hz / 1e6  # µs -> cycles
    phases = run.result.phases
    assert set(totals) <= set(phases)
    for name, cycles in phases.items():
        assert totals.get(name, 0.0) == pytest.approx(cycles, rel=1e-9, abs=1e-9), name
    assert sum(totals.values()) == pytest.approx(run.result.step_cycles, rel=1e-9)


def test_regions_are_grouped_beyond_max_region_tracks(run: Run) -> None:
    regions = len(run.plan.expert_regions)
    trace = chrome_trace(run.trace, run.plan)
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "thread_name" and e["pid"] == 3}
    expert_spans = [e for e in _spans(trace) if e["pid"] == 3]
    ops = sum(len(o.experts) for o in run.trace.expert_ops)
    if regions <= MAX_REGION_TRACKS:
        assert len(names) == regions and names[1] == "region 0"
        assert len(expert_spans) == ops
        assert {e["name"] for e in expert_spans} == {"expert gate_up", "expert down"}
    else:
        assert len(names) == MAX_REGION_TRACKS and names[1] == "regions 0-1"
        assert sum(e["args"]["ops"] for e in expert_spans) == ops
        assert {e["name"] for e in expert_spans} <= {"experts fwd", "experts recompute", "experts bwd"}


def test_grouping_keeps_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grouping 4 regions two per thread keeps every op's FLOPs and spans the same time."""
    run = simulate_experiment(load_experiment_data(TINY).spec)
    one = [e for e in _spans(chrome_trace(run.trace, run.plan)) if e["pid"] == 3]
    monkeypatch.setattr(chrome_trace_module, "MAX_REGION_TRACKS", 2)
    trace = chrome_trace(run.trace, run.plan)
    grouped = [e for e in _spans(trace) if e["pid"] == 3]
    assert {e["tid"] for e in grouped} == {1, 2}
    assert {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name" and e["pid"] == 3} == {
        "regions 0-1", "regions 2-3"}
    assert sum(e["args"]["flops"] for e in grouped) == pytest.approx(sum(e["args"]["flops"] for e in one), rel=1e-12)
    assert sum(e["args"]["ops"] for e in grouped) == len(one)
    assert min(e["ts"] for e in grouped) == min(e["ts"] for e in one)
    assert max(e["ts"] + e["dur"] for e in grouped) == pytest.approx(max(e["ts"] + e["dur"] for e in one))
    for (pid, tid), thread in _by_thread(grouped).items():
        _assert_serial(thread, f"pid {pid} tid {tid}")


# -------------------------------------------------------------------------- issue 12 item 15: counters


def _counters(trace: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return sorted((e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == name), key=lambda e: e["ts"])


def test_link_utilisation_counters_average_to_the_result(run: Run) -> None:
    """The inbound link's busy share, averaged over the step's equal slices, is the result's utilisation;
    the outbound one's is the gradient bytes over the link's capacity for the step."""
    trace = chrome_trace(run.trace, run.plan)
    inbound = _counters(trace, "inbound link utilisation (%)")
    outbound = _counters(trace, "outbound link utilisation (%)")
    assert len(inbound) == len(outbound) == chrome_trace_module.COUNTER_BINS
    assert all(0 <= e["args"]["busy"] <= 100 for e in inbound + outbound)
    mean = sum(e["args"]["busy"] for e in inbound) / len(inbound) / 100
    assert mean == pytest.approx(run.result.io_in_utilisation, rel=1e-9)
    out_share = run.result.io_bytes_out / run.plan.hw.io_bytes_per_cycle / run.result.step_cycles
    assert sum(e["args"]["busy"] for e in outbound) / len(outbound) / 100 == pytest.approx(out_share, rel=1e-9)


def test_staging_buffer_counter_stays_within_the_buffer_and_empties(run: Run) -> None:
    trace = chrome_trace(run.trace, run.plan)
    staged = [e["args"]["weights staged"] for e in _counters(trace, "staging buffer (bytes per PE)")]
    assert staged and max(staged) > 0
    assert max(staged) <= run.plan.hw.runtime.staging_bytes  # the stream's room is within the staging SRAM
    assert staged[-1] == pytest.approx(0.0, abs=1e-9)  # every weight freed by the end of the step
    times = [e["ts"] for e in _counters(trace, "staging buffer (bytes per PE)")]
    assert times == sorted(set(times))  # one value per instant: the level once all at that cycle happened


def test_sram_counter_is_the_memory_model_per_phase(run: Run) -> None:
    """Resident part plus the running phase's working set never exceeds the peak the result reports (the
    counter is at the mean expert load; the peak at the hottest region's)."""
    trace = chrome_trace(run.trace, run.plan)
    sram = _counters(trace, "SRAM in use (bytes per PE)")
    assert len(sram) == sum(1 for track, *_ in run.trace.spans if track == "step")
    totals = [e["args"]["resident"] + e["args"]["phase working set"] for e in sram]
    staging = run.plan.hw.runtime.staging_bytes
    assert max(totals) + staging <= run.result.peak_sram_bytes_per_pe + 1
    assert len({e["args"]["phase working set"] for e in sram}) > 1  # it changes with the phase
    assert min(e["args"]["resident"] for e in sram) > 0


def test_every_phase_of_the_vocabulary_has_a_thread() -> None:
    """A phase added to ``Phase`` without a thread would fail at export; this fails first."""
    from wsesim.analysis.chrome_trace import _STEP_TIDS
    from wsesim.model.vocabulary import Phase

    assert set(_STEP_TIDS) == set(Phase)


@pytest.mark.parametrize("routing", ["balanced", "uniform"])
def test_a_served_moe_run_shows_its_expert_dispatch_experts_and_combine(routing: str) -> None:
    """Under continuous batching each iteration of an MoE stage has, on the thread "stage 0 experts", its
    dispatch, its experts' work and its combine back to back from the iteration's start (each summed over
    the stage's MoE layers: ``BatchLog.experts``), inside the iteration; a dense stage's (zeros) none."""
    from dataclasses import replace

    import numpy as np

    from wsesim.config.inference import load_inference_data
    from wsesim.experiments.runner import run_inference
    from wsesim.sim.programs.plan import Trace

    spec = load_inference_data({"kind": "inference", "hardware": "tiny8", "model": "tiny-moe", "inference": {
        "load": {"prompt_len": 16, "output_len": 6, "arrival": "poisson", "rate": 200000, "requests": 8},
        "grid": "4x8", "scheduler": {"batch": 4}, "moe": {"routing": routing}}}).spec
    log = run_inference(spec).trace.batches
    events = chrome_trace(Trace(batches=log), clock_hz=spec.hardware.clock_hz)["traceEvents"]
    tid = {e["args"]["name"]: e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    parts = [e for e in events if e.get("cat") == "experts"]
    assert {e["tid"] for e in parts} == {tid["stage 0 experts"]}
    assert [e["name"] for e in parts] == ["dispatch", "experts", "combine"] * len(log.stage)
    us = 1e6 / 1e9  # tiny8's 1 GHz
    for i, (start, end) in enumerate(zip(log.start.tolist(), log.end.tolist(), strict=True)):
        three = parts[3 * i:3 * i + 3]
        assert [e["dur"] for e in three] == pytest.approx([c * us for c in log.experts[i]])
        assert three[0]["ts"] == pytest.approx(start * us)
        assert three[1]["ts"] == pytest.approx(three[0]["ts"] + three[0]["dur"])
        assert three[2]["ts"] + three[2]["dur"] <= end * us + 1e-9
    dense = chrome_trace(Trace(batches=replace(log, experts=np.zeros_like(log.experts))), clock_hz=1e9)
    assert not [e for e in dense["traceEvents"] if e.get("cat") == "experts" or "experts" in str(e["args"])]
