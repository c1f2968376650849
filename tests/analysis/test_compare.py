"""``wsesim.analysis.compare``: configuration differences and metric ratios of two runs or two sweeps."""

from __future__ import annotations

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
