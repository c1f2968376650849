"""``wsesim compare A B`` (wsesim.cli.compare) in-process: two run folders, a --json file, two sweep
CSVs, two serving runs or serving sweeps, two of tune's candidates.csv, how a number is printed, and bad
input (one line, exit 2; two kinds in one line among it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wsesim import cli

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
        "--set", "training.seq_len=32"]
SERVING = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
           "--set", "inference.load.output_len=4", "--set", "hardware.pe.sram=1 MiB"]
TUNE = ["tune", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    assert cli.main(["run", *TINY, "--out", str(root / "a")]) == 0
    assert cli.main(["run", *TINY, "--set", "model.top_k=1", "--out", str(root / "b")]) == 0
    return root


def test_two_run_folders(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli.main(["compare", str(runs / "a"), str(runs / "b"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "runs" and out["config"] == [{"key": "model.top_k", "a": 2, "b": 1}]
    a = json.loads((runs / "a" / "result.json").read_text(encoding="utf-8"))
    b = json.loads((runs / "b" / "result.json").read_text(encoding="utf-8"))
    thr = next(m for m in out["metrics"] if m["metric"] == "throughput_tokens_per_s")
    assert thr["ratio"] == pytest.approx(b["throughput_tokens_per_s"] / a["throughput_tokens_per_s"])
    assert thr["ratio"] != pytest.approx(1.0)
    assert cli.main(["compare", str(runs / "a"), str(runs / "b")]) == 0
    text = capsys.readouterr().out
    assert "model.top_k" in text and "B/A" in text and "throughput_tokens_per_s" in text


def test_a_json_output_file_against_a_result_json(runs: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli.main(["run", *TINY, "--json"]) == 0
    saved = tmp_path / "run.json"
    saved.write_text(capsys.readouterr().out, encoding="utf-8")
    assert cli.main(["compare", str(runs / "a" / "result.json"), str(saved), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"] == []  # no manifest beside the --json file: nothing to compare
    assert all(m["ratio"] == pytest.approx(1.0) for m in out["metrics"] if m["ratio"] is not None)


def test_two_sweeps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header = "point,point_key,status,reason,tuned,set:model.experts,throughput_tokens_per_s\n"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "results.csv").write_text(header + "0,k0,ok,,False,8,100\n1,k1,ok,,False,16,50\n")
    (tmp_path / "b" / "results.csv").write_text(header + "0,x0,ok,,False,16,75\n1,x1,ok,,False,8,300\n")
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b" / "results.csv"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ratios = {r["key"]["set:model.experts"]: r["metrics"][0]["ratio"] for r in out["rows"]}
    assert ratios == {"8": 3.0, "16": 1.5}
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "3x" in capsys.readouterr().out


@pytest.mark.parametrize("make, expected", [
    (lambda d: d / "missing", "no such file or folder"),
    (lambda d: d, "expected a run's folder"),
    (lambda d: (d / "x.json").write_text("[1]") and d / "x.json", "expected a run's result"),
    (lambda d: (d / "x.json").write_text("{not json") and d / "x.json", "not JSON"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, runs: Path, capsys: pytest.CaptureFixture[str],
                                     make, expected: str) -> None:  # type: ignore[no-untyped-def]
    bad = make(tmp_path)
    capsys.readouterr()
    assert cli.main(["compare", str(runs / "a"), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and str(bad) in err


def test_a_run_against_a_sweep_is_refused(runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "results.csv").write_text("point,status\n0,ok\n")
    capsys.readouterr()
    assert cli.main(["compare", str(runs / "a"), str(tmp_path / "results.csv")]) == 2
    assert "expected two of one kind (two training runs, two serving runs, two sweeps" in capsys.readouterr().err


def test_two_cluster_sweeps_lead_with_cluster_throughput(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = "point,status,tuned,set:cluster.systems,systems,throughput_tokens_per_s,cluster_throughput_tokens_per_s\n"
    b = a.replace("set:cluster.systems,", "set:cluster.systems,set:training.seq_len,")
    (tmp_path / "a.csv").write_text(a + "0,ok,False,1,1,100,100\n1,ok,False,4,4,90,360\n")
    (tmp_path / "b.csv").write_text(b + "0,ok,False,1,1024,1,120,120\n1,ok,False,4,1024,4,100,400\n")
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "swept only in B (not matched on): training.seq_len" in out
    assert "cluster tokens/s A" in out and "360" in out and "400" in out


def test_a_configuration_value_is_shown_without_float_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """0.23 pJ is 2.3000000000000003e-13 J after the unit conversion; the table shows 2.3e-13 (issue 40)."""
    serve = ["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
             "--set", "inference.load.output_len=4", "--set", "hardware.pe.sram=1 MiB"]
    assert cli.main([*serve, "--out", str(tmp_path / "a")]) == 0
    assert cli.main([*serve, "--set", "hardware.energy.fmac_fp16.value=0.23 pJ", "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("hardware.energy.fmac_fp16")]
    assert line.split()[1:] == ["1e-12", "2.3e-13"]


def test_two_sweeps_sharing_no_key_say_so_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.csv").write_text("point,status,set:model,throughput_tokens_per_s\n0,ok,x,1\n")
    (tmp_path / "b.csv").write_text("point,status,set:hardware,throughput_tokens_per_s\n0,ok,y,2\n")
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "share no swept key" in captured.err and "A sweeps model, B sweeps hardware" in captured.err


def test_a_serving_sweep_against_a_training_sweep_is_refused(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Both are results.csv files: they were matched row by row, tokens/s per request against nothing."""
    (tmp_path / "serve.csv").write_text("point,status,set:inference.scheduler.batch,tokens_per_s_per_request,tokens_per_s\n"
                                        "0,ok,1,50,50\n")
    (tmp_path / "train.csv").write_text("point,status,set:inference.scheduler.batch,throughput_tokens_per_s,mfu\n0,ok,1,9,0.5\n")
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "serve.csv"), str(tmp_path / "train.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a serving sweep" in err and "a training sweep" in err
    assert "they measure different things" in err


def test_two_sweeps_over_different_keys_print_each_unmatched_row_once(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    head = "point,status,{},set:inference.load.rate,model,hardware,tokens_per_s_per_request,tokens_per_s\n"
    (tmp_path / "a.csv").write_text(head.format("set:model") + "0,ok,m8,1,m8,w3,5,5\n1,ok,m70,1,m70,w3,2,2\n")
    (tmp_path / "b.csv").write_text(head.format("set:hardware") + "0,ok,w2,1,m8,w2,4,4\n1,ok,w3,1,m8,w3,6,6\n")
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "swept only in A (matched with B's model column): model" in out
    assert "only in A: inference.load.rate=1, model=m70\n" in out and "only in B: inference.load.rate=1, hardware=w2\n" in out
    assert "1.2x" in out  # the 8B on w3: 6 / 5


def test_compare_prints_every_number_one_way() -> None:
    """``compare`` printed 8,657.3 as "8657" (``.4g``) beside 11,392 as "11,392"."""
    from wsesim.cli.compare import _num

    assert [_num(v) for v in (8657.3, 11392.0, 1234.5, 12.345, 0.5, None)] == [
        "8,657", "11,392", "1,234", "12.35", "0.5", "-"]


def test_compare_two_serving_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Batch 1 against 2 on one stage: twice the requests, the same aggregate tokens/s here."""
    assert cli.main(["infer", *SERVING, "--out", str(tmp_path / "a")]) == 0
    assert cli.main(["infer", *SERVING, "--set", "inference.scheduler.batch=2", "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"] == [{"key": "experiment.inference.scheduler.batch", "a": 1, "b": 2}]
    metrics = {m["metric"]: m for m in data["metrics"]}
    assert metrics["batch"]["ratio"] == 2.0
    a = json.loads((tmp_path / "a" / "result.json").read_text())
    assert metrics["ttft_s"]["a"] == a["ttft_s"] and metrics["decode_compute_cycles"]["a"] == (
        a["decode_breakdown"]["compute"])
    assert cli.main(["compare", str(tmp_path / "a" / "result.json"), str(tmp_path / "b")]) == 0
    assert "tokens_per_s_per_request" in capsys.readouterr().out


def test_compare_two_serving_sweeps_shows_their_own_figures(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", *SERVING, "--vary", "inference.scheduler.batch=1,2", "--out", str(tmp_path / "a")]) == 0
    assert cli.main(["infer", *SERVING, "--set", "inference.kv_layout=concat", "--vary", "inference.scheduler.batch=1,2",
                     "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "tokens/s per request A" in out and "TTFT B/A" in out and "MFU" not in out
    assert "experiment.inference.kv_layout  shift  concat" in out


def test_compare_two_candidate_tables_by_g(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each side's best candidate at each G, whatever its B."""
    assert cli.main([*TUNE, "--set", "training.seq_len=16", "--out", str(tmp_path / "a")]) == 0
    assert cli.main([*TUNE, "--set", "training.seq_len=32", "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b" / "candidates.csv"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["match_by"] == ["tiles", "micro_batches", "systems"]
    assert data["rows"] and data["rows"][0]["key"]["tiles"] == "1" and data["rows"][0]["status"] == ["ok", "ok"]
    assert data["config"][0]["key"] == "experiment.training.seq_len"


@pytest.mark.parametrize(("a", "b", "says"), [
    ("serve", "sweep", "got a serving run"), ("serve", "run", "got a serving run"),
    ("tune", "sweep", "got tune's candidates")])
def test_compare_refuses_two_kinds_in_one_line(a: str, b: str, says: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    make = {"serve": ["infer", *SERVING], "sweep": ["infer", *SERVING, "--vary", "inference.scheduler.batch=1,2"],
            "run": ["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "training.seq_len=16",
                    "--set", "training.batch_per_tile=1", "--set", "simulation.granularity=pe"],
            "tune": [*TUNE, "--set", "training.seq_len=16"]}
    for side in (a, b):
        assert cli.main([*make[side], "--out", str(tmp_path / side)]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / a), str(tmp_path / b)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "expected two of one kind" in err
