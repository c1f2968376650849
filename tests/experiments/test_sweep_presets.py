"""Sweeps over anything a run takes (issue 20): the hardware and the model by preset name or file in a
sweep's ``grid`` and ``points``, ``--set`` and ``--grid`` on ``wsesim sweep``, the preset names as CSV
columns and as the figures' series. Once a point ``{hardware: wse3}`` was refused: "expected a mapping"."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from wsesim import cli
from wsesim.config.loader import _preset_files, shipped_file
from wsesim.experiments.sweep import load_sweep

GPT3_XL = str(shipped_file("gpt3-xl/experiment.yaml"))


def _sweep(path: Path, grid: dict[str, Any] | None = None, points: list[dict[str, Any]] | None = None) -> Path:
    data: dict[str, Any] = {"kind": "sweep", "name": path.stem, "base": GPT3_XL}
    if grid:
        data["grid"] = grid
    if points:
        data["points"] = points
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / "results.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _series(folder: Path, stem: str) -> list[str]:
    figures = json.loads((folder / "figures.json").read_text(encoding="utf-8"))["figures"]
    [figure] = [f for f in figures if f["stem"] == stem]
    return [s["label"] for panel in figure["panels"] for s in panel["series"]]


FOUR = {("wse2", "llama-7b"), ("wse2", "gpt-j-6b"), ("wse3", "llama-7b"), ("wse3", "gpt-j-6b")}


def test_hardware_by_model_from_one_file_four_series_by_name(tmp_path: Path) -> None:
    path = _sweep(tmp_path / "machines.yaml", grid={"hardware": ["wse2", "wse3"], "model": ["llama-7b", "gpt-j-6b"],
                                                    "training.seq_len": [1024, 2048]})
    out = tmp_path / "out"
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1", "--plot"]) == 0
    rows = _rows(out)
    assert {(r["hardware"], r["model"]) for r in rows} == FOUR and len(rows) == 8
    assert all(r["status"] == "ok" for r in rows)
    assert {(r["set:hardware"], r["set:model"]) for r in rows} == FOUR
    by = {(r["hardware"], r["model"], r["seq_len"]): float(r["throughput_tokens_per_s"]) for r in rows}
    assert by[("wse3", "llama-7b", "2048")] > by[("wse2", "llama-7b", "2048")]  # the machines really differ
    labels = _series(out, "throughput_vs_seq_len")
    assert len(labels) == 4
    for hardware, model in FOUR:
        assert sum(hardware in label and model in label for label in labels) == 1, labels


def test_grid_on_the_command_line_gives_the_same_rows(tmp_path: Path) -> None:
    path = _sweep(tmp_path / "models.yaml", grid={"model": ["llama-7b", "gpt-j-6b"]})
    out = tmp_path / "out"
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1", "--grid", "hardware=wse2,wse3"]) == 0
    rows = _rows(out)
    assert {(r["hardware"], r["model"]) for r in rows} == FOUR
    file_sweep = _sweep(tmp_path / "both.yaml", grid={"model": ["llama-7b", "gpt-j-6b"], "hardware": ["wse2", "wse3"]})
    assert cli.main(["sweep", str(file_sweep), "--out", str(tmp_path / "both"), "--workers", "1"]) == 0
    assert sorted(r["throughput_tokens_per_s"] for r in rows) == sorted(
        r["throughput_tokens_per_s"] for r in _rows(tmp_path / "both"))


def test_points_name_a_hardware_a_model_or_a_model_file(tmp_path: Path) -> None:
    model = tmp_path / "small.yaml"
    model.write_text(_preset_files("model")["gpt3-xl"].read_text(encoding="utf-8"), encoding="utf-8")
    path = _sweep(tmp_path / "points.yaml", points=[{"hardware": "wse3"}, {"model": "gpt-j-6b"},
                                                    {"model": str(model)}])
    sweep = load_sweep(path)
    out = tmp_path / "out"
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 0
    rows = _rows(out)
    assert [(r["hardware"], r["model"], r["status"]) for r in rows] == [
        ("wse3", "gpt3-xl", "ok"), ("wse2", "gpt-j-6b", "ok"), ("wse2", "gpt3-xl", "ok")]
    # the resume key follows what a name resolves to: editing the model file changes that point only
    before = [p.key for p in sweep.points]
    model.write_text(model.read_text(encoding="utf-8").replace("layers: 24", "layers: 12"), encoding="utf-8")
    after = [p.key for p in load_sweep(path).points]
    assert before[:2] == after[:2] and before[2] != after[2]


def test_set_on_sweep_applies_to_every_point_and_refuses_a_swept_key(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep(tmp_path / "s.yaml", grid={"model": ["llama-7b", "gpt-j-6b"]})
    out = tmp_path / "out"
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1", "--set", "hardware=wse3",
                     "--set", "training.seq_len=1024"]) == 0
    rows = _rows(out)
    assert {(r["hardware"], r["seq_len"]) for r in rows} == {("wse3", "1024")}
    capsys.readouterr()
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1", "--set", "model=gpt3-xl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["wsesim: --set: model: model is set here and swept by the sweep (as model): set it in one place"]
    assert cli.main(["sweep", str(path), "--out", str(out), "--grid", "hardware=wse9"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("wsesim: --grid: ") and "'wse9'" in line


def test_set_model_on_run_names_a_preset() -> None:
    from wsesim.cli.common import parse_overrides
    from wsesim.config.loader import load_experiment

    spec = load_experiment(GPT3_XL, overrides=parse_overrides(["model=gpt-j-6b", "model.layers=2"])).spec
    assert (spec.model.name, spec.model.layers) == ("gpt-j-6b", 2)
