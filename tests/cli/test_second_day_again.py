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


# ------------------------------------------------------------------------------------------------- help


def _parsers() -> dict[str, Any]:
    """Every parser of the command line by its command words ("" the top level, "memory training")."""
    import argparse

    from wsesim.cli.main import build_parser

    found: dict[str, Any] = {}

    def walk(name: str, p: argparse.ArgumentParser) -> None:
        found[name] = p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(f"{name} {sub}".strip(), child)

    walk("", build_parser())
    return found


def test_the_help_says_what_wsesim_does_and_run_names_its_keys() -> None:
    parsers = _parsers()
    top = parsers[""].format_help()
    assert "Simulate MoE training on wafer-scale processors." not in top
    assert all(word in top for word in ("training step", "serving", "kernels", "clusters"))
    run = parsers["run"].format_help()
    assert all(word in run for word in ("training.global_batch", "cluster.systems", "simulation.moe_mapping",
                                        "config.json"))


def test_every_command_shows_an_example_that_parses() -> None:
    """Each command (and the top level) ends its help with examples; each is a command line the parser
    takes as it stands."""
    import shlex

    from wsesim.cli.main import build_parser

    parsers = _parsers()
    commands = [name for name in parsers if " " not in name]
    for name in commands:
        text = parsers[name].format_help()
        assert "\nexample:\n  wsesim " in text or "\nexamples:\n  wsesim " in text, name
        block = text.split("example", 1)[1].split("\n", 1)[1]
        for line in (ln.strip() for ln in block.splitlines() if ln.startswith("  wsesim ")):
            words = shlex.split(line)[1:]
            assert not name or words[0] == name, line
            build_parser().parse_args(words)  # a usage error exits


def test_no_help_or_schema_text_shows_rst_and_pdf_is_named_with_svg(tmp_path: Path) -> None:
    for name, p in _parsers().items():
        text = p.format_help()
        assert "``" not in text, name
        assert "SVG" not in text or "PDF" in text, name
    assert cli.main(["schema", "--out", str(tmp_path)]) == 0
    for path in tmp_path.glob("*.schema.json"):
        assert "``" not in path.read_text(encoding="utf-8"), path.name


# ------------------------------------------------------------------------------------------- provenance


def test_version_says_when_the_checkout_is_dirty(monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit alone does not say which code ran when tracked files have changes since it."""
    import subprocess

    from wsesim.output import manifest

    real = subprocess.run

    def fake(cmd: list[str], *args: Any, **kwargs: Any) -> Any:
        if cmd[:2] == ["git", "status"]:
            return subprocess.CompletedProcess(cmd, 0, " M wsesim/cli/run.py\n", "")
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", fake)
    assert manifest.version_text().endswith(", dirty: uncommitted changes)")
    assert manifest.manifest("run", [])["wsesim_dirty"] is True


def test_a_sweeps_manifest_carries_its_wall_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep_file(tmp_path / "s.yaml")
    assert cli.main(["sweep", str(path), "--workers", "1", "--out", str(tmp_path / "o")]) == 0
    data = json.loads((tmp_path / "o" / "manifest.json").read_text(encoding="utf-8"))
    assert isinstance(data["wall_s"], float) and data["wall_s"] > 0


def test_dir_of_wsesim_is_its_api() -> None:
    import wsesim

    names = set(dir(wsesim))
    assert not names & {"Any", "annotations", "importlib"}
    assert set(wsesim.__all__) <= names and "__version__" in names


def test_compare_prints_every_number_one_way() -> None:
    """``compare`` printed 8,657.3 as "8657" (``.4g``) beside 11,392 as "11,392"."""
    from wsesim.cli.compare import _num

    assert [_num(v) for v in (8657.3, 11392.0, 1234.5, 12.345, 0.5, None)] == [
        "8,657", "11,392", "1,234", "12.35", "0.5", "-"]


def test_a_grid_key_the_files_points_set_blames_the_grid_flag(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    """``--grid model.top_k=…`` on a file whose points set top_k: the error used to blame the file's
    points[0] "set both here and in grid", a grid the file does not have."""
    path = _sweep_file(tmp_path / "s.yaml", grid={"training.tiles": [1]},
                       points=[{"model.top_k": 1}, {"model.top_k": 2}])
    assert cli.main(["sweep", str(path), "--grid", "model.top_k=1,2", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wsesim: --grid: model.top_k: ") and err.count("\n") == 1
    assert f"{path}: points[0] sets model.top_k" in err
    assert not (tmp_path / "o").exists()


def test_an_infeasible_run_says_why_not_b0(capsys: pytest.CaptureFixture[str]) -> None:
    """An infeasible configuration is a result (exit 0, as sweep, tune and infer treat it): its header
    says no batch fits instead of "B=0 G=1 (global batch 0)", and the next line why."""
    args = ["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
            "--set", "training.seq_len=4096"]
    assert cli.main(args) == 0
    head, why = capsys.readouterr().out.splitlines()[:2]
    assert "B=0" not in head and "global batch 0" not in head and head.endswith("G=1, no batch that fits")
    assert why.startswith("infeasible: batch_per_tile auto: not even B=1 fits (SRAM: ")
    assert cli.main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["feasible"] is False and data["infeasible_reason"].startswith("batch_per_tile auto")


def test_durations_in_a_unit_for_their_size() -> None:
    from wsesim.cli.common import format_duration

    assert [format_duration(s) for s in (4.2e-5, 0.56552, 1.63147, 11.34, 179.49975, 7200.0, 86400.0)] == [
        "42.00 µs", "565.52 ms", "1,631.47 ms", "11.34 s", "179.50 s", "120.00 min", "24.00 h"]


def test_shipped_files_are_found_from_outside_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The README's ``workloads/…`` paths from a folder without ``workloads/``: the copy shipped with
    wsesim, said on stderr (they were "no such file")."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "workloads/qwen3-30b-a3b/experiment.yaml", "--hardware", "tiny8", "--model",
                     "tiny-moe", "--set", "simulation.granularity=pe", "--set", "training.seq_len=32"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("tiny-moe on tiny8") and "reading the copy shipped with wsesim" in err
    # the sweep is found too (refused for its --set, before anything runs: so it was read)
    assert cli.main(["sweep", "workloads/qwen3-30b-a3b/bta-paper.yaml", "--set", "model.top_k=2"]) == 2
    assert "swept by the sweep" in capsys.readouterr().err
    mine = tmp_path / "workloads" / "qwen3-30b-a3b" / "experiment.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("kind: nonsense\n", encoding="utf-8")  # a file of that name here is the one read
    assert cli.main(["run", "workloads/qwen3-30b-a3b/experiment.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wsesim: workloads/qwen3-30b-a3b/experiment.yaml: ") and "shipped" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["workloads"]


def test_run_writes_nothing_into_a_sweeps_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out`` and ``--png`` were refused there; ``--trace`` was not, and wrote beside the sweep's CSV."""
    path = _sweep_file(tmp_path / "s.yaml")
    folder = tmp_path / "swept"
    assert cli.main(["sweep", str(path), "--workers", "1", "--out", str(folder)]) == 0
    before = sorted(p.name for p in folder.iterdir())
    tiny = ["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
            "--set", "training.seq_len=32"]
    capsys.readouterr()
    for extra in (["--out", str(folder)], ["--png", str(folder)], ["--trace", str(folder / "step.json")]):
        assert cli.main([*tiny, *extra]) == 2
        assert "holds the output of wsesim sweep" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == before
