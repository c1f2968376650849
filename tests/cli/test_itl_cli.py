"""Inter-token latency and per-request end to end where a reader meets them (issue 29): ``wsesim infer``'s
lines, a serving sweep's results.csv columns, ``wsesim compare`` of two serving runs and two serving
sweeps, and the serving figures' panels (three for a CSV written before the columns existed)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wsesim import cli
from wsesim.analysis.serving_plans import plan_serving
from wsesim.experiments.table import SERVING_COLUMNS, read_results_table

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
        "--set", "inference.load.output_len=6", "--set", "hardware.pe.sram=1 MiB"]
LOAD = ["--set", "inference.load.arrival=poisson", "--set", "inference.load.rate=200000", "--set",
        "inference.load.requests=20", "--set", "inference.scheduler.batch=4"]
NEW = ("itl_s", "itl_p50_s", "itl_p99_s", "e2e_mean_s", "e2e_p50_s", "e2e_p99_s")


def test_infer_prints_itl_and_end_to_end_as_result_json_has_them(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", *TINY, *LOAD, "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    r = json.loads((tmp_path / "o" / "result.json").read_text())
    assert all(r[k] > 0 for k in NEW)
    itl = f"mean {r['itl_s'] * 1e6:,.1f} us, p50 {r['itl_p50_s'] * 1e6:,.1f}, p99 {r['itl_p99_s'] * 1e6:,.1f}"
    e2e = f"mean {r['e2e_mean_s'] * 1e3:,.2f} ms, p50 {r['e2e_p50_s'] * 1e3:,.2f}, p99 {r['e2e_p99_s'] * 1e3:,.2f}"
    lines = text.splitlines()
    tpot = next(i for i, line in enumerate(lines) if line.startswith("time per output token"))
    assert lines[tpot + 1].startswith("inter-token latency") and lines[tpot + 1].endswith(itl)
    assert lines[tpot + 2].startswith("end to end per request") and lines[tpot + 2].endswith(e2e)
    rows = list(csv.DictReader((tmp_path / "o" / "requests.csv").open()))
    e2e_each = sorted(float(row["end_to_end_s"]) for row in rows)
    assert r["e2e_mean_s"] == pytest.approx(sum(e2e_each) / len(e2e_each), rel=1e-12)
    assert r["end_to_end_s"] == pytest.approx(max(float(row["finish_s"]) for row in rows), rel=1e-12)


def test_one_request_pipeline_prints_them_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", *TINY]) == 0
    text = capsys.readouterr().out
    assert "inter-token latency " in text and "end to end per request " in text
    assert cli.main(["infer", *TINY, "--set", "inference.load.output_len=1"]) == 0
    assert "n/a (one output token: no gap)" in capsys.readouterr().out


def test_sweep_columns_are_the_results_and_compare_shows_their_ratios(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The six columns follow tpot_p99_s in results.csv, each cell the repr of the point's result; compare
    of two sweeps has ITL p99 and e2e p99 ratios (rate 2e5 against 4e5: more queueing at B)."""
    for side, rate in (("a", "200000"), ("b", "400000")):
        assert cli.main(["infer", *TINY, *LOAD[:2], "--set", f"inference.load.rate={rate}", *LOAD[4:6],
                         "--vary", "inference.scheduler.batch=2,4", "--out", str(tmp_path / side)]) == 0
    at = SERVING_COLUMNS.index("tpot_p99_s") + 1
    assert SERVING_COLUMNS[at:at + 6] == NEW
    header, rows = read_results_table(tmp_path / "a" / "results.csv")
    assert all(c in header for c in NEW) and all(float(row[c]) > 0 for row in rows for c in NEW)
    capsys.readouterr()
    assert cli.main(["infer", *TINY, *LOAD[:6], "--set", "inference.scheduler.batch=2", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    first = next(row for row in rows if row["set:inference.scheduler.batch"] == "2")
    assert [first[c] for c in NEW] == [repr(one[c]) for c in NEW]
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    metrics = {m["metric"]: m for m in data["rows"][0]["metrics"]}
    assert metrics["itl_p99_s"]["ratio"] == pytest.approx(metrics["itl_p99_s"]["b"] / metrics["itl_p99_s"]["a"])
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "ITL p99 B/A" in out and "e2e p99 B/A" in out
    ratio = f"{metrics['e2e_p99_s']['ratio']:.4g}x"
    assert ratio in out.splitlines()[[i for i, line in enumerate(out.splitlines()) if "ITL p99" in line][0] + 2]


def test_compare_two_serving_runs_has_itl_and_e2e(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", *TINY, *LOAD, "--out", str(tmp_path / "a")]) == 0
    assert cli.main(["infer", *TINY, *LOAD, "--set", "inference.scheduler.batch=2", "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    metrics = {m["metric"]: m for m in json.loads(capsys.readouterr().out)["metrics"]}
    a = json.loads((tmp_path / "a" / "result.json").read_text())
    for key in NEW:
        assert metrics[key]["a"] == a[key]


def test_a_csv_without_the_columns_keeps_three_panels(tmp_path: Path) -> None:
    """An older sweep's results.csv (no ITL or e2e columns) is still drawn: its three panels."""
    assert cli.main(["infer", *TINY, "--vary", "inference.scheduler.batch=1,2", "--out", str(tmp_path / "a")]) == 0
    header, rows = read_results_table(tmp_path / "a" / "results.csv")
    [plan] = plan_serving(header, rows)
    assert [p.metric for p in plan.panels][3:] == ["itl_p99_s", "e2e_p99_s"]
    old = [c for c in header if c not in NEW]
    [plan] = plan_serving(old, [{c: row[c] for c in old} for row in rows])
    assert [p.metric for p in plan.panels] == ["tokens_per_s_per_request", "tokens_per_s", "ttft_s"]
    path = tmp_path / "old.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, old, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    assert cli.main(["plot", str(path), "--out", str(tmp_path / "figs")]) == 0
    figures = json.loads((tmp_path / "figs" / "figures.json").read_text())["figures"]
    assert [p["metric"] for p in figures[0]["panels"]] == ["tokens_per_s_per_request", "tokens_per_s", "ttft_s"]


def test_the_sweep_table_has_itl_p99(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``infer --vary``'s table: ITL p99 in ms beside TTFT, as results.csv has it."""
    assert cli.main(["infer", *TINY, *LOAD[:6], "--vary", "inference.scheduler.batch=2,4", "--out", str(tmp_path / "a")]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(line for line in lines if line.startswith("inference.scheduler.batch"))
    assert "TTFT ms  ITL p99 ms  status" in head
    _, rows = read_results_table(tmp_path / "a" / "results.csv")
    for row in rows:
        line = next(x for x in lines if x.split()[:1] == [row["set:inference.scheduler.batch"]])
        assert line.split()[-2] == f"{1e3 * float(row['itl_p99_s']):,.3f}"
