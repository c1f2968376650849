"""The Python API (wsesim/__init__.py, wsesim.experiments.api): errors that speak to a Python caller,
and results as a pandas DataFrame (issue 12 item 18); ``dir(wsesim)`` is the API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import wsesim
from wsesim import cli
from wsesim.config.errors import ConfigError
from wsesim.experiments.sweep import sweep_from_data
from wsesim.experiments.table import csv_text

BASE: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 1},
                        "simulation": {"granularity": "pe"}}


@pytest.mark.parametrize(("call", "expected"), [
    (lambda: wsesim.load_experiment(overrides={"model.top_k": 999}), "overrides: model.top_k: expected "),
    (lambda: wsesim.load_experiment(overrides={"model.expert": 64}),
     'overrides: model.expert: unknown key; did you mean "experts"?'),
    (lambda: wsesim.load_experiment_data(BASE, overrides={"hardware.pe.sram": 96}),
     'overrides: hardware.pe.sram: expected a size like "48 KiB", got 96 (a bare number)'),
    (lambda: wsesim.load_experiment_data(BASE, overrides={"model.experts": 1, "model.top_k": 2}),
     "overrides: model.top_k: expected at most experts (1), got 2"),
    (lambda: wsesim.load_hardware("tiny8", {"pe.sram": "1 B"}), "overrides: pe.sram: expected a size from"),
    (lambda: wsesim.load_model("tiny-moe", {"experts": 100_000}), "overrides: experts: expected a value ≤ 65536"),
], ids=["bound", "misspelt", "bare-number", "cross-field", "hardware", "model"])
def test_an_override_error_names_the_key_not_the_command_line(call: Any, expected: str) -> None:
    """A Python caller never typed --set: the error says overrides and the key."""
    with pytest.raises(ConfigError) as info:
        call()
    assert str(info.value).startswith(expected)
    assert "--set" not in str(info.value)


def test_the_command_line_still_says_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "model.expert=1"]) == 2
    assert capsys.readouterr().err.startswith("wsesim: --set: model.expert: unknown key")


@pytest.fixture(scope="module")
def sweep_rows() -> list[dict[str, Any]]:
    sweep = sweep_from_data(
        {"kind": "sweep", "name": "api", "base": BASE,
         "points": [{"model.top_k": 1}, {"model.top_k": 2}, {"training.batch_per_tile": 5000}]},
        source="<test>", base_dir=None)
    return wsesim.run_sweep(sweep)


def test_results_frame_of_sweep_rows_and_of_its_csv(sweep_rows: list[dict[str, Any]], tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    rows = wsesim.results_frame(sweep_rows)
    assert len(rows) == 3 and "phase_attention_cycles" in rows.columns and "phases" not in rows.columns
    path = tmp_path / "results.csv"
    path.write_text(csv_text(sweep_rows, ["model.top_k", "training.batch_per_tile"]), encoding="utf-8")
    frame = wsesim.results_frame(path)
    assert list(frame["status"]) == ["ok", "ok", "infeasible"]
    assert pd.api.types.is_float_dtype(frame["throughput_tokens_per_s"])
    assert frame["throughput_tokens_per_s"].isna().tolist() == [False, False, True]  # not run: NaN, not 0
    assert pd.api.types.is_integer_dtype(frame["experts"]) and frame["tuned"].tolist() == [False] * 3
    assert frame.loc[0, "phase_experts_cycles"] == pytest.approx(float(sweep_rows[0]["phase_experts_cycles"]))


def test_results_frame_of_runs_and_of_a_tuning() -> None:
    pytest.importorskip("pandas")
    loaded = wsesim.load_experiment_data(BASE)
    one = wsesim.results_frame(wsesim.run_experiment(loaded.spec))
    assert len(one) == 1 and one.loc[0, "phase_attention_cycles"] > 0
    tuned = wsesim.tune(loaded)
    frame = wsesim.results_frame(tuned)
    assert len(frame) == len(tuned.candidates) and frame["best"].sum() == 1
    assert frame.loc[frame["best"], "tiles"].item() == tuned.best.tiles
    with pytest.raises(TypeError, match="expected a results.csv path"):
        wsesim.results_frame(3)


def test_the_readme_python_api_uses_what_wsesim_exports() -> None:
    """The README's Python API block compiles, every wsesim.NAME in it is exported, and its example error
    is the one the loader gives."""
    import ast
    import re

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = text.split("### Python API", 1)[1].split("\n### ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    tree = ast.parse(block)
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "wsesim"}
    assert used and used <= set(wsesim.__all__)
    [quoted] = re.findall(r"`(overrides: model\.top_k: [^`]*)`", section)
    with pytest.raises(ConfigError) as info:
        wsesim.load_experiment(overrides={"model.experts": 8, "model.top_k": 9})
    assert str(info.value) == quoted


TINY_BTA = """kind: sweep
name: bta-paper
base: experiment.yaml
points:
  - {model.experts: 8, model.top_k: 8}
  - {model.experts: 16, model.top_k: 8}
grid:
  training.tiles: [1]
"""


@pytest.mark.parametrize("how", ["file", "stdin"])
def test_the_readme_python_api_runs_as_written(tmp_path: Path, how: str) -> None:
    """Issue 20: the README's block, pasted into a script (no ``if __name__`` guard) or into ``python -``,
    once crashed in run_sweep(..., workers=2): spawned workers re-ran the caller's top level (or looked for
    a file named "<stdin>") and the pool broke. The block runs unchanged here, in a folder where the
    BTA sweep is a two-point one (the real one takes a minute) and the Quickstart's sweep has been run."""
    import re
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    text = (root / "README.md").read_text(encoding="utf-8")
    section = text.split("### Python API", 1)[1].split("\n### ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert "workers=2" in block
    folder = tmp_path / "workloads" / "qwen3-30b-a3b"
    folder.mkdir(parents=True)
    shutil.copy(root / "workloads" / "qwen3-30b-a3b" / "experiment.yaml", folder)
    (folder / "bta-paper.yaml").write_text(TINY_BTA, encoding="utf-8")
    sweep = subprocess.run([sys.executable, "-m", "wsesim", "sweep", "workloads/qwen3-30b-a3b/bta-paper.yaml",
                            "--workers", "1"], cwd=tmp_path, capture_output=True, text=True)
    assert sweep.returncode == 0, sweep.stderr
    assert (tmp_path / "out" / "bta-paper" / "results.csv").is_file()
    if how == "file":
        (tmp_path / "snippet.py").write_text(block, encoding="utf-8")
        r = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True, text=True)
    else:
        r = subprocess.run([sys.executable, "-"], input=block, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "BrokenProcessPool" not in r.stderr and "Traceback" not in r.stderr
    [g1] = [line.split() for line in r.stdout.splitlines() if line.startswith("False")]  # the groupby's row
    assert float(g1[1]) > 0  # the best G=1 throughput of the two points


def test_the_api_finds_the_shipped_workloads_from_another_folder(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 40: ``wsesim.load_sweep("workloads/...")`` and friends said "no such file" outside the checkout,
    though the command line reads the copy shipped with wsesim; they read it too."""
    monkeypatch.chdir(tmp_path)
    sweep = wsesim.load_sweep("workloads/llama3-8b/serve-vs-load.yaml")
    assert sweep.spec.name == "serve-vs-load" and len(sweep.points) == 16
    assert wsesim.load_experiment("workloads/qwen3-30b-a3b/experiment.yaml").spec.model.name.startswith("qwen3")
    assert wsesim.load_inference("workloads/llama3-8b/serve.yaml").spec.inference.scheduler.batch >= 1
    with pytest.raises(ConfigError, match="workloads/nowhere.yaml"):
        wsesim.load_sweep("workloads/nowhere.yaml")


def test_a_workloads_file_here_is_read_before_the_shipped_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "workloads" / "llama3-8b").mkdir(parents=True)
    (tmp_path / "workloads" / "llama3-8b" / "serve.yaml").write_text(
        "kind: inference\nhardware: tiny8\nmodel: tiny-moe\ninference:\n  scheduler:\n    batch: 3\n", encoding="utf-8")
    loaded = wsesim.load_inference("workloads/llama3-8b/serve.yaml")
    assert loaded.spec.inference.scheduler.batch == 3 and loaded.spec.model.name == "tiny-moe"


def test_dir_of_wsesim_is_its_api() -> None:
    import wsesim

    names = set(dir(wsesim))
    assert not names & {"Any", "annotations", "importlib"}
    assert set(wsesim.__all__) <= names and "__version__" in names
