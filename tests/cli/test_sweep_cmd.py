"""``wsesim sweep``, ``wsesim tune`` and ``wsesim plot`` (wsesim.cli.sweep).

Through the real entry point (``python -m wsesim`` in a subprocess, about a second each) for the end to
end runs and the error paths; in-process (``cli.main``, with ``sweep.run_point`` wrapped) where a test
must look at DIR/results.csv between points: streaming, an interrupted sweep, and --resume. Also: the
figures' titles carry the sweep's ``--set`` settings, the manifest its wall time, a ``--grid`` key the
file's points set is the flag's error, and ``run`` writes nothing into a sweep's folder.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from wsesim import cli
from wsesim.analysis.results import WALL_CLOCK_FIELDS
from wsesim.cli.sweep import summary_rows
from wsesim.experiments.sweep import Point
from wsesim.experiments.table import MEASURED_COLUMNS

BASE: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 1},
                        "simulation": {"granularity": "pe"}}
TINY_ARGS = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
             "--set", "training.seq_len=32"]


def _sweep_file(path: Path, grid: dict[str, list[Any]] | None = None,
                points: list[dict[str, Any]] | None = None) -> Path:
    data: dict[str, Any] = {"kind": "sweep", "name": "tiny", "base": BASE}
    data["grid"] = grid if grid is not None else {"training.tiles": [1, "tuned"]}
    data["points"] = points if points is not None else [{"model.top_k": 1}, {"model.top_k": 2}]
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _wsesim(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wsesim", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _tmp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    d = tmp_path / "cwd"
    d.mkdir()
    return d


# ------------------------------------------------------------------------------- through the entry point


def test_sweep_end_to_end_with_plots(tmp_path: Path, cwd: Path) -> None:
    """2 top_k values × (G=1, tuned): four rows in out/<name>/results.csv, a summary, and the plots."""
    path = _sweep_file(tmp_path / "s.yaml")
    r = _wsesim("sweep", str(path), "--workers", "1", "--plot", cwd=cwd)
    assert r.returncode == 0, r.stderr
    folder = cwd / "out" / "tiny"
    rows = _read(folder / "results.csv")
    assert [(row["point"], row["status"], row["set:model.top_k"], row["set:training.tiles"]) for row in rows] == [
        ("0", "ok", "1", "1"), ("1", "ok", "1", "tuned"), ("2", "ok", "2", "1"), ("3", "ok", "2", "tuned")]
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["model.top_k", "run", "G", "B", "tokens/s", "speedup", "status", "reason"]
    assert [line.split()[1] for line in lines[2:6]] == ["G=1", "tuned", "G=1", "tuned"]
    assert lines[3].split()[5].endswith("x")  # the tuned/G=1 speedup
    assert f"wrote {Path('out') / 'tiny' / 'results.csv'}" in lines
    assert r.stderr.splitlines()[0].startswith("sweep tiny: 4 points, 4 to run")
    assert len(r.stderr.splitlines()) == 5  # the header and one line per finished point
    stems = {"throughput_vs_top_k", "phases"}
    # no lock left behind; sweep.json records whose results these are (another sweep's --out is refused)
    assert {p.name for p in folder.iterdir()} == {"results.csv", "sweep.json", "figures.json", "manifest.json",
                                                  *(f"{s}.{x}" for s in stems for x in ("png", "svg", "pdf"))}
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["kind"], manifest["name"], manifest["sweep_file"]) == ("sweep", "tiny", str(path.resolve()))
    assert manifest["overrides"] == [{"point": i, "model.top_k": k, "training.tiles": g}
                                     for i, (k, g) in enumerate([(1, 1), (1, "tuned"), (2, 1), (2, "tuned")])]
    assert manifest["hardware"]["name"] == "tiny8" and manifest["experiment"]["training"]["seq_len"] == 16
    assert manifest["command"] == f"wsesim sweep {path} --workers 1 --plot"
    assert set(manifest["files"]) == {p.name for p in folder.iterdir()} - {"sweep.json", "manifest.json"}
    assert json.loads((folder / "sweep.json").read_text(encoding="utf-8")) == {
        "kind": "sweep results", "name": "tiny", "sweep": str(path.resolve())}
    assert all((folder / f"{s}.png").stat().st_size > 0 for s in stems)
    assert _tmp_files(cwd) == []


def test_bad_sweep_file_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, cwd: Path) -> None:
    path = _sweep_file(tmp_path / "bad.yaml", points=[{"model.top_k": 1}, {"model.top_k": 9}])
    r = _wsesim("sweep", str(path), "--out", "o", cwd=cwd)
    assert r.returncode == 2
    assert r.stdout == ""
    [line] = r.stderr.splitlines()
    assert line.startswith(f"wsesim: {path}: points: point 2 ") and "model.top_k" in line
    assert list(cwd.iterdir()) == []


def test_unreachable_scheduler_is_one_line_exit_2_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """In-process (a subprocess would add a second for nothing); Dask's connect timeout cut to 1 s."""
    dask = pytest.importorskip("dask")
    pytest.importorskip("dask.distributed")
    path = _sweep_file(tmp_path / "s.yaml")
    monkeypatch.chdir(tmp_path)
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code = cli.main(["sweep", str(path), "--scheduler", "tcp://127.0.0.1:1"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == "wsesim: --scheduler: cannot reach the Dask scheduler at 'tcp://127.0.0.1:1' (OSError)\n"
    assert [p.name for p in tmp_path.iterdir()] == ["s.yaml"]


def test_tune_json(cwd: Path) -> None:
    r = _wsesim("tune", *TINY_ARGS, "--set", "training.batch_per_tile=2", "--json", cwd=cwd)
    assert (r.returncode, r.stderr) == (0, "")
    data = json.loads(r.stdout)
    assert set(data) == {"best", "candidates"}
    assert data["best"] in data["candidates"]
    assert data["candidates"][0]["tiles"] == 1
    assert {c["batch_per_tile"] for c in data["candidates"]} == {2}
    feasible = [c["throughput_tokens_per_s"] for c in data["candidates"] if c["feasible"]]
    assert data["best"]["throughput_tokens_per_s"] == max(feasible)
    assert list(cwd.iterdir()) == []


# ------------------------------------------------------------------------------------------- in-process


def test_results_stream_to_the_csv_as_points_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str], watch_points: Callable[..., list[int]]) -> None:
    path = _sweep_file(tmp_path / "s.yaml")
    out = tmp_path / "o"
    csv_path = out / "results.csv"
    on_disk: list[list[str]] = []

    def before(point: Point) -> None:
        rows = _read(csv_path) if csv_path.exists() else []
        assert all(row["status"] == "ok" and float(row["throughput_tokens_per_s"]) > 0 for row in rows)
        on_disk.append([row["point"] for row in rows])
        assert _tmp_files(out) == []

    ran = watch_points(before)
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 0
    assert ran == [0, 1, 2, 3]
    assert on_disk == [[], ["0"], ["0", "1"], ["0", "1", "2"]]
    assert [row["point"] for row in _read(csv_path)] == ["0", "1", "2", "3"]
    assert _tmp_files(out) == []
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"sweep tiny: 4 points, 4 to run (under 1 s), results in {csv_path}"
    assert err[1].startswith("[1/4] model.top_k=1, training.tiles=1: ok ")


def test_interrupted_sweep_keeps_finished_rows_and_resume_runs_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], watch_points: Callable[..., list[int]]) -> None:
    path = _sweep_file(tmp_path / "s.yaml")
    out = tmp_path / "o"
    args = ["sweep", str(path), "--out", str(out), "--workers", "1"]
    reference = tmp_path / "ref"
    assert cli.main(["sweep", str(path), "--out", str(reference), "--workers", "1"]) == 0

    def interrupt_at_2(point: Point) -> None:
        if point.index == 2:
            raise KeyboardInterrupt

    watch_points(interrupt_at_2)
    capsys.readouterr()
    assert cli.main(args) == 130
    assert capsys.readouterr().err.splitlines()[-1] == "wsesim: interrupted"
    assert [row["point"] for row in _read(out / "results.csv")] == ["0", "1"]
    assert _tmp_files(out) == []
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["files"] == ["results.csv"]

    ran = watch_points(lambda point: None)
    assert cli.main([*args, "--resume"]) == 0
    assert ran == [2, 3]
    assert "4 points, 2 to run" in capsys.readouterr().err

    def strip(rows: list[dict[str, str]]) -> list[dict[str, str]]:
        return [{k: v for k, v in r.items() if k not in WALL_CLOCK_FIELDS} for r in rows]

    assert strip(_read(out / "results.csv")) == strip(_read(reference / "results.csv"))

    # a deleted row is run again, and only it
    rows = _read(out / "results.csv")
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(r for r in rows if r["point"] != "1")
    ran.clear()
    assert cli.main([*args, "--resume"]) == 0
    assert ran == [1]
    assert strip(_read(out / "results.csv")) == strip(_read(reference / "results.csv"))

    # without --resume, everything runs again
    ran.clear()
    assert cli.main(args) == 0
    assert ran == [0, 1, 2, 3]


def test_summary_puts_g1_and_tuned_side_by_side() -> None:
    rows = [
        {"set:model.top_k": 1, "set:training.tiles": 1, "tuned": False, "tiles": 1, "batch_per_tile": 4,
         "throughput_tokens_per_s": 100.0, "status": "ok", "reason": ""},
        {"set:model.top_k": 1, "set:training.tiles": "tuned", "tuned": "True", "tiles": 8, "batch_per_tile": 2,
         "throughput_tokens_per_s": "250.0", "status": "ok", "reason": ""},
        {"set:model.top_k": 2, "set:training.tiles": 1, "tuned": False, "tiles": 1, "batch_per_tile": 9000,
         "throughput_tokens_per_s": 0.0, "status": "infeasible", "reason": "SRAM: too much"},
    ]
    failed = [{"set:model.top_k": 3, "set:training.tiles": g, "tuned": False, "status": "error", "reason": "boom"}
              for g in (1, 2)]  # a failed point has no result columns
    table, header = summary_rows(rows + failed, ["model.top_k", "training.tiles"])
    assert header == ["model.top_k", "run", "G", "B", "tokens/s", "speedup", "status", "reason"]
    assert table == [(1, "G=1", 1, 4, "100", "", "ok", ""), (1, "tuned", 8, 2, "250", "2.50x", "ok", ""),
                     (2, "G=1", 1, 9000, "-", "", "infeasible", "SRAM: too much"),
                     (3, "G=1", "", "", "-", "", "error", "boom"), (3, "G=2", "", "", "-", "", "error", "boom")]


def test_resume_of_a_file_written_before_the_new_columns(tmp_path: Path) -> None:
    """A results.csv with the old columns (infeasible_reason, wall_s; 0 for what an infeasible row never
    measured; no speedup or swept value columns) resumes into exactly the file a fresh sweep writes."""
    path = _sweep_file(tmp_path / "s.yaml", grid={"training.tiles": [1, "tuned"]},
                       points=[{"hardware.io.bandwidth": "4 GB/s"}, {"hardware.io.bandwidth": "8 GB/s"},
                               {"training.batch_per_tile": 5000}])
    fresh, old = tmp_path / "fresh", tmp_path / "old"
    assert cli.main(["sweep", str(path), "--out", str(fresh), "--workers", "1"]) == 0
    rows = _read(fresh / "results.csv")
    assert [r["speedup"] != "" for r in rows] == [False, True, False, True, False, False]
    assert [r["io_bandwidth_bits_per_s"] for r in rows] == ["32000000000.0"] * 2 + ["64000000000.0"] * 2 + ["32000000000.0"] * 2
    columns = [c for c in rows[0] if c not in ("speedup", "io_bandwidth_bits_per_s")]
    old.mkdir()
    with open(old / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=[*columns, "infeasible_reason", "wall_s"], lineterminator="\n",
                                extrasaction="ignore")
        writer.writeheader()
        for r in rows[:-1]:  # the last point is left to run
            zeros = {c: "0.0" for c in MEASURED_COLUMNS if r["status"] != "ok"}
            writer.writerow({**r, **zeros, "infeasible_reason": r["reason"], "wall_s": "1.5"})
    (old / "sweep.json").write_text((fresh / "sweep.json").read_text(encoding="utf-8"), encoding="utf-8")
    assert cli.main(["sweep", str(path), "--out", str(old), "--workers", "1", "--resume"]) == 0
    assert (old / "results.csv").read_bytes() == (fresh / "results.csv").read_bytes()


def _top_k_sweep(path: Path, grid: dict[str, list[Any]] | None = None,
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
    path = _top_k_sweep(tmp_path / "s.yaml")
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


def test_a_sweeps_manifest_carries_its_wall_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _top_k_sweep(tmp_path / "s.yaml")
    assert cli.main(["sweep", str(path), "--workers", "1", "--out", str(tmp_path / "o")]) == 0
    data = json.loads((tmp_path / "o" / "manifest.json").read_text(encoding="utf-8"))
    assert isinstance(data["wall_s"], float) and data["wall_s"] > 0


def test_a_grid_key_the_files_points_set_blames_the_grid_flag(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    """``--grid model.top_k=…`` on a file whose points set top_k: the error used to blame the file's
    points[0] "set both here and in grid", a grid the file does not have."""
    path = _top_k_sweep(tmp_path / "s.yaml", grid={"training.tiles": [1]},
                       points=[{"model.top_k": 1}, {"model.top_k": 2}])
    assert cli.main(["sweep", str(path), "--grid", "model.top_k=1,2", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wsesim: --grid: model.top_k: ") and err.count("\n") == 1
    assert f"{path}: points[0] sets model.top_k" in err
    assert not (tmp_path / "o").exists()


def test_run_writes_nothing_into_a_sweeps_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out`` and ``--png`` were refused there; ``--trace`` was not, and wrote beside the sweep's CSV."""
    path = _top_k_sweep(tmp_path / "s.yaml")
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
