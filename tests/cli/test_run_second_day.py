"""Issue 20's defects of ``wsesim run`` (each of these tests fails on the code before the fix): dense runs
say nothing of experts, in text or pictures; results record how they were simulated; ``--version`` and
manifests name the commit; a replaced ``--hardware`` or ``--model`` is blamed for its own errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from wsesim import cli

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
        "--set", "training.seq_len=32"]
DENSE = [*TINY, "--set", "model.experts=0", "--set", "model.top_k=0", "--set", "model.expert_intermediate=0",
         "--set", "model.ffn_intermediate=64"]
ROOT = Path(__file__).resolve().parents[2]


def test_a_dense_run_prints_nothing_about_experts(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", *DENSE]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tiny-moe on tiny8: dense seq_len=32 ")
    assert "E=0" not in out and "top_k" not in out and "expert load imbalance" not in out
    assert cli.main(["run", *TINY]) == 0  # an MoE run still shows them
    out = capsys.readouterr().out
    assert "E=4 top_k=2" in out and "expert load imbalance" in out


def test_a_dense_run_draws_no_pictures_of_experts_and_says_why(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", *DENSE, "--png", str(tmp_path / "pics")]) == 0
    out, err = capsys.readouterr()
    assert sorted(p.name for p in (tmp_path / "pics").glob("*.png")) == ["gantt.png", "wafer_busy.png",
                                                                          "wafer_sram.png"]
    assert err.startswith("wsesim: left out wafer_links.png, wafer_placement.png: the model has no experts")
    assert "wafer_placement" not in out


def test_a_result_records_how_it_was_simulated(tmp_path: Path) -> None:
    assert cli.main(["run", *TINY, "--set", "simulation.placement=snake", "--set", "simulation.moe_mapping=in_place",
                     "--out", str(tmp_path / "o")]) == 0
    result = json.loads((tmp_path / "o" / "result.json").read_text(encoding="utf-8"))
    assert {k: result[k] for k in ("moe_mapping", "engine", "granularity", "placement", "compute")} == {
        "moe_mapping": "in_place", "engine": "fast", "granularity": "pe", "placement": "snake", "compute": "constant"}


def test_a_manifest_names_the_commit(tmp_path: Path) -> None:
    assert cli.main(["run", *TINY, "--out", str(tmp_path / "o")]) == 0
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text(encoding="utf-8"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip()
    assert commit and manifest["wsesim_commit"] == commit


def test_hardware_that_cannot_take_the_experiments_granularity_names_the_flag_and_the_fix(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--hardware", "tiny8", "--model", "tiny-moe"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wsesim: --hardware: simulation.granularity: expected a block of at most half")
    assert "add --set simulation.granularity=pe" in err and err.count("\n") == 1
    # set on the command line, the same rule is --set's error, as before
    assert cli.main(["run", "--hardware", "tiny8", "--set", "simulation.granularity=block:16"]) == 2
    assert capsys.readouterr().err.startswith("wsesim: --set: simulation:")


@pytest.mark.parametrize(("flag", "kind"), [("--model", "model"), ("--hardware", "hardware")])
def test_a_bad_name_is_blamed_on_the_flag(flag: str, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", flag, "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"wsesim: {flag}: expected a {kind} preset (") and "experiment.yaml" not in err


def test_a_relative_model_path_is_the_working_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mine.yaml").write_text((ROOT / "workloads" / "tiny-moe.yaml").read_text().replace(
        "name: tiny-moe", "name: mine"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", *TINY[:2], "--model", "mine.yaml", *TINY[4:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "mine"
