"""Issue 29 part A, the tools around serving: ``compare`` and ``plot`` of serving results (``infer --out``,
``infer --vary --out``) and of tune's ``candidates.csv``; ``model list`` and ``hardware list`` with their
descriptions; a sequence beyond a model's context warned of, once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wsesim import cli

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.prompt_len=16",
        "--set", "inference.output_len=4", "--set", "hardware.pe.sram=1 MiB"]
TUNE = ["tune", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe"]
REPO = Path(__file__).parents[2]


def test_compare_two_serving_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Batch 1 against 2 on one stage: twice the requests, the same aggregate tokens/s here."""
    assert cli.main(["infer", *TINY, "--out", str(tmp_path / "a")]) == 0
    assert cli.main(["infer", *TINY, "--set", "inference.batch=2", "--out", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"] == [{"key": "experiment.inference.batch", "a": 1, "b": 2}]
    metrics = {m["metric"]: m for m in data["metrics"]}
    assert metrics["batch"]["ratio"] == 2.0
    a = json.loads((tmp_path / "a" / "result.json").read_text())
    assert metrics["ttft_s"]["a"] == a["ttft_s"] and metrics["decode_compute_cycles"]["a"] == (
        a["decode_breakdown"]["compute"])
    assert cli.main(["compare", str(tmp_path / "a" / "result.json"), str(tmp_path / "b")]) == 0
    assert "tokens_per_s_per_request" in capsys.readouterr().out


def test_compare_two_serving_sweeps_shows_their_own_figures(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", *TINY, "--vary", "inference.batch=1,2", "--out", str(tmp_path / "a")]) == 0
    assert cli.main(["infer", *TINY, "--set", "inference.kv_layout=concat", "--vary", "inference.batch=1,2",
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
    make = {"serve": ["infer", *TINY], "sweep": ["infer", *TINY, "--vary", "inference.batch=1,2"],
            "run": ["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "training.seq_len=16",
                    "--set", "training.batch_per_tile=1", "--set", "simulation.granularity=pe"],
            "tune": [*TUNE, "--set", "training.seq_len=16"]}
    for side in (a, b):
        assert cli.main([*make[side], "--out", str(tmp_path / side)]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / a), str(tmp_path / b)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "expected two of one kind" in err


def test_plot_a_serving_runs_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    assert cli.main(["infer", *TINY, "--set", "inference.grid=2x2", "--set", "inference.layers_per_stage=1",
                     "--out", str(out)]) == 0
    capsys.readouterr()
    assert cli.main(["plot", str(out), "--json"]) == 0
    assert [Path(p).name for p in json.loads(capsys.readouterr().out)] == [
        "decode_step.png", "decode_step.svg", "decode_step.pdf", "figures.json", "manifest.json"]
    [figure] = json.loads((out / "figures.json").read_text())["figures"]
    assert [s["stage"] for s in figure["stages"]] == ["0", "1"]  # every stage drawn
    assert "2 × 2x2 on 1 wafer, batch 1" in figure["title"]  # one wafer, not "1 wafer(s)"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "infer" and "plot" in manifest["also"]


@pytest.mark.parametrize("content", ["[1, 2]", "3", '"result"'])
def test_plot_a_serving_folder_whose_result_is_no_object_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str) -> None:
    """A result.json holding a JSON list (or a number, a string) beside a good ops.csv: one line, exit 2,
    nothing drawn (issue 40: an AttributeError, the list's ``.get``)."""
    out = tmp_path / "s"
    assert cli.main(["infer", *TINY, "--out", str(out)]) == 0
    (out / "result.json").write_text(content)
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    assert cli.main(["plot", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected result.json to hold a JSON object, got a JSON " in err
    assert sorted(p.name for p in out.iterdir()) == before


def test_plot_a_folder_with_neither_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert cli.main(["plot", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "serving run's (ops.csv and result.json" in err
    assert list((tmp_path / "empty").iterdir()) == []


def test_infer_out_writes_ops_csv(tmp_path: Path) -> None:
    assert cli.main(["infer", *TINY, "--out", str(tmp_path / "o")]) == 0
    header = (tmp_path / "o" / "ops.csv").read_text().splitlines()[0]
    assert header.startswith("stage,wafer,op,kind,layer,dims")
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["files"] == [
        "result.json", "requests.csv", "ops.csv"]


def test_model_list_and_hardware_list_describe_every_preset(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["model", "list", "--json"]) == 0
    models = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in models] == sorted(p.stem for p in (REPO / "workloads").glob("*.yaml"))
    assert all(m["description"] for m in models)
    assert next(m for m in models if m["name"] == "gpt3-xl")["context_len"] == 2048
    assert cli.main(["model", "list"]) == 0
    out = capsys.readouterr().out
    assert "llama3.1-70b" in out and "LLaMA 3.1 70B, dense, 80 layers" in out
    assert cli.main(["hardware", "list"]) == 0
    out = capsys.readouterr().out
    assert "750x994" in out and "SwarmX broadcast-reduce tree" in out


def test_a_sequence_beyond_the_models_context_is_warned_of_once(capsys: pytest.CaptureFixture[str]) -> None:
    """GPT-3 XL's context is 2,048 tokens; the shipped experiment's sequence 4,096: simulated, and said."""
    assert cli.main(["memory", "training", "--model", "gpt3-xl", "--json"]) == 0
    err = capsys.readouterr().err
    assert err == ("wsesim: warning: training.seq_len of 4,096 tokens is beyond gpt3-xl's context of 2,048 "
                   "tokens (model.context_len): simulated as asked, but the model was not made for it\n")
    assert cli.main(["memory", "training", "--model", "gpt3-xl", "--set", "training.seq_len=2048",
                     "--json"]) == 0
    assert capsys.readouterr().err == ""


def test_a_sweep_warns_of_each_point_beyond_the_context(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A context of 20 tokens: a request of 16 + 4 - 1 = 19 tokens fits it, 16 + 6 - 1 = 21 does not; the
    warning names that point by its value (the base, the first point, fits). Every point of a sweep is
    checked, not only its base."""
    at = TINY.index("inference.output_len=4")
    tiny = TINY[:at - 1] + TINY[at + 1:]
    code = cli.main(["infer", *tiny, "--set", "model.context_len=20", "--vary", "inference.output_len=4,6"])
    assert code == 0
    err = capsys.readouterr().err.splitlines()[-1]  # after the progress lines
    assert err == ("wsesim: warning: sweep point {inference.output_len=6}: a request's prompt and output "
                   "(inference.prompt_len + output_len - 1) of 21 tokens is beyond tiny-moe's context of 20 "
                   "tokens (model.context_len): simulated as asked, but the model was not made for it")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"kind: sweep\nname: ctx\nbase: {REPO / 'workloads/qwen3-30b-a3b/experiment.yaml'}\n"
                     "grid:\n  training.seq_len: [32, 64]\n")
    assert cli.main(["sweep", str(sweep), "--set", "hardware=tiny8", "--set", "model=tiny-moe", "--set",
                     "model.context_len=20", "--set", "simulation.granularity=pe", "--workers", "1",
                     "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "warning" in line] == [
        "wsesim: warning: sweep point {training.seq_len=32}: training.seq_len of 32 tokens is beyond "
        "tiny-moe's context of 20 tokens (model.context_len): simulated as asked, but the model was not made "
        "for it", "wsesim: warning: sweep point {training.seq_len=64}: training.seq_len of 64 tokens is "
        "beyond tiny-moe's context of 20 tokens (model.context_len): simulated as asked, but the model was "
        "not made for it"]
