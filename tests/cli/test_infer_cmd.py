"""``wsesim infer`` (wsesim.cli.infer), in-process: the human view, ``--json`` with its top-level keys,
a model that does not fit, ``--vary`` with its CSV and figures, ``--search``, and bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wsesim import cli

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.prompt_len=16",
        "--set", "inference.output_len=4", "--set", "hardware.pe.sram=1 MiB"]


def test_the_shipped_example_prints_ttft_tokens_per_s_and_the_bottleneck(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", "--model", "llama3-8b", "--hardware", "wse2"]) == 0
    out = capsys.readouterr().out
    for text in ("time to first token", "tokens/s per request", "bottleneck", "one layer's decode, by op"):
        assert text in out


def test_json_has_the_serving_figures_at_the_top(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", "--set", "inference.grid=420x420", "--set", "inference.prompt_len=4096",
                     "--set", "inference.output_len=128", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["feasible"] and r["grid"] == "420x420"
    assert r["ttft_s"] > 0 and r["tokens_per_s_per_request"] > 0 and r["tokens_per_s"] > 0
    assert r["tokens_per_s_per_request"] == pytest.approx(1 / r["tpot_s"])
    assert sum(r["layers_per_stage"]) == 32  # every layer placed once


def test_a_model_that_does_not_fit_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", "--model", "llama3.1-70b", "--set", "inference.systems=1", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert not r["feasible"] and "do not fit 1 wafer" in r["infeasible_reason"]
    assert r["ttft_s"] == 0


def test_vary_writes_a_row_per_point_and_the_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A sweep with this experiment as its base (tests/cli/test_serving_sweep_cmd.py has the rest)."""
    out = tmp_path / "serve"
    assert cli.main(["infer", *TINY, "--vary", "inference.batch=1,2,3", "--vary", "inference.grid=2x2,4x4",
                     "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["set:inference.batch"], r["set:inference.grid"], r["grid"]) for r in rows] == [
        (b, g, g) for b in ("1", "2", "3") for g in ("2x2", "4x4")]
    assert {p.name for p in out.iterdir()} >= {"serving_vs_batch.png", "serving_vs_grid.png", "results.csv",
                                               "figures.json", "manifest.json", "sweep.json"}
    assert "tokens/s per request" in capsys.readouterr().out


def test_search_keeps_the_fastest_mapping_that_fits(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", *TINY, "--search", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert best["feasible"]


@pytest.mark.parametrize(("args", "start"), [
    (["--set", "inference.grid=420by420"], "wsesim: --set: inference.grid: expected a grid like"),
    (["--set", "inference.grid=800x800"], "wsesim: --set: inference.grid: expected a grid within the 750x994 mesh"),
    (["--vary", "inference.batch"], "wsesim: --vary: expected KEY=v1,v2,..."),
    (["--set", "inference.kv_layout=paged"], "wsesim: --set: inference.kv_layout:"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], start: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(start) and err.count("\n") == 1


def test_out_and_trace_write_the_result_the_manifest_and_one_span_per_stage_visit(tmp_path: Path) -> None:
    out, trace = tmp_path / "run", tmp_path / "t" / "serve.json"
    assert cli.main(["infer", *TINY, "--set", "inference.grid=2x2", "--set", "inference.layers_per_stage=1",
                     "--set", "inference.batch=2", "--set", "inference.batching=none",  # a token an iteration
                     "--out", str(out), "--trace", str(trace)]) == 0
    result = json.loads((out / "result.json").read_text())
    assert result["stages"] == 2 and "wall_s" not in result
    assert json.loads((out / "manifest.json").read_text())["kind"] == "infer"
    spans = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X" and e["cat"] == "iteration"]
    assert len(spans) == 2 * 2 * 4  # stages x requests x tokens (prompt's prefill + 3 decode steps)
    assert {e["tid"] for e in spans} == {1, 2}


@pytest.mark.parametrize(("vary", "expected"), [
    ("inference.bogus=1,2", "wsesim: --vary: inference.bogus: unknown key"),
    ("inference.grid=1000x1000,4x4", 'wsesim: --vary: inference.grid: expected a grid within the 8x8 mesh, got "1000x1000"'),
])
def test_a_bad_vary_key_or_first_value_is_blamed_on_vary(vary: str, expected: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40: the first --vary value is tried with the base, as an override, and its error said --set."""
    assert cli.main(["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--vary", vary]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(expected)


def test_a_bad_set_key_beside_vary_is_still_blamed_on_set(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.bogus=1",
            "--vary", "inference.batch=1,2"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.startswith("wsesim: --set: inference.bogus: unknown key")
