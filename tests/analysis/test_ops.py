"""``ops_table``: a step's timeline as one row per op (``ops.csv`` of ``wsesim run --out``)."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import pytest

from wsesim.analysis.ops import OP_WHERE, OPS_COLUMNS, ops_table, table_csv
from wsesim.config.loader import load_experiment
from wsesim.experiments.runner import simulate_experiment
from wsesim.model.vocabulary import Phase, Track, Where

TINY = {"simulation.granularity": "pe", "training.seq_len": 32}


@pytest.fixture(scope="module")
def moe_run() -> Any:
    return simulate_experiment(load_experiment(hardware="tiny8", model="tiny-moe", overrides=TINY).spec)


def test_every_phase_has_a_place() -> None:
    assert set(OP_WHERE) == {str(p) for p in Phase}
    assert OP_WHERE[Phase.DISPATCH] == Where.FABRIC and OP_WHERE[Phase.WEIGHT_STALL] == Where.LINK_IN


def test_step_rows_partition_the_step_and_carry_the_spans_numbers(moe_run: Any) -> None:
    rows = ops_table(moe_run.trace)
    step = [r for r in rows if r["busy_cycles"] is None]
    assert len(step) == sum(1 for s in moe_run.trace.spans if s.track == Track.STEP)
    assert math.isclose(sum(r["cycles"] for r in step), moe_run.trace.step_cycles)
    assert [r["start"] for r in rows] == sorted(r["start"] for r in rows)
    attention = [r for r in step if r["op"] == "attention"]
    assert attention and all(r["where"] == "wafer" and r["flops"] > 0 and r["weight_bytes"] > 0 for r in attention)
    assert {r["pass"] for r in attention} == {"fwd", "recompute", "bwd"}
    dispatch = [r for r in step if r["op"] == "dispatch"]
    assert dispatch and all(r["where"] == "fabric" and r["bytes"] > 0 and r["flops"] is None for r in dispatch)


def test_expert_ops_are_aggregated_per_op_pass_and_layer(moe_run: Any) -> None:
    rows = [r for r in ops_table(moe_run.trace) if r["busy_cycles"] is not None]
    keys = {(str(o.op), str(o.pass_), o.layer) for o in moe_run.trace.expert_ops}
    assert len(rows) == len(keys) and {(r["op"], r["pass"], r["layer"]) for r in rows} == keys
    assert all(r["where"] == "regions" and r["experts"] == 4 for r in rows)
    busy = sum(float((o.end - o.start).sum()) for o in moe_run.trace.expert_ops)
    assert math.isclose(sum(r["busy_cycles"] for r in rows), busy)
    assert all(r["cycles"] <= r["busy_cycles"] for r in rows)  # 4 experts side by side


def test_csv_is_deterministic_and_has_the_columns(moe_run: Any) -> None:
    again = simulate_experiment(load_experiment(hardware="tiny8", model="tiny-moe", overrides=TINY).spec)
    text = table_csv(ops_table(moe_run.trace), OPS_COLUMNS)
    assert text == table_csv(ops_table(again.trace), OPS_COLUMNS)
    table = list(csv.DictReader(io.StringIO(text)))
    assert tuple(table[0]) == OPS_COLUMNS and len(table) == len(ops_table(moe_run.trace))


def test_a_dense_model_has_no_expert_rows() -> None:
    run = simulate_experiment(load_experiment(hardware="tiny8", model="tiny-moe", overrides={
        **TINY, "model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0,
        "model.ffn_intermediate": 64}).spec)
    rows = ops_table(run.trace)
    assert {r["where"] for r in rows} <= {"wafer", "link in", "link out", "memoryx"}  # no regions, no fabric
    assert any(r["op"] == "ffn" for r in rows)
