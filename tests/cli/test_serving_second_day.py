"""Issue 29, part A: serving as usable as training on the second day. ``infer --vary`` over a categorical key
and a number with ``--out`` (figures, no internal error); hardware and model set and varied by name or file
(a file the working folder's, an error the flag's); ``--search --objective``; the mapping each point was
served on, in the figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from wsesim import cli
from wsesim.analysis.serving_plans import mapping_text, plan_serving
from wsesim.cli.infer import OBJECTIVES as CLI_OBJECTIVES
from wsesim.experiments.inference import OBJECTIVES
from wsesim.experiments.table import read_results_table

REPO = Path(__file__).parents[2]
TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.prompt_len=16",
        "--set", "inference.output_len=4", "--set", "hardware.pe.sram=1 MiB"]


def test_vary_a_categorical_key_and_a_number_into_a_folder_draws_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29 High 1: kv_layout (shift, concat) is a category on its axis, the batch a number."""
    out = tmp_path / "o"
    assert cli.main(["infer", *TINY, "--vary", "inference.kv_layout=shift,concat", "--vary",
                     "inference.batch=1,2", "--out", str(out)]) == 0
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
                                     "grid": {"inference.batch": [1]}}), encoding="utf-8")
    sets = [a for s in ("hardware=tiny8", *TINY[5::2]) for a in ("--set", s)]
    assert cli.main(["sweep", str(sweep), *sets, "--grid", "model=./m.yaml", "--out", "g"]) == 0
    [row] = read_results_table(tmp_path / "c" / "g" / "results.csv")[1]
    assert (row["set:model"], row["model"]) == ("./m.yaml", "tiny-moe-other")


def test_vary_and_set_hardware_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", "--vary", "hardware=wse2,wse3", "--set", "inference.prompt_len=256",
                     "--set", "inference.output_len=2", "--json"]) == 0
    assert [r["hardware"] for r in json.loads(capsys.readouterr().out)] == ["wse2", "wse3"]
    assert cli.main(["infer", "--set", "hardware=wse3", "--set", "inference.prompt_len=256",
                     "--set", "inference.output_len=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hardware"] == "wse3"


@pytest.mark.parametrize(("argv", "line"), [
    (["infer", "--set", "model=nope"], "wsesim: --set: model: expected a model preset ("),
    (["infer", "--set", "hardware=./nope.yaml"], "wsesim: --set: hardware: no such file "),
    (["run", "--set", "model=nope"], "wsesim: --set: model: expected a model preset ("),
    (["infer", "--vary", "hardware=wse2,nope"], "wsesim: --vary: point 1 {hardware=nope}: hardware: expected"),
    (["infer", "--set", "inference.grid=420x420", "--objective", "ttft"],
     "wsesim: --objective: expected --objective with --search or inference.grid: auto"),
    (["infer", "--vary", "inference.batch=1,2", "--objective", "ttft"],
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
    argv = ["infer", "--set", "inference.prompt_len=256", "--set", "inference.output_len=4", "--set",
            "inference.batch=4", "--search", "--out", str(out)]
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
    assert cli.main(["infer", *TINY, "--set", "inference.grid=8x8", "--vary", "inference.batch=1,2",
                     "--out", str(out)]) == 0
    header, rows = read_results_table(out / "results.csv")
    [plan] = plan_serving(header, rows)
    assert plan.mapping == "1 × 8², 1 wafer"
    assert plan.title.endswith(", mapping 1 × 8², 1 wafer")
    assert {p["mapping"] for s in plan.panels[0].series for p in s.points} == {"1 × 8², 1 wafer"}
    [figure] = json.loads((out / "figures.json").read_text())["figures"]
    assert figure["mapping"] == "1 × 8², 1 wafer"


def test_mapping_text() -> None:
    assert mapping_text({"status": "ok", "grid": "250x250", "stages": "9", "systems": "1"}) == "9 × 250², 1 wafer"
    assert mapping_text({"status": "ok", "grid": "250x497", "stages": "12", "systems": "2"}) == (
        "12 × 250x497, 2 wafers")
    assert mapping_text({"status": "infeasible", "grid": "8x8", "stages": "0", "systems": "0"}) == ""
