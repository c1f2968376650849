"""Pictures (wsesim.output.plotting) — smoke tests: the expected files, non-empty, and figures closed after.

The sweep behind the CSV is tiny (tiny8, PE granularity, seq_len 16): experts 4 and 8 × top_k 1 and 2
× (G=1, tuned), so both sparsity figures have data. The wafer pictures are drawn from a real ``wsesim
run --out`` folder.
"""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from wsesim import cli
from wsesim.experiments.resume import override_keys
from wsesim.experiments.sweep import run_sweep, sweep_from_data
from wsesim.experiments.table import csv_text
from wsesim.output.files import atomic_write_text
from wsesim.output.plotting import plot_results

BASE: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 1},
                        "simulation": {"granularity": "pe"}}
SWEEP: dict[str, Any] = {"kind": "sweep", "name": "tiny", "base": BASE,
                         "grid": {"model.experts": [4, 8], "model.top_k": [1, 2], "training.tiles": [1, "tuned"]}}
WAFER_STEMS = ("wafer_busy", "wafer_sram", "wafer_links", "wafer_placement", "gantt")


def _write_csv(folder: Path, data: dict[str, Any]) -> Path:
    sweep = sweep_from_data(data, source="<test>", base_dir=None)
    path = folder / "results.csv"
    atomic_write_text(path, csv_text(run_sweep(sweep), override_keys(sweep)))
    return path


@pytest.fixture(scope="module")
def results_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_csv(tmp_path_factory.mktemp("sweep"), SWEEP)


def _assert_files(paths: list[Path], folder: Path, names: set[str]) -> None:
    assert {p.name for p in paths} == names
    assert all(p.parent == folder and p.stat().st_size > 0 for p in paths)
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


FORMATS = ("png", "svg", "pdf")


def test_plot_results_writes_png_svg_pdf_and_figures_json(results_csv: Path, tmp_path: Path) -> None:
    paths = plot_results(results_csv, tmp_path)
    stems = ("throughput_vs_experts", "throughput_vs_top_k", "phases")
    _assert_files(paths, tmp_path, {f"{s}.{x}" for s in stems for x in FORMATS} | {"figures.json"})
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths if p.suffix == ".png")
    assert all(b"<svg" in p.read_bytes()[:1000] for p in paths if p.suffix == ".svg")
    assert plt.get_fignums() == []  # every figure closed


def test_text_stays_text_in_svg_and_pdf(results_csv: Path, tmp_path: Path) -> None:
    """svg.fonttype none: the words are <text>, not glyph outlines; pdf.fonttype 42: TrueType, not Type 3.
    And the same figure twice is the same bytes (no dates in them)."""
    plot_results(results_csv, tmp_path / "a")
    plot_results(results_csv, tmp_path / "b")
    svg = (tmp_path / "a" / "throughput_vs_experts.svg").read_text(encoding="utf-8")
    assert "<text" in svg and "number of experts" in svg
    pdf = (tmp_path / "a" / "phases.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"/FontFile2" in pdf and b"/Type3" not in pdf
    for name in ("throughput_vs_experts.svg", "phases.pdf", "phases.png", "figures.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_figures_json_draws_every_row_once_per_view(tmp_path: Path) -> None:
    """A sweep over a unit string, a mapping and the sequence length, G=1 against tuned, with infeasible
    points: in each view every row is one point, an infeasible one marked (y null), never dropped."""
    grid = {"hardware.io.bandwidth": ["4 GB/s", "8 GB/s"], "simulation.moe_mapping": ["regions", "in_place"],
            "training.seq_len": [16, 4096], "training.tiles": [1, "tuned"]}
    csv_path = _write_csv(tmp_path, {**SWEEP, "grid": grid})
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {r["status"] for r in rows} == {"ok", "infeasible"}
    plot_results(csv_path, tmp_path)
    listing = json.loads((tmp_path / "figures.json").read_text(encoding="utf-8"))
    views = {f["view"] for f in listing["figures"]}
    assert views == {"hardware.io.bandwidth", "training.seq_len"}
    for view in views:
        points = [pt for f in listing["figures"] if f["view"] == view for panel in f["panels"]
                  for s in panel["series"] for pt in s["points"]]
        assert sorted(pt["point"] for pt in points) == [int(r["point"]) for r in rows]
        for pt in points:
            ok = pt["row"]["status"] == "ok"
            assert pt["y"] == (float(pt["row"]["throughput_tokens_per_s"]) if ok else None)
    for figure in listing["figures"]:
        assert set(figure["roles"]) == set(grid)
        assert all((tmp_path / name).is_file() for name in figure["files"])
        for panel in figure["panels"]:
            for s in panel["series"]:
                assert all(pt["row"][f"set:{k}"] == v for k, v in s["fixed"].items() for pt in s["points"])
    assert len(listing["phases"]["bars"]) == len(rows)


def test_figures_without_a_swept_key_but_g_are_only_the_phases(tmp_path: Path) -> None:
    csv_path = _write_csv(tmp_path, {**SWEEP, "grid": {"training.tiles": [1, "tuned"]}})
    _assert_files(plot_results(csv_path, tmp_path), tmp_path, {f"phases.{x}" for x in FORMATS} | {"figures.json"})


def test_a_sweep_without_g1_and_tuned_has_no_speedup_panel(tmp_path: Path) -> None:
    """Experts vary, every run at G=2: throughput_vs_experts has one series and no speedup (it used to
    be left out: it compared G=1 with tuned only)."""
    csv_path = _write_csv(tmp_path, {**SWEEP, "base": {**BASE, "training": {**BASE["training"], "tiles": 2}},
                                     "grid": {"model.experts": [4, 8]}})
    _assert_files(plot_results(csv_path, tmp_path), tmp_path,
                  {f"{s}.{x}" for s in ("throughput_vs_experts", "phases") for x in FORMATS} | {"figures.json"})
    [figure] = json.loads((tmp_path / "figures.json").read_text(encoding="utf-8"))["figures"]
    assert [s["label"] for p in figure["panels"] for s in p["series"]] == ["throughput"]
    assert figure["panels"][0]["speedup"] == []
    assert "G = 2" in figure["title"]


def test_no_ok_rows_no_figures(tmp_path: Path) -> None:
    csv_path = _write_csv(tmp_path, {**SWEEP, "grid": {"training.batch_per_tile": [5000]}})
    with open(csv_path, newline="", encoding="utf-8") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["infeasible"]
    assert plot_results(csv_path, tmp_path) == []
    assert [p.name for p in tmp_path.iterdir()] == ["results.csv"]


def test_wsesim_plot_wafer_on_a_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``wsesim run --out DIR`` (the real entry point), then ``wsesim plot --wafer DIR``: five PNGs."""
    r = subprocess.run([sys.executable, "-m", "wsesim", "run", "--hardware", "tiny8", "--model", "tiny-moe",
                        "--set", "simulation.granularity=pe", "--set", "training.seq_len=16", "--out", "run"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert (r.returncode, r.stderr) == (0, "")
    folder = tmp_path / "run"
    assert cli.main(["plot", "--wafer", str(folder)]) == 0
    printed = capsys.readouterr().out.splitlines()
    paths = [folder / f"{s}.png" for s in WAFER_STEMS]
    assert printed == [f"wrote {p}" for p in [*paths, folder / "manifest.json"]]
    _assert_files(paths, folder, {f"{s}.png" for s in WAFER_STEMS})
    assert {p.name for p in folder.iterdir()} == {"result.json", "ops.csv", "wafer.json", "manifest.json",
                                                  *(p.name for p in paths)}
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["kind"] == "run"  # the run's, kept; the plot's added beside it
    assert manifest["also"]["plot"]["files"] == [p.name for p in paths]
    assert manifest["also"]["plot"]["source"] == str((folder / "wafer.json").resolve())
    assert plt.get_fignums() == []


def test_wsesim_plot_results_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv_path = _write_csv(tmp_path, {**SWEEP, "grid": {"training.tiles": [1, "tuned"]}})
    out = tmp_path / "figures"
    assert cli.main(["plot", str(csv_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"wrote {out / f'phases.{x}'}" for x in FORMATS] + [
        f"wrote {out / name}" for name in ("figures.json", "manifest.json")]
    assert sorted(p.name for p in out.iterdir()) == ["figures.json", "manifest.json", "phases.pdf", "phases.png",
                                                     "phases.svg"]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["kind"], manifest["source"]) == ("plot", str(csv_path.resolve()))
    assert manifest["source_sha256"] == hashlib.sha256(csv_path.read_bytes()).hexdigest()
    assert manifest["command"] == f"wsesim plot {csv_path} --out {out}"


@pytest.mark.parametrize(("args", "line"), [
    (["plot"], "wsesim: wsesim plot: expected RESULTS.csv, CANDIDATES.csv, a folder or --wafer DIR"),
    (["plot", "missing.csv"], "wsesim: missing.csv: no such file"),
    (["plot", "--wafer", "."], "wsesim: .: expected a run folder with wafer.json (from wsesim run --out DIR)"),
])
def test_wsesim_plot_bad_input(args: list[str], line: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(args) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", line + "\n")
    assert list(tmp_path.iterdir()) == []


def test_wsesim_plot_unreadable_wafer_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "wafer.json").write_text('{"rows": 8}', encoding="utf-8")
    assert cli.main(["plot", "--wafer", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected wafer maps written by wsesim run" in err
    assert [p.name for p in tmp_path.iterdir()] == ["wafer.json"]


def test_legends_sit_beside_the_bars_and_labels_read_level(results_csv: Path) -> None:
    """The phase legend used to sit inside the axes, over the bars, and the run labels were rotated 45°."""
    from wsesim.analysis.figures import plan_figures, plan_phases
    from wsesim.experiments.table import read_results_table
    from wsesim.output.sweep_figures import phases_figure, throughput_figure

    header, rows = read_results_table(results_csv)
    figures = [phases_figure(plan_phases(header, rows)), *(throughput_figure(p) for p in plan_figures(header, rows))]
    try:
        for fig in figures:
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            legend = (fig.axes[0].get_legend() or fig.legends[0]).get_window_extent(renderer)
            for ax in fig.axes:
                assert not legend.overlaps(ax.get_window_extent(renderer))
        phases = figures[0].axes[0]
        assert all(t.get_rotation() == 0 for t in phases.get_yticklabels() + phases.get_xticklabels())
        assert len(phases.get_yticklabels()) == len(rows)
    finally:
        for fig in figures:
            plt.close(fig)
