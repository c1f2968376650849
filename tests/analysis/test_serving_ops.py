"""One decode step as a table (wsesim.analysis.serving_ops, ``ops.csv`` of ``wsesim infer --out``): every
kernel of every stage once, in the order it runs, each stage's kernels adding up to its decode step's
cycles at the costed context, its parts adding up to its cycles, and the hand-off last."""

from __future__ import annotations

import math

import pytest

from wsesim.analysis.ops import table_csv
from wsesim.analysis.serving_ops import (
    DECODE_OPS_COLUMNS,
    PARTS,
    decode_ops,
    decode_step_plan,
)
from wsesim.config.inference import load_inference
from wsesim.experiments.runner import run_inference

TINY = {"inference.load.prompt_len": 16, "inference.load.output_len": 4, "hardware.pe.sram": "1 MiB",
        "inference.grid": "2x2", "inference.layers_per_stage": 1}


@pytest.fixture(scope="module")
def served():  # type: ignore[no-untyped-def]
    """tiny-moe's 2 layers on 2 stages of 2×2 PEs of tiny8: 16-token prompts, 4 tokens out."""
    spec = load_inference(hardware="tiny8", model="tiny-moe", overrides=TINY).spec
    return spec, run_inference(spec)


def test_every_stage_adds_up_to_its_decode_step(served) -> None:  # type: ignore[no-untyped-def]
    spec, served = served
    rows = decode_ops(spec, served.program, served.costs)
    assert {r["stage"] for r in rows} == {0, 1}
    for stage, cost in enumerate(served.costs.stages):
        mine = [r for r in rows if r["stage"] == stage]
        kernels, handoff = mine[:-1], mine[-1]
        assert handoff["op"] == "handoff" and handoff["cycles"] == cost.handoff_decode
        # the costed context is the last decode step's: 16 + 4 - 1 = 19 tokens
        assert all(r["context"] == 19 for r in mine)
        assert math.isclose(sum(r["cycles"] for r in kernels), cost.decode_step, rel_tol=1e-12)
        start = 0.0
        for r in kernels:  # one after another
            assert r["start"] == start and r["fits"]
            assert math.isclose(sum(r[p] for p in PARTS), r["cycles"], rel_tol=1e-12)
            start += r["cycles"]
    assert {r["layer"] for r in rows if r["stage"] == 1} - {None} == {1}  # one layer per stage


def test_the_csv_has_its_columns_and_the_plan_every_stage(served) -> None:  # type: ignore[no-untyped-def]
    spec, served = served
    text = table_csv(decode_ops(spec, served.program, served.costs), DECODE_OPS_COLUMNS)
    lines = text.splitlines()
    assert lines[0] == ",".join(DECODE_OPS_COLUMNS)
    rows = [dict(zip(DECODE_OPS_COLUMNS, line.split(","), strict=True)) for line in lines[1:]]
    plan = decode_step_plan(rows)
    assert [s["stage"] for s in plan["stages"]] == ["0", "1"]
    total = sum(float(r["cycles"]) for r in rows if r["op"] != "handoff" and r["stage"] == "0")
    assert math.isclose(sum(plan["stages"][0][p] for p in PARTS), total, rel_tol=1e-9)
    assert plan["layer"]["layer"] == "0" and plan["layer"]["ops"]


def test_under_continuous_batching_it_is_one_requests_step_at_the_specs_lengths() -> None:
    """Twenty Poisson requests batched: the decode kernels are costed for one request of 16 + 4 tokens,
    so the table is the same as a lone request's (its context 19)."""
    load = {**TINY, "inference.load.arrival": "poisson", "inference.load.rate": 1000, "inference.load.requests": 20,
            "inference.scheduler.batching": "continuous"}
    spec = load_inference(hardware="tiny8", model="tiny-moe", overrides=load).spec
    batched = run_inference(spec)
    alone_spec = load_inference(hardware="tiny8", model="tiny-moe", overrides=TINY).spec
    alone = run_inference(alone_spec)
    assert decode_ops(spec, batched.program, batched.costs) == decode_ops(alone_spec, alone.program, alone.costs)
