"""``wsesim infer --trace`` (docs/model.md §11.4, §11.7), read back from the Chrome trace JSON the command
writes, under ``batching: none`` (each iteration one request's prompt or one decode token): one iteration
span per stage visit (stages × requests × tokens), naming its request, a stage serving one at a time, a
request's visits in the order of its path, the two engines' traces the same, and a batch queueing first
come first served. Times in the trace are microseconds; tiny8 runs at 1 GHz, so a cycle is 0.001 µs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wsesim import cli

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
        "--set", "inference.scheduler.batching=none"]  # an iteration a stage visit
EPS = 1e-6  # µs: the trace's float rounding, far below a cycle (0.001 µs)


def _infer(tmp_path: Path, sets: list[str], engine: str = "fast", extra: tuple[str, ...] = ()
           ) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """Run ``wsesim infer`` with ``--set`` each of ``sets``; the trace's spans, result.json, and the
    trace's thread names."""
    out, trace = tmp_path / f"run-{engine}", tmp_path / f"trace-{engine}.json"
    args = [x for s in sets for x in ("--set", s)]
    assert cli.main(["infer", *TINY, *args, *extra, "--engine", engine, "--out", str(out),
                     "--trace", str(trace)]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    result = json.loads((out / "result.json").read_text())
    return (_visits([e for e in events if e["ph"] == "X" and e["cat"] == "iteration"]), result,
            [e for e in events if e["ph"] == "M" and e["name"] == "thread_name"
             and not e["args"]["name"].endswith(("hand-off", "experts"))])


def _visits(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The iteration spans, each one request's (its one decode token or its whole prompt), with its
    ``stage``, ``request`` and ``token`` (0: the prompt; then its decode tokens in the order they ran)
    added to its args."""
    seen: dict[tuple[int, int], int] = {}
    for e in sorted(spans, key=lambda e: e["ts"]):
        a = e["args"]
        (r,) = a["requests"] or [p[0] for p in a["prompts"]]
        s = int(a["station"].split()[-1])
        assert bool(a["prompts"]) == ((s, r) not in seen)  # its prompt first, then its decode tokens
        a |= {"stage": s, "request": r, "token": seen.get((s, r), 0)}
        seen[(s, r)] = a["token"] + 1
    return spans


CASES = {
    "one stage": (["inference.grid=8x8", "inference.scheduler.batch=3", "inference.load.output_len=3"], 1, 3, 3),
    "two stages": (["inference.grid=2x2", "inference.layers_per_stage=1", "inference.scheduler.batch=2",
                    "inference.load.output_len=5"], 2, 2, 5),
    "three stages": (["model.layers=3", "inference.grid=2x2", "inference.layers_per_stage=1",
                      "inference.scheduler.batch=2", "inference.load.output_len=3"], 3, 2, 3),
    "two wafers": (["inference.grid=8x8", "inference.layers_per_stage=1", "inference.interconnect=swarmx",
                    "inference.scheduler.batch=1", "inference.load.output_len=4"], 2, 1, 4),
}


@pytest.mark.parametrize("engine", ["fast", "reference"])
@pytest.mark.parametrize("case", list(CASES))
def test_one_span_per_stage_visit(tmp_path: Path, case: str, engine: str) -> None:
    """Every (stage, request, token) once: S · B · T spans, on the stage's thread, its prompt for token 0
    and a decode token after. A stage's spans do not overlap; a request's visits (token by token, stage by
    stage) each start after the one before has ended; the last ends at the run's end; a stage's spans
    add up to its busy share of the run."""
    sets, stages, batch, output = CASES[case]
    spans, result, threads = _infer(tmp_path, sets, engine)
    assert result["stages"] == stages and result["batch"] == batch and result["output_len"] == output
    assert result["systems"] == (2 if case == "two wafers" else 1)
    assert [t["args"]["name"] for t in threads] == [f"stage {s}" for s in range(stages)]
    assert len(spans) == stages * batch * output
    visits = {(e["args"]["stage"], e["args"]["request"], e["args"]["token"]) for e in spans}
    assert visits == {(s, r, t) for s in range(stages) for r in range(batch) for t in range(output)}
    for e in spans:
        assert e["tid"] == e["args"]["stage"] + 1
        assert e["dur"] > 0
    for s in range(stages):
        on = sorted((e for e in spans if e["args"]["stage"] == s), key=lambda e: e["ts"])
        assert all(b["ts"] >= a["ts"] + a["dur"] - EPS for a, b in zip(on, on[1:], strict=False))
        busy = sum(e["dur"] for e in on) / (result["end_to_end_s"] * 1e6)
        assert busy == pytest.approx(result["per_stage"][s]["busy"], rel=1e-9)
    for r in range(batch):
        path = sorted((e for e in spans if e["args"]["request"] == r),
                      key=lambda e: (e["args"]["token"], e["args"]["stage"]))
        assert all(b["ts"] >= a["ts"] + a["dur"] - EPS for a, b in zip(path, path[1:], strict=False))
    assert max(e["ts"] + e["dur"] for e in spans) == pytest.approx(result["end_to_end_s"] * 1e6, rel=1e-12)


@pytest.mark.parametrize("case", ["two stages", "three stages"])
def test_the_two_engines_write_the_same_trace(tmp_path: Path, case: str) -> None:
    sets = CASES[case][0]
    fast, ref = (sorted((e["tid"], e["ts"], e["dur"], e["name"]) for e in _infer(tmp_path, sets, engine)[0])
                 for engine in ("fast", "reference"))
    assert fast == ref


def test_a_batch_queues_first_come_first_served(tmp_path: Path) -> None:
    """Three requests on one stage (one PE) at cycle 0: the prompts back to back, request r's first
    token at (r + 1) · P; then token 1 of requests 0, 1, 2 and token 2 of 0, 1, 2, the stage never idle
    (tests/experiments/test_serving_runs.py derives the times)."""
    spans, result, _ = _infer(tmp_path, ["inference.grid=1x1", "hardware.pe.sram=1 MiB", "inference.scheduler.batch=3",
                                         "inference.load.output_len=3"])
    P = result["per_stage"][0]["prefill_cycles"] / 1e3  # µs
    order = sorted(spans, key=lambda e: e["ts"])
    assert [(e["args"]["request"], e["args"]["token"]) for e in order] == [
        (r, t) for t in range(3) for r in range(3)]
    for r, e in enumerate(order[:3]):
        assert e["ts"] == pytest.approx(r * P, abs=EPS) and e["ts"] + e["dur"] == pytest.approx((r + 1) * P)
    assert all(b["ts"] == pytest.approx(a["ts"] + a["dur"], abs=EPS) for a, b in zip(order, order[1:],
                                                                                     strict=False))
    assert result["ttft_s"] * 1e6 == pytest.approx((P + 2 * P + 3 * P) / 3)


def test_search_traces_the_mapping_it_keeps(tmp_path: Path) -> None:
    """``--search --trace`` writes the best candidate's run: its stages × requests × tokens spans."""
    spans, result, threads = _infer(tmp_path, ["hardware.mesh.rows=16", "hardware.mesh.cols=16",
                                               "inference.scheduler.batch=2", "inference.load.output_len=3"],
                                    extra=("--search",))
    assert result["feasible"] and len(threads) == result["stages"]
    assert len(spans) == result["stages"] * 2 * 3
