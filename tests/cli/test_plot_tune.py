"""``wsesim plot`` of a tune folder (``tune --out DIR``) or its ``candidates.csv``: the figures tune drew,
planned from the CSV alone — the same ``figures.json`` and the same image bytes as tune's own — and with
``--search-systems`` the systems front again; a CSV it cannot draw is one line, exit 2, nothing written."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from wsesim import cli
from wsesim.output.files import folder_lock

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
        "--set", "training.seq_len=32"]
IMAGES = [f"{stem}.{x}" for stem in ("candidates", "systems_front") for x in ("png", "svg", "pdf")]
EXPECTED = "expected a candidates.csv written by wsesim tune --out"


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "manifest.json"}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain ``tune --out`` folder, as tune left it (copied by a test that writes into it)."""
    out = tmp_path_factory.mktemp("tune") / "t"
    assert cli.main(["tune", *TINY, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A ``tune --search-systems 1,2,4 --out`` folder and the search's ``--json``."""
    base = tmp_path_factory.mktemp("search")
    args = ["tune", *TINY, "--set", "training.global_batch=48", "--search-systems", "1,2,4"]
    assert cli.main([*args, "--out", str(base / "s")]) == 0
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli.main([*args, "--json"]) == 0
    return base / "s", json.loads(buf.getvalue())


def _copy(folder: Path, to: Path) -> Path:
    shutil.copytree(folder, to)
    return to


def test_plot_of_a_tune_folder_redraws_tunes_figures_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # "t" both times: figures.json names its source as it was given
    assert cli.main(["tune", *TINY, "--out", "t"]) == 0
    capsys.readouterr()
    folder = tmp_path / "t"
    tune_drew = _snapshot(folder)
    assert set(tune_drew) == {"candidates.csv", "candidates.png", "candidates.svg", "candidates.pdf",
                              "figures.json"}
    for name in tune_drew:
        if name != "candidates.csv":
            (folder / name).unlink()
    assert cli.main(["plot", "t"]) == 0
    assert capsys.readouterr().out == "".join(f"wrote {Path('t') / n}\n" for n in [
        "candidates.png", "candidates.svg", "candidates.pdf", "figures.json", "manifest.json"])
    assert _snapshot(folder) == tune_drew  # figures.json and every image: the same bytes as tune wrote
    figures = json.loads((folder / "figures.json").read_text())
    assert figures["source"] == "t/candidates.csv" and [f["stem"] for f in figures["figures"]] == ["candidates"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["kind"] == "tune"  # tune's own manifest kept, plot's under "also"
    assert manifest["also"]["plot"]["source"] == str((folder / "candidates.csv").resolve())
    assert manifest["also"]["plot"]["files"] == ["candidates.png", "candidates.svg", "candidates.pdf",
                                                 "figures.json"]


def test_plot_of_the_csv_path_into_another_folder_gives_tunes_plans(tuned: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plot", str(tuned / "candidates.csv"), "--out", str(tmp_path / "o"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == [str(tmp_path / "o" / n) for n in ["candidates.png", "candidates.svg", "candidates.pdf",
                                                         "figures.json", "manifest.json"]]
    mine = json.loads((tmp_path / "o" / "figures.json").read_text())
    tunes = json.loads((tuned / "figures.json").read_text())
    assert mine["figures"] == tunes["figures"] and mine["source"] == tunes["source"]
    for name in ("candidates.png", "candidates.svg", "candidates.pdf"):
        assert (tmp_path / "o" / name).read_bytes() == (tuned / name).read_bytes()
    rows = list(csv.DictReader((tuned / "candidates.csv").open(encoding="utf-8")))
    [plan] = mine["figures"]
    points = [p for s in plan["series"] for p in s["points"]]
    assert len(points) == len(rows) and sorted(p["row"] for p in points) == list(range(1, len(rows) + 1))
    assert [p["ring"] for p in points].count("best") == 1
    [best] = [p for p in points if p["ring"] == "best"]
    assert rows[best["row"] - 1]["best"] == "True"
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["kind"] == "plot"


def test_plot_of_a_search_systems_folder_redraws_the_front(searched: tuple[Path, dict[str, Any]], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder, search = searched
    assert cli.main(["plot", str(folder), "--out", str(tmp_path / "o")]) == 0
    assert capsys.readouterr().out.count("wrote ") == len(IMAGES) + 2
    for name in IMAGES:
        assert (tmp_path / "o" / name).read_bytes() == (folder / name).read_bytes()
    mine = json.loads((tmp_path / "o" / "figures.json").read_text())
    assert mine["figures"] == json.loads((folder / "figures.json").read_text())["figures"]
    front = mine["figures"][1]
    assert front["stem"] == "systems_front" and front["title"].startswith("Global batch 48 on each number")
    # each count's best, its efficiency as the search computed it (the CSV's column, not recomputed)
    assert [(p["systems"], p["efficiency_per_system"]) for p in front["points"]] == [
        (e["systems"], e["efficiency"]) for e in search["efficiency"]]
    assert [p["systems"] for p in front["points"] if p["pareto"]] == [
        p["systems"] for p in search["pareto"]]
    assert [p["systems"] for p in front["points"] if p["best"]] == [search["best"]["systems"]]
    rows = list(csv.DictReader((folder / "candidates.csv").open(encoding="utf-8")))
    assert all((r["efficiency_per_system"] == "") == (r["feasible"] == "False") for r in rows)


def _candidates(tuned: Path, edit: str) -> str:
    text = (tuned / "candidates.csv").read_text(encoding="utf-8")
    header, first = text.splitlines()[:2]
    if edit == "empty":
        return ""
    if edit == "header only":
        return header + "\n"
    if edit == "no tiles":
        rows = list(csv.DictReader(io.StringIO(text)))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, [c for c in rows[0] if c not in ("tiles", "feasible")], lineterminator="\n",
                                extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        return buf.getvalue()
    rows = list(csv.DictReader(io.StringIO(text)))
    column, value = {"bad number": ("cluster_throughput_tokens_per_s", "1.2.3"),
                     "bad flag": ("feasible", "maybe")}[edit]
    rows[1][column] = value
    buf = io.StringIO()
    writer = csv.DictWriter(buf, list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


@pytest.mark.parametrize(("edit", "says"), [
    ("empty", "got an empty file"),
    ("header only", "got its header and no candidates"),
    ("no tiles", "got a CSV without the columns tiles, feasible"),
    ("bad number", "got a row it cannot read (row 2: expected a number for cluster_throughput_tokens_per_s, "
                   "got '1.2.3')"),
    ("bad flag", "got a row it cannot read (row 2: expected True or False for feasible, got 'maybe')"),
])
def test_a_csv_it_cannot_draw_is_one_line_and_nothing_is_written(edit: str, says: str, tuned: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    path = folder / "candidates.csv"
    path.write_text(_candidates(tuned, edit), encoding="utf-8")
    for given in (folder, path):
        assert cli.main(["plot", str(given)]) == 2
        assert cli.main(["plot", str(given), "--out", str(tmp_path / "o")]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err == f"wsesim: {path}: {EXPECTED}, {says}\n" * 2
    assert [p.name for p in folder.iterdir()] == ["candidates.csv"] and not (tmp_path / "o").exists()


def test_a_renamed_candidates_csv_is_known_by_its_columns(tuned: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(tuned / "candidates.csv", tmp_path / "g-sweep.csv")
    assert cli.main(["plot", str(tmp_path / "g-sweep.csv")]) == 0
    assert "wrote" in capsys.readouterr().out and (tmp_path / "candidates.png").read_bytes() == (
        tuned / "candidates.png").read_bytes()


def test_plot_waits_for_a_tune_still_writing_its_folder(tuned: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = _copy(tuned, tmp_path / "t")
    before = _snapshot(folder)
    with folder_lock(folder, "wsesim tune --out t"):
        assert cli.main(["plot", str(folder)]) == 2
    assert capsys.readouterr().err == (f"wsesim: {folder}: another wsesim is writing to this folder "
                                       f"(pid {os.getpid()}: wsesim tune --out t); plot when it has finished\n")
    assert _snapshot(folder) == before
    (tmp_path / "o" / "figures.json").mkdir(parents=True)  # a folder where figures.json is to be written
    assert cli.main(["plot", str(folder), "--out", str(tmp_path / "o")]) == 2
    assert "figures.json" in capsys.readouterr().err and not (tmp_path / "o" / "candidates.png").exists()


def test_an_older_search_csv_without_efficiencies_draws_its_candidates_and_says_the_front_is_left_out(
        searched: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, _ = searched
    rows = list(csv.DictReader((folder / "candidates.csv").open(encoding="utf-8")))
    older = tmp_path / "older.csv"
    with older.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, [c for c in rows[0] if c != "efficiency_per_system"], lineterminator="\n",
                                extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    assert cli.main(["plot", str(older), "--out", str(tmp_path / "o")]) == 0
    out, err = capsys.readouterr()
    assert "systems_front" not in out and "candidates.png" in out
    assert err.startswith("wsesim: left out systems_front.png: this --search-systems CSV has no "
                          "efficiency_per_system column")
    listing = json.loads((tmp_path / "o" / "figures.json").read_text())
    assert [f["stem"] for f in listing["figures"]] == ["candidates"]
    assert set(listing["left_out"]) == {"systems_front"}
