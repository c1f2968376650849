"""``wsesim infer`` (wsesim.cli.infer), in-process: the human view, ``--json`` with its top-level keys,
a model that does not fit, ``--out`` with its ops.csv, ``--vary`` with its CSV and figures (over a
categorical key and a number; hardware and model by name or by a file of the working folder; the mapping
each point was served on), ``--search`` and its objectives, a sequence beyond the model's context warned
of, and bad input (an error blames the flag that gave the value)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from wsesim import cli
from wsesim.analysis.serving_plans import mapping_text, plan_serving
from wsesim.cli.infer import OBJECTIVES as CLI_OBJECTIVES
from wsesim.experiments.inference import OBJECTIVES
from wsesim.experiments.table import read_results_table

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
        "--set", "inference.load.output_len=4", "--set", "hardware.pe.sram=1 MiB"]
REPO = Path(__file__).parents[2]


def test_the_shipped_example_prints_ttft_tokens_per_s_and_the_bottleneck(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", "--model", "llama3-8b", "--hardware", "wse2"]) == 0
    out = capsys.readouterr().out
    for text in ("time to first token", "tokens/s per request", "bottleneck", "one layer's decode, by op"):
        assert text in out


def test_json_has_the_serving_figures_at_the_top(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", "--set", "inference.grid=420x420", "--set", "inference.load.prompt_len=4096",
                     "--set", "inference.load.output_len=128", "--json"]) == 0
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
    assert cli.main(["infer", *TINY, "--vary", "inference.scheduler.batch=1,2,3", "--vary", "inference.grid=2x2,4x4",
                     "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["set:inference.scheduler.batch"], r["set:inference.grid"], r["grid"]) for r in rows] == [
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
    (["--vary", "inference.scheduler.batch"], "wsesim: --vary: expected KEY=v1,v2,..."),
    (["--set", "inference.kv_layout=paged"], "wsesim: --set: inference.kv_layout:"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], start: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(start) and err.count("\n") == 1


def test_out_and_trace_write_the_result_the_manifest_and_one_span_per_stage_visit(tmp_path: Path) -> None:
    out, trace = tmp_path / "run", tmp_path / "t" / "serve.json"
    assert cli.main(["infer", *TINY, "--set", "inference.grid=2x2", "--set", "inference.layers_per_stage=1",
                     "--set", "inference.scheduler.batch=2", "--set", "inference.scheduler.batching=none",  # a token an iteration
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
            "--vary", "inference.scheduler.batch=1,2"]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.startswith("wsesim: --set: inference.bogus: unknown key")


def test_infer_out_writes_ops_csv(tmp_path: Path) -> None:
    assert cli.main(["infer", *TINY, "--out", str(tmp_path / "o")]) == 0
    header = (tmp_path / "o" / "ops.csv").read_text().splitlines()[0]
    assert header.startswith("stage,wafer,op,kind,layer,dims")
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["files"] == [
        "result.json", "requests.csv", "ops.csv"]


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
    at = TINY.index("inference.load.output_len=4")
    tiny = TINY[:at - 1] + TINY[at + 1:]
    code = cli.main(["infer", *tiny, "--set", "model.context_len=20", "--vary", "inference.load.output_len=4,6"])
    assert code == 0
    err = capsys.readouterr().err.splitlines()[-1]  # after the progress lines
    assert err == ("wsesim: warning: sweep point {inference.load.output_len=6}: a request's prompt and output "
                   "(inference.load.prompt_len + output_len - 1) of 21 tokens is beyond tiny-moe's context of 20 "
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


def test_vary_a_categorical_key_and_a_number_into_a_folder_draws_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29 High 1: kv_layout (shift, concat) is a category on its axis, the batch a number."""
    out = tmp_path / "o"
    assert cli.main(["infer", *TINY, "--vary", "inference.kv_layout=shift,concat", "--vary",
                     "inference.scheduler.batch=1,2", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "internal error" not in captured.err
    figures = {f["stem"]: f for f in json.loads((out / "figures.json").read_text())["figures"]}
    assert figures["serving_vs_kv_layout"]["x_values"] == ["shift", "concat"]
    assert figures["serving_vs_batch"]["x_values"] == ["1", "2"]
    assert {"serving_vs_kv_layout.pdf", "serving_vs_batch.pdf"} <= {p.name for p in out.iterdir()}


def _model_file(folder: Path, name: str = "tiny-moe-copy") -> Path:
    data = yaml.safe_load((REPO / "workloads" / "tiny-moe.yaml").read_text())
    path = folder / "m.yaml"
    path.write_text(yaml.safe_dump({**data, "name": name}), encoding="utf-8")
    return path


def test_vary_model_by_name_and_by_a_file_of_the_working_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29 High 2: ``--vary model=NAME,./FILE`` serves both; the file is the working folder's (as
    ``sweep --grid`` and ``--set`` read one), not the shipped experiment's folder's."""
    monkeypatch.chdir(tmp_path)
    _model_file(tmp_path)
    assert cli.main(["infer", *TINY, "--vary", "model=tiny-moe,./m.yaml", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["model"], r["status"]) for r in rows] == [("tiny-moe", "ok"), ("tiny-moe-copy", "ok")]
    assert rows[0]["tokens_per_s"] == rows[1]["tokens_per_s"]  # the same model under another name


def test_a_file_given_to_vary_or_grid_is_shown_as_written_and_loaded_from_the_working_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 (Low): ``--vary model=./m.yaml`` wrote the file's absolute path into ``set:model`` (and the
    table, the progress lines, ``figures.json``, the manifest and the point's key), so the same sweep run
    from two folders wrote two different CSVs. The value is shown as written and resolved for loading only;
    the point's key follows the file's contents, not its folder."""
    rows = {}
    for folder, name in (("a", "tiny-moe-copy"), ("b", "tiny-moe-copy"), ("c", "tiny-moe-other")):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        _model_file(tmp_path / folder, name)
        out_dir = ["--out", "o"] if folder == "a" else []  # one folder of files (its figures take a while)
        assert cli.main(["infer", *TINY, "--vary", "model=tiny-moe,./m.yaml", *out_dir, "--json"]) == 0
        out, err = capsys.readouterr()
        rows[folder] = json.loads(out)
        assert "model=./m.yaml" in err and str(tmp_path) not in out + err, folder
    files = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "a" / "o").iterdir()
             if p.suffix in (".csv", ".json")}
    assert "results.csv" in files and all(str(tmp_path) not in text for text in files.values())
    assert [r["set:model"] for r in read_results_table(tmp_path / "a" / "o" / "results.csv")[1]] == [
        "tiny-moe", "./m.yaml"]
    assert rows["a"] == rows["b"]  # the same file in another folder: the same rows, keys and all
    assert [r["model"] for r in rows["c"]] == ["tiny-moe", "tiny-moe-other"]  # loaded from c's m.yaml
    assert rows["a"][1]["point_key"] != rows["c"][1]["point_key"]  # other contents, another point
    assert rows["a"][0]["point_key"] == rows["c"][0]["point_key"]
    sweep = tmp_path / "s.yaml"  # wsesim sweep --grid alike
    sweep.write_text(yaml.safe_dump({"kind": "sweep", "base": str(REPO / "workloads/llama3-8b/serve.yaml"),
                                     "grid": {"inference.scheduler.batch": [1]}}), encoding="utf-8")
    sets = [a for s in ("hardware=tiny8", *TINY[5::2]) for a in ("--set", s)]
    assert cli.main(["sweep", str(sweep), *sets, "--grid", "model=./m.yaml", "--out", "g"]) == 0
    [row] = read_results_table(tmp_path / "c" / "g" / "results.csv")[1]
    assert (row["set:model"], row["model"]) == ("./m.yaml", "tiny-moe-other")


def test_vary_and_set_hardware_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", "--vary", "hardware=wse2,wse3", "--set", "inference.load.prompt_len=256",
                     "--set", "inference.load.output_len=2", "--json"]) == 0
    assert [r["hardware"] for r in json.loads(capsys.readouterr().out)] == ["wse2", "wse3"]
    assert cli.main(["infer", "--set", "hardware=wse3", "--set", "inference.load.prompt_len=256",
                     "--set", "inference.load.output_len=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hardware"] == "wse3"


@pytest.mark.parametrize(("argv", "line"), [
    (["infer", "--set", "model=nope"], "wsesim: --set: model: expected a model preset ("),
    (["infer", "--set", "hardware=./nope.yaml"], "wsesim: --set: hardware: no such file "),
    (["run", "--set", "model=nope"], "wsesim: --set: model: expected a model preset ("),
    (["infer", "--vary", "hardware=wse2,nope"], "wsesim: --vary: point 1 {hardware=nope}: hardware: expected"),
    (["infer", "--set", "inference.grid=420x420", "--objective", "ttft"],
     "wsesim: --objective: expected --objective with --search or inference.grid: auto"),
    (["infer", "--vary", "inference.scheduler.batch=1,2", "--objective", "ttft"],
     "wsesim: --vary: expected no --objective with --vary"),
])
def test_an_error_blames_the_flag_that_gave_the_value(argv: list[str], line: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29 High 2: not the shipped experiment file whose reference ``--set`` replaced."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_the_cli_offers_every_objective() -> None:
    assert tuple(OBJECTIVES) == CLI_OBJECTIVES


@pytest.mark.parametrize(("objective", "metric", "sign"), [
    ("tpot", "tokens_per_s_per_request", 1), ("ttft", "ttft_s", -1), ("throughput", "tokens_per_s", 1)])
def test_search_keeps_the_best_candidate_by_its_objective(objective: str, metric: str, sign: int, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29 Medium 7 / deliver 3: the kept mapping is the candidate best at what was asked (LLaMA3-8B on
    a WSE-2 with four short requests: 13 grids fit, and they trade TTFT, TPOT and throughput)."""
    out = tmp_path / "o"
    argv = ["infer", "--set", "inference.load.prompt_len=256", "--set", "inference.load.output_len=4", "--set",
            "inference.scheduler.batch=4", "--search", "--out", str(out)]
    assert cli.main([*argv, "--objective", objective]) == 0
    printed = capsys.readouterr().out
    assert f"kept (--objective {objective}) {OBJECTIVES[objective][0]}" in printed
    best = json.loads((out / "result.json").read_text())
    served = [c for c in json.loads((out / "candidates.json").read_text()) if c["feasible"]]
    assert len({c[metric] for c in served}) > 1  # a real choice
    assert best[metric] == max((c[metric] for c in served), key=lambda v: sign * v)


def test_the_default_objective_is_tokens_per_s_per_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert cli.main(["infer", *TINY, "--search", "--out", str(out)]) == 0
    assert "kept (--objective tpot) the highest tokens/s per request" in capsys.readouterr().out


def test_figures_name_the_mapping_of_every_point(tmp_path: Path) -> None:
    """Issue 29 Medium 7: each served point has its stages × grid and wafers; one mapping for all is the
    title's. The tiny model at batch 1, 2 on an 8×8 grid: one stage on one wafer each."""
    out = tmp_path / "o"
    assert cli.main(["infer", *TINY, "--set", "inference.grid=8x8", "--vary", "inference.scheduler.batch=1,2",
                     "--out", str(out)]) == 0
    header, rows = read_results_table(out / "results.csv")
    [plan] = plan_serving(header, rows)
    assert plan.mapping == "1 × 8², 1 wafer"
    assert plan.title.endswith(", mapping 1 × 8², 1 wafer")
    assert {p["mapping"] for s in plan.panels[0].series for p in s.points} == {"1 × 8², 1 wafer"}
    figure, frontier = json.loads((out / "figures.json").read_text())["figures"]  # a batch sweep: the frontier
    assert figure["mapping"] == "1 × 8², 1 wafer" and frontier["stem"] == "throughput_vs_latency"


def test_mapping_text() -> None:
    assert mapping_text({"status": "ok", "grid": "250x250", "stages": "9", "systems": "1"}) == "9 × 250², 1 wafer"
    assert mapping_text({"status": "ok", "grid": "250x497", "stages": "12", "systems": "2"}) == (
        "12 × 250x497, 2 wafers")
    assert mapping_text({"status": "infeasible", "grid": "8x8", "stages": "0", "systems": "0"}) == ""
