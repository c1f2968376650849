"""``wsesim.analysis.compare``: configuration differences and metric ratios of two runs or two sweeps."""

from __future__ import annotations

import pytest

from wsesim.analysis.compare import compare_runs, compare_sweeps, config_diff, flatten, number, ratio


def test_flatten_and_config_diff() -> None:
    a = {"hardware": {"pe": {"sram_bytes": 48}, "name": "x"}, "model": {"experts": 8}, "experiment": {"t": 1}}
    b = {"hardware": {"pe": {"sram_bytes": 96}, "name": "x"}, "model": {"experts": 8, "top_k": 2},
         "experiment": {"t": 1}}
    assert flatten(a)["hardware.pe.sram_bytes"] == 48
    assert config_diff(a, b) == [{"key": "hardware.pe.sram_bytes", "a": 48, "b": 96},
                                 {"key": "model.top_k", "a": None, "b": 2}]
    assert config_diff(a, None) == [] and config_diff(a, a) == []


def test_numbers_and_ratios() -> None:
    assert number(True) is None and number("") is None and number("nan") is None and number("2.5") == 2.5
    assert ratio(0.0, 3.0) is None and ratio(None, 1.0) is None and ratio(2.0, 3.0) == 1.5


def test_two_runs() -> None:
    a = {"hardware": "wse2", "feasible": True, "throughput_tokens_per_s": 100.0, "wall_s": 3.0,
         "phases": {"attention": 10.0}}
    b = {"hardware": "wse3", "feasible": True, "throughput_tokens_per_s": 250.0, "wall_s": 1.0,
         "phases": {"attention": 5.0}}
    out = compare_runs(a, b)
    metrics = {m["metric"]: m for m in out["metrics"]}
    assert metrics["throughput_tokens_per_s"]["ratio"] == 2.5
    assert metrics["phase_attention_cycles"]["ratio"] == 0.5
    assert "wall_s" not in metrics and "feasible" not in metrics  # the host's clock, a boolean: no metrics
    assert out["fields"] == [{"field": "hardware", "a": "wse2", "b": "wse3"}]


def test_two_sweeps_match_rows_by_their_swept_columns_not_their_order() -> None:
    cols = ["point", "status", "tuned", "set:model.experts", "throughput_tokens_per_s"]
    a = [{"point": "0", "status": "ok", "tuned": "False", "set:model.experts": "8", "throughput_tokens_per_s": "10"},
         {"point": "1", "status": "ok", "tuned": "False", "set:model.experts": "16", "throughput_tokens_per_s": "20"},
         {"point": "2", "status": "ok", "tuned": "False", "set:model.experts": "32", "throughput_tokens_per_s": "5"}]
    b = [{"point": "0", "status": "ok", "tuned": "False", "set:model.experts": "16", "throughput_tokens_per_s": "30"},
         {"point": "1", "status": "infeasible", "tuned": "False", "set:model.experts": "8",
          "throughput_tokens_per_s": ""},
         {"point": "2", "status": "ok", "tuned": "False", "set:model.experts": "64", "throughput_tokens_per_s": "1"}]
    out = compare_sweeps(cols, a, cols, b)
    assert out["match_by"] == ["set:model.experts", "tuned"]
    rows = {r["key"]["set:model.experts"]: r for r in out["rows"]}
    assert set(rows) == {"8", "16"}
    assert rows["16"]["metrics"] == [{"metric": "throughput_tokens_per_s", "a": 20.0, "b": 30.0, "ratio": 1.5}]
    assert rows["8"]["status"] == ["ok", "infeasible"] and rows["8"]["metrics"][0]["ratio"] is None
    assert out["only_in_a"] == [{"set:model.experts": "32", "tuned": "False"}]
    assert out["only_in_b"] == [{"set:model.experts": "64", "tuned": "False"}]


def _serving_rows(swept: str, values: list[str], model: str | None, hardware: str | None) -> list[dict[str, str]]:
    """A serving sweep's rows over ``swept`` x rate (1, 2): each row's model and hardware as its result
    columns hold them (the swept one's value, else the fixed one), tokens/s numbered by the row."""
    rows = []
    for value in values:
        for rate in ("1", "2.0"):
            row = {"point": str(len(rows)), "status": "ok", f"set:{swept}": value, "set:inference.load.rate": rate,
                   "model": model or value, "hardware": hardware or value, "tokens_per_s": str(10 * len(rows) + 10)}
            rows.append(row)
    return rows


def test_two_sweeps_over_different_keys_match_by_the_values_they_share() -> None:
    """Issue 40: serve-vs-load's model x rate against a hardware x rate sweep paired A's first model with B's
    first hardware at each rate, listed A's other model twice (by its rate alone) and dropped B's other
    hardware. A (LLaMA3-8B and 70B on wse3) meets B (8B on wse2 and wse3) only where both ran the 8B on the
    wse3, at each rate (2.0 in B is A's 2); the rest is listed once each, by its own keys."""
    cols_a = ["point", "status", "set:model", "set:inference.load.rate", "model", "hardware", "tokens_per_s"]
    cols_b = ["point", "status", "set:hardware", "set:inference.load.rate", "model", "hardware", "tokens_per_s"]
    a = _serving_rows("model", ["llama3-8b", "llama3.1-70b"], None, "wse3")
    b = _serving_rows("hardware", ["wse2", "wse3"], "llama3-8b", None)
    for row in a:
        row["set:inference.load.rate"] = row["set:inference.load.rate"].replace("2.0", "2")
    out = compare_sweeps(cols_a, a, cols_b, b)
    assert out["match_by"] == ["set:inference.load.rate", "set:model", "set:hardware"]
    assert [(r["key"], r["metrics"][0]["a"], r["metrics"][0]["b"]) for r in out["rows"]] == [
        ({"set:inference.load.rate": "1", "set:model": "llama3-8b", "set:hardware": "wse3"}, 10.0, 30.0),
        ({"set:inference.load.rate": "2", "set:model": "llama3-8b", "set:hardware": "wse3"}, 20.0, 40.0)]
    assert out["only_in_a"] == [{"set:inference.load.rate": "1", "set:model": "llama3.1-70b"},
                                {"set:inference.load.rate": "2", "set:model": "llama3.1-70b"}]
    assert out["only_in_b"] == [{"set:inference.load.rate": "1", "set:hardware": "wse2"},
                                {"set:inference.load.rate": "2.0", "set:hardware": "wse2"}]


def test_rows_a_key_cannot_tell_apart_are_listed_once_each_not_paired_by_order() -> None:
    """B sweeps a key A has no column for: its rows at one rate cannot be told apart, so none is paired
    with A's row at that rate by order; each is listed once."""
    a = [{"status": "ok", "set:inference.load.rate": "1", "tokens_per_s": "10"}]
    b = [{"status": "ok", "set:inference.load.rate": "1", "set:inference.scheduler.batch": n, "tokens_per_s": "20"} for n in "12"]
    out = compare_sweeps(["status", "set:inference.load.rate", "tokens_per_s"], a,
                         ["status", "set:inference.load.rate", "set:inference.scheduler.batch", "tokens_per_s"], b)
    assert out["rows"] == [] and out["only_in_a"] == [{"set:inference.load.rate": "1"}]
    assert out["only_in_b"] == [{"set:inference.load.rate": "1", "set:inference.scheduler.batch": "1"},
                                {"set:inference.load.rate": "1", "set:inference.scheduler.batch": "2"}]


def test_two_sweeps_that_share_no_key_are_not_matched_by_position() -> None:
    with pytest.raises(ValueError, match="share no swept key .*A sweeps model, B sweeps hardware"):
        compare_sweeps(["status", "set:model"], [{"status": "ok", "set:model": "x"}],
                       ["status", "set:hardware"], [{"status": "ok", "set:hardware": "y"}])
