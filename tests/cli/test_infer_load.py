"""``wsesim infer`` under a load (docs/model.md §11.7): Poisson arrivals print the latency percentiles
and per-system tokens/s and write ``requests.csv``, one row per request; the SLO's goodput; a bad key
is one line, exit 2, nothing written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wsesim import cli

LOAD = ["--set", "inference.load.arrival=poisson", "--set", "inference.load.rate=4", "--set", "inference.load.requests=40",
        "--set", "inference.scheduler.batch=8", "--set", "inference.load.prompt_len=512", "--set", "inference.load.output_len=32"]


def test_poisson_load_prints_percentiles_and_writes_requests_csv(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert cli.main(["infer", "--hardware", "wse3", *LOAD, "--set", "inference.slo.ttft=500 ms",
                     "--set", "inference.slo.tpot=5 ms", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for part in ("40 requests arriving poisson", "p50", "p99", "per system)", "goodput", "requests.csv"):
        assert part in text
    rows = list(csv.DictReader((out / "requests.csv").open()))
    assert len(rows) == 40 and all(r["status"] == "served" for r in rows)
    result = json.loads((out / "result.json").read_text())
    for key in ("ttft_s", "tpot_s", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "tokens_per_s",
                "tokens_per_s_per_system", "goodput_tokens_per_s"):
        assert result[key] > 0, key
    ttft = sorted(float(r["ttft_s"]) for r in rows)
    assert result["ttft_s"] == pytest.approx(sum(ttft) / 40)
    for r in rows:  # each row's columns are each other's differences
        assert float(r["ttft_s"]) == pytest.approx(float(r["first_token_s"]) - float(r["arrival_s"]))
        assert float(r["end_to_end_s"]) == pytest.approx(float(r["finish_s"]) - float(r["arrival_s"]))
    assert result["ttft_p99_s"] <= ttft[-1] and result["ttft_p50_s"] >= ttft[0]


def test_bad_load_key_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert cli.main(["infer", "--set", "inference.load.arrival=poisson", "--set", "inference.load.requests=5",
                     "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "inference.load.rate: expected rate with arrival: poisson, got none" in err
    assert "\n" not in err and not out.exists()


TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
        "--set", "inference.load.output_len=4", "--set", "hardware.pe.sram=1 MiB", "--set", "inference.load.arrival=poisson",
        "--set", "inference.load.requests=20", "--set", "inference.scheduler.batch=4"]


def test_trace_has_a_span_per_iteration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.json"
    assert cli.main(["infer", *TINY, "--set", "inference.load.rate=100000", "--trace", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    spans = [e for e in events if e["cat"] not in ("handoff", "experts")]
    assert len(spans) == result["events"]  # the iterations
    # and each one's expert dispatch, experts and combine (tiny-moe: every layer an MoE layer)
    assert len([e for e in events if e["cat"] == "experts"]) == 3 * result["events"]
    assert any(e["cat"] == "handoff" for e in events)  # and the hand-offs between them (issue 37)
    assert sum(e["args"]["decodes"] for e in spans) == 20 * 3  # every decode token, once
    assert sum(e["args"]["prompt_tokens"] for e in spans) == 20 * 16


def test_a_sweep_over_the_rate_draws_throughput_against_latency(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--vary inference.load.rate: one labelled point per load on tokens/s per system against per user; the
    base needs no rate of its own (the first point's validates it)."""
    out = tmp_path / "sweep"
    assert cli.main(["infer", *TINY, "--vary", "inference.load.rate=20000,100000,500000", "--out", str(out)]) == 0
    figures = json.loads((out / "figures.json").read_text())["figures"]
    load = next(f for f in figures if f["stem"] == "throughput_vs_latency")
    (series,) = load["series"]
    assert load["load"] == "inference.load.rate"
    assert [p["load"] for p in series["points"]] == ["20000", "100000", "500000"]
    assert not load["left_out"]
    rows = list(csv.DictReader((out / "results.csv").open()))
    for p, row in zip(series["points"], rows, strict=True):
        assert p["tokens_per_s_per_system"] == float(row["tokens_per_s_per_system"])
        assert p["tokens_per_s_per_request"] == float(row["tokens_per_s_per_request"])
    assert (out / "throughput_vs_latency.png").stat().st_size > 0


SLO_FIELDS = ("slo_ttft_s", "slo_tpot_s", "slo_attainment", "goodput_requests_per_s", "goodput_tokens_per_s")


def test_without_an_slo_goodput_is_n_a_never_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No ``inference.slo``: the targets, the attainment and goodput are None in result.json, empty in a
    serving sweep's results.csv and no metric of ``compare`` (issue 40: they read 0.0, as if nothing met
    targets never given); with targets they are numbers."""
    out = tmp_path / "run"
    assert cli.main(["infer", *TINY, "--set", "inference.load.rate=100000", "--out", str(out)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["feasible"] and all(result[k] is None for k in SLO_FIELDS), {k: result[k] for k in SLO_FIELDS}
    sweep = tmp_path / "sweep"
    assert cli.main(["infer", *TINY, "--vary", "inference.load.rate=20000,100000", "--out", str(sweep)]) == 0
    rows = list(csv.DictReader((sweep / "results.csv").open()))
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert all(r[k] == "" for r in rows for k in SLO_FIELDS if k in r)
    capsys.readouterr()
    for a in (out, sweep):
        assert cli.main(["compare", str(a), str(a), "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        metrics = [m["metric"] for m in data["metrics"]] if "metrics" in data else [
            m["metric"] for row in data["rows"] for m in row["metrics"]]
        assert metrics and not set(metrics) & set(SLO_FIELDS)
    assert cli.main(["infer", *TINY, "--set", "inference.load.rate=100000", "--set", "inference.slo.ttft=1 s",
                     "--set", "inference.slo.tpot=1 s", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["slo_attainment"] == 1.0 and result["goodput_tokens_per_s"] == result["tokens_per_s"]


def test_a_refused_request_does_not_meet_the_slo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace of 3 requests, the third's 10,000,000-token output fitting no stage (refused); the targets
    (1 s each) are met by the two served: attainment is over all 3, 2/3, not 100 % of the 2 served; goodput
    counts the 2."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_len,output_len\n0,16,4\n0.001,16,4\n0.002,16,10000000\n")
    argv = ["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
            "--set", "inference.load.output_len=4", "--set", "hardware.pe.sram=1 MiB",
            "--set", "inference.load.arrival=trace", "--set", f"inference.load.file={trace}",
            "--set", "inference.scheduler.batch=4", "--set", "inference.slo.ttft=1 s",
            "--set", "inference.slo.tpot=1 s", "--json"]
    assert cli.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["requests"], result["refused"]) == (3, 1)
    assert result["slo_attainment"] == pytest.approx(2 / 3)
    assert result["goodput_tokens_per_s"] == pytest.approx(result["tokens_per_s"])  # the 2 served met both
    assert cli.main(argv[:-1]) == 0
    assert "1 request whose KV cache fits no stage even alone" in capsys.readouterr().out  # not "1 requests"


def test_every_request_refused_is_infeasible_not_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace whose 2 requests each want a 10,000,000-token output, which fits no stage: nothing is served,
    so the run is infeasible with its reason (issue 40: it was feasible with TTFT, TPOT and end to end 0.0,
    the best point of a figure); in a sweep, an infeasible row with its latencies empty."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_len,output_len\n0,16,10000000\n0.001,16,10000000\n")
    base = ["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
            "--set", "inference.load.output_len=4", "--set", "hardware.pe.sram=1 MiB", "--set", "inference.load.arrival=trace",
            "--set", "inference.scheduler.batch=4"]
    assert cli.main([*base, "--set", f"inference.load.file={trace}", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert not result["feasible"] and (result["requests"], result["refused"]) == (2, 2)
    assert result["infeasible_reason"].startswith("every request refused: each one's KV cache")
    assert "16 + 10,000,000 tokens" in result["infeasible_reason"]
    assert cli.main([*base, "--set", f"inference.load.file={trace}"]) == 0
    text = capsys.readouterr().out
    assert "mapping: 1 stage of 8x8 PEs" in text and "infeasible: every request refused" in text
    sweep = tmp_path / "sweep"
    assert cli.main([*base, "--vary", f"inference.load.file={trace}", "--out", str(sweep)]) == 0
    (row,) = csv.DictReader((sweep / "results.csv").open())
    assert row["status"] == "infeasible" and row["reason"].startswith("every request refused")
    assert row["ttft_s"] == row["tpot_s"] == row["end_to_end_s"] == ""
