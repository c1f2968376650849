"""Issue 40: a request trace as an input of a sweep and a manifest (its contents, not only its path), and
the paths a serving experiment names (``inference.load.file``, ``inference.speculative.draft``) read from the
folder of whoever gave them: ``--set`` the working folder, a file (or a sweep's grid) that file's."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from wsesim import cli
from wsesim.config.inference import load_inference

SERVE: dict[str, Any] = {"kind": "inference", "name": "tiny-serve", "hardware": "tiny8", "model": "tiny-moe",
                         "inference": {"load": {"prompt_len": 16, "output_len": 4, "arrival": "trace"}}}
ROOMY = ["--set", "hardware.pe.sram=1 MiB"]


def _trace(path: Path, output_len: int) -> Path:
    path.write_text("arrival_s,prompt_len,output_len\n" + "".join(f"{i / 1000},16,{output_len}\n"
                                                                  for i in range(6)))
    return path


def _sweep(folder: Path, trace: str = "t.csv") -> Path:
    data = {"kind": "sweep", "name": "serve", "base": SERVE,
            "grid": {"inference.load.file": [trace], "inference.scheduler.batch": [1, 2]}}
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_a_sweep_grid_trace_is_the_sweep_files_and_resume_reruns_an_edited_trace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The grid's ``t.csv`` beside the sweep file (the working folder elsewhere: it was looked up there).
    Then the trace's contents change under the same path: ``--resume`` kept every row ("0 to run") though a
    fresh run differs; the point's key holds the contents' SHA-256, so every point runs again."""
    folder, elsewhere = tmp_path / "study", tmp_path / "elsewhere"
    folder.mkdir(), elsewhere.mkdir()
    sweep = _sweep(folder)
    _trace(folder / "t.csv", 4)
    monkeypatch.chdir(elsewhere)
    out = tmp_path / "out"
    assert cli.main(["sweep", str(sweep), "--out", str(out), *ROOMY]) == 0
    before = _rows(out)
    assert [r["status"] for r in before] == ["ok", "ok"]
    _trace(folder / "t.csv", 8)  # same path, other contents
    assert cli.main(["sweep", str(sweep), "--out", str(out), "--resume", *ROOMY]) == 0
    resumed = _rows(out)
    fresh = tmp_path / "fresh"
    assert cli.main(["sweep", str(sweep), "--out", str(fresh), *ROOMY]) == 0
    capsys.readouterr()
    changed = [k for k in resumed[0] if k not in ("wall_s",) and resumed[0][k] != before[0][k]]
    assert "point_key" in changed and "tokens_per_s" in changed
    for a, b in zip(resumed, _rows(fresh), strict=True):
        assert {k: v for k, v in a.items() if k != "wall_s"} == {k: v for k, v in b.items() if k != "wall_s"}


def test_the_manifest_records_the_traces_checksum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import hashlib

    monkeypatch.chdir(tmp_path)
    trace = _trace(tmp_path / "t.csv", 4)
    out = tmp_path / "run"
    assert cli.main(["infer", "--hardware", "tiny8", "--model", "tiny-moe", *ROOMY, "--set", "inference.load.prompt_len=16",
                     "--set", "inference.load.arrival=trace", "--set", "inference.load.file=t.csv", "--out", str(out)]) == 0
    capsys.readouterr()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["trace_sha256"] == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert manifest["experiment"]["inference"]["load"]["file"] == str(trace.resolve())


def test_a_draft_set_on_the_command_line_is_the_working_folders(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``--set inference.speculative.draft=./d.yaml`` was looked up beside the shipped serve.yaml."""
    (tmp_path / "d.yaml").write_text(_draft_text())
    monkeypatch.chdir(tmp_path)
    loaded = load_inference(overrides={"inference.speculative.draft": "./d.yaml",
                                       "inference.speculative.tokens": 2,
                                       "inference.speculative.acceptance": 0.8})
    assert loaded.spec.inference.speculative.draft.name == "my-draft"


def _draft_text() -> str:
    from wsesim.config.loader import _preset_files

    data = yaml.safe_load(Path(_preset_files("model")["llama3.2-1b"]).read_text())
    data["name"] = "my-draft"
    return yaml.safe_dump(data, sort_keys=False)


@pytest.mark.parametrize(("command", "flag"), [(["infer"], "--vary"), (["sweep", "x.yaml"], "--grid")])
def test_vary_refuses_a_value_given_twice(command: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``--vary inference.scheduler.batch=1,2,1`` served the first value twice; ``sweep --grid`` reads its pairs with the
    same parser, so it refuses the same (before the sweep file is read)."""
    assert cli.main([*command, flag, "inference.scheduler.batch=1,2,1"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"wsesim: {flag}: inference.scheduler.batch: expected each value once, got '1' twice in "
                   "'inference.scheduler.batch=1,2,1' (its point would run twice)"]


def test_a_later_run_into_the_folder_removes_an_earlier_searchs_candidates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 (low): candidates.json from an earlier ``--search`` stayed beside a plain run's result.json."""
    tiny = ["infer", "--hardware", "tiny8", "--model", "tiny-moe", *ROOMY, "--set", "inference.load.prompt_len=16",
            "--out", str(tmp_path / "o")]
    assert cli.main([*tiny, "--search"]) == 0
    assert (tmp_path / "o" / "candidates.json").is_file()
    assert cli.main(tiny) == 0
    capsys.readouterr()
    assert not (tmp_path / "o" / "candidates.json").exists()
    assert "candidates.json" not in json.loads((tmp_path / "o" / "manifest.json").read_text())["files"]


def test_the_1b_draft_has_its_context(capsys: pytest.CaptureFixture[str]) -> None:
    """``model list`` showed LLaMA 3.2 1B's context as "-": its preset now says 131,072 (its config.json)."""
    assert cli.main(["model", "list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("llama3.2-1b"))
    assert "131,072" in row


def test_search_refuses_a_grid_it_would_ignore(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 (low): ``--search --set inference.grid=420x420`` searched every grid, the one set lost."""
    assert cli.main(["infer", "--search", "--set", "inference.grid=420x420"]) == 2
    assert capsys.readouterr().err == (
        "wsesim: --search: expected inference.grid: auto with --search (it tries every grid that tiles the "
        "wafer), got grid 420x420 from --set inference.grid: leave out one or the other\n")
