"""``wsesim infer`` under a load (docs/model.md §11.7): Poisson arrivals print the latency percentiles
and per-system tokens/s and write ``requests.csv``, one row per request; the SLO's goodput; a bad key
is one line, exit 2, nothing written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wsesim import cli

LOAD = ["--set", "inference.arrival=poisson", "--set", "inference.rate=4", "--set", "inference.requests=40",
        "--set", "inference.batch=8", "--set", "inference.prompt_len=512", "--set", "inference.output_len=32"]


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
    assert cli.main(["infer", "--set", "inference.arrival=poisson", "--set", "inference.requests=5",
                     "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "inference.rate: expected a rate (requests per second) with arrival: poisson" in err
    assert "\n" not in err and not out.exists()
