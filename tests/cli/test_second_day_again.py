"""Issue 29's defects of the training commands (each of these tests fails on the code before the fix)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from wsesim import cli

BASE: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 1},
                        "simulation": {"granularity": "pe"}}


def _sweep_file(path: Path, grid: dict[str, list[Any]] | None = None,
                points: list[dict[str, Any]] | None = None) -> Path:
    data: dict[str, Any] = {"kind": "sweep", "name": "tiny", "base": BASE,
                            "grid": grid if grid is not None else {"model.top_k": [1, 2]}}
    if points is not None:
        data["points"] = points
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _titles(folder: Path) -> list[str]:
    listing = json.loads((folder / "figures.json").read_text(encoding="utf-8"))
    return [f["title"] for f in listing["figures"]] + [listing["phases"]["title"]]


def test_figure_titles_say_the_sweeps_set_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--set simulation.moe_mapping=in_place`` holds for every row but no CSV column says it: the figures
    (and figures.json) of that sweep must not be titled as the default sweep's, and a re-plot of its CSV
    keeps the title (read from the folder's manifest)."""
    path = _sweep_file(tmp_path / "s.yaml")
    default, placed = tmp_path / "default", tmp_path / "in_place"
    assert cli.main(["sweep", str(path), "--workers", "1", "--plot", "--out", str(default)]) == 0
    assert cli.main(["sweep", str(path), "--workers", "1", "--plot", "--out", str(placed),
                     "--set", "simulation.moe_mapping=in_place"]) == 0
    capsys.readouterr()
    assert all("moe_mapping" not in t for t in _titles(default))
    assert all("moe_mapping in_place" in t for t in _titles(placed))
    listing = json.loads((placed / "figures.json").read_text(encoding="utf-8"))
    assert listing["settings"] == {"simulation.moe_mapping": "in_place"}
    assert cli.main(["plot", str(placed / "results.csv"), "--out", str(tmp_path / "again")]) == 0
    assert _titles(tmp_path / "again") == _titles(placed)
