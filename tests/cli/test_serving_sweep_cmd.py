"""``wsesim sweep`` over a serving experiment (a ``kind: inference`` base), and ``wsesim infer --vary``,
its thin spelling: the streamed results.csv with the mapping and tokens/s, the figures and figures.json,
the manifest, the folder's lock, and --resume after a kill (SIGKILL or SIGTERM) giving the same bytes
as a sweep never interrupted.

The serving case is tests/cli/test_infer_cmd.py's tiny one (some 50 ms a point). A kill is made through
a subprocess whose second point sleeps until killed (``run_point`` wrapped), as
tests/cli/test_sweep_safety.py kills training sweeps.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from wsesim import cli
from wsesim.output import files

SERVE: dict[str, Any] = {"kind": "inference", "name": "tiny-serve", "hardware": "tiny8", "model": "tiny-moe",
                         "inference": {"load": {"prompt_len": 16, "output_len": 4}}}
ROOMY = ["--set", "hardware.pe.sram=1 MiB"]


def _sweep_file(path: Path, grid: dict[str, list[Any]] | None = None, **extra: Any) -> Path:
    data = {"kind": "sweep", "name": "serve", "base": SERVE, "grid": grid or {"inference.scheduler.batch": [1, 2]},
            **extra}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_a_serving_sweep_writes_a_row_per_point_its_figures_and_its_manifest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    path = _sweep_file(tmp_path / "s.yaml")
    assert cli.main(["sweep", str(path), *ROOMY, "--out", str(out), "--workers", "1", "--plot"]) == 0
    rows = _read(out / "results.csv")
    assert [(r["set:inference.scheduler.batch"], r["status"], r["grid"], r["stages"], r["systems"]) for r in rows] == [
        ("1", "ok", "8x8", "1", "1"), ("2", "ok", "8x8", "1", "1")]
    assert all(float(r["tokens_per_s"]) > 0 and float(r["tokens_per_s_per_request"]) > 0 for r in rows)
    assert {"serving_vs_batch.png", "serving_vs_batch.svg", "serving_vs_batch.pdf", "figures.json",
            "manifest.json", "sweep.json"} <= {p.name for p in out.iterdir()}
    figure, frontier = json.loads((out / "figures.json").read_text())["figures"]
    assert figure["stem"] == "serving_vs_batch" and figure["x_values"] == ["1", "2"]
    assert frontier["stem"] == "throughput_vs_latency" and frontier["load"] == "inference.scheduler.batch"
    assert [p["metric"] for p in figure["panels"]] == ["tokens_per_s_per_request", "tokens_per_s", "ttft_s",
                                                       "itl_p99_s", "e2e_p99_s"]
    for panel in figure["panels"]:  # every row drawn once in each panel
        assert sorted(p["point"] for s in panel["series"] for p in s["points"]) == [0, 1]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "sweep" and manifest["experiment"]["kind"] == "inference"
    assert manifest["files"] == ["results.csv", "serving_vs_batch.png", "serving_vs_batch.svg",
                                 "serving_vs_batch.pdf", "throughput_vs_latency.png", "throughput_vs_latency.svg",
                                 "throughput_vs_latency.pdf", "figures.json"]
    printed = capsys.readouterr()
    assert printed.out.splitlines()[0].split() == [
        "inference.scheduler.batch", "grid", "stages", "systems", "tokens/s", "per", "request", "tokens/s", "TTFT", "ms",
        "ITL", "p99", "ms", "status", "reason"]
    assert "[2/2] inference.scheduler.batch=2: ok " in printed.err
    assert "(1 stage of 8x8 PEs on 1 wafer)" in printed.err


def test_an_infeasible_point_is_a_labelled_cross_and_a_categorical_key_plots(tmp_path: Path) -> None:
    """``kv_layout`` is no number (the old figures called float() on every x value); the 1x1 grid does
    not fit: its rows are drawn, at y None, with their reason."""
    out = tmp_path / "o"
    path = _sweep_file(tmp_path / "s.yaml", grid={"inference.kv_layout": ["shift", "concat"],
                                                  "inference.grid": ["8x8", "1x1"]})
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1", "--plot"]) == 0  # 48 KiB per PE
    rows = _read(out / "results.csv")
    assert [r["status"] for r in rows] == ["ok", "infeasible", "ok", "infeasible"]
    listing = json.loads((out / "figures.json").read_text())["figures"]
    assert [f["stem"] for f in listing] == ["serving_vs_kv_layout", "serving_vs_grid"]
    assert listing[0]["x_values"] == ["shift", "concat"] and listing[1]["x_values"] == ["1x1", "8x8"]
    for figure in listing:
        points = [p for s in figure["panels"][0]["series"] for p in s["points"]]
        assert sorted(p["point"] for p in points) == [0, 1, 2, 3]
        crosses = [p for p in points if p["y"] is None]
        assert [p["point"] for p in sorted(crosses, key=lambda p: p["point"])] == [1, 3]
        assert all(p["status"] == "infeasible" and "1x1 grid" in p["reason"] for p in crosses)
    assert (out / "serving_vs_kv_layout.png").stat().st_size > 0


def test_a_second_sweep_into_a_serving_sweeps_folder_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], watch_points: Callable[..., list[int]]) -> None:
    path, out = _sweep_file(tmp_path / "s.yaml"), tmp_path / "o"
    codes: list[int] = []
    second = ["sweep", str(path), "--out", str(out), "--workers", "1"]
    watch_points(lambda point: codes.append(cli.main(second)) if point.index == 1 and not codes else None)
    assert cli.main(["sweep", str(path), *ROOMY, "--out", str(out), "--workers", "1"]) == 0
    assert codes == [2] and "another wsesim is writing to this folder" in capsys.readouterr().err
    assert len(_read(out / "results.csv")) == 2


# ---------------------------------------------------------------------------------- kill and resume


def _killed_sweep(tmp_path: Path, path: Path, out: Path,
                  how: signal.Signals) -> subprocess.CompletedProcess[str]:
    """``wsesim sweep PATH --out OUT`` in a subprocess whose point 1 sleeps until ``how`` kills it."""
    marker = tmp_path / "point-1-started"
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import pathlib, sys, time
        from wsesim import cli
        from wsesim.experiments import sweep
        real = sweep.run_point

        def run_point(raw, source, point):
            if point.index == 1:
                pathlib.Path({str(marker)!r}).touch()
                time.sleep(300)
            return real(raw, source, point)

        sweep.run_point = run_point
        sys.exit(cli.main(["sweep", {str(path)!r}, "--set", "hardware.pe.sram=1 MiB", "--out", {str(out)!r},
                           "--workers", "1"]))
    """), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "point 1 never started"
        time.sleep(0.05)
    proc.send_signal(how)
    stdout, stderr = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_resume_after_a_kill_gives_the_bytes_of_a_sweep_never_interrupted(tmp_path: Path,
                                                                          how: signal.Signals) -> None:
    path = _sweep_file(tmp_path / "s.yaml", grid={"inference.scheduler.batch": [1, 2, 3]})
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert cli.main(["sweep", str(path), *ROOMY, "--out", str(whole), "--workers", "1"]) == 0
    killed = _killed_sweep(tmp_path, path, cut, how)
    assert killed.returncode == (-signal.SIGKILL if how == signal.SIGKILL else 128 + signal.SIGTERM)
    if how == signal.SIGTERM:
        assert killed.stderr.splitlines()[-1] == "wsesim: terminated"
        assert not (cut / files.LOCK_NAME).exists()
    assert [r["point"] for r in _read(cut / "results.csv")] == ["0"]  # the one row finished before the kill
    assert cli.main(["sweep", str(path), *ROOMY, "--out", str(cut), "--workers", "1", "--resume"]) == 0
    assert (cut / "results.csv").read_bytes() == (whole / "results.csv").read_bytes()
    assert json.loads((cut / "manifest.json").read_text())["resumed"] is True


# ------------------------------------------------------------------------------ infer --vary, a sweep

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
        "--set", "inference.load.output_len=4", *ROOMY]


def test_infer_vary_is_the_sweep_of_the_experiment_as_base(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           watch_points: Callable[..., list[int]]) -> None:
    """The same rows, byte for byte, as ``wsesim sweep`` of a file with the same base and grid; the same
    folder rules (--resume runs only what is missing); the table shows the mapping."""
    experiment = tmp_path / "serve.yaml"
    experiment.write_text(yaml.safe_dump(SERVE), encoding="utf-8")
    via_infer, via_sweep = tmp_path / "a", tmp_path / "b"
    vary = ["infer", str(experiment), *ROOMY, "--vary", "inference.scheduler.batch=1,2", "--out", str(via_infer)]
    assert cli.main(vary) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["inference.scheduler.batch", "grid", "stages", "systems"]
    assert table[2].split()[:4] == ["1", "8x8", "1", "1"]
    sweep = tmp_path / "s.yaml"
    sweep.write_text(yaml.safe_dump({"kind": "sweep", "base": "serve.yaml",
                                     "grid": {"inference.scheduler.batch": [1, 2]}}), encoding="utf-8")
    assert cli.main(["sweep", str(sweep), *ROOMY, "--out", str(via_sweep), "--workers", "1", "--plot"]) == 0
    assert (via_infer / "results.csv").read_bytes() == (via_sweep / "results.csv").read_bytes()
    assert {p.name for p in via_infer.iterdir()} == {p.name for p in via_sweep.iterdir()}
    assert json.loads((via_infer / "sweep.json").read_text())["name"] == "tiny-serve"  # the experiment's name

    lines = (via_infer / "results.csv").read_text().splitlines(keepends=True)
    (via_infer / "results.csv").write_text("".join(lines[:2]), encoding="utf-8")  # point 1 lost
    ran = watch_points(lambda point: None)
    assert cli.main([*vary, "--resume"]) == 0
    assert ran == [1]
    assert (via_infer / "results.csv").read_bytes() == (via_sweep / "results.csv").read_bytes()


def test_infer_vary_without_out_writes_nothing_and_json_gives_the_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["infer", *TINY, "--vary", "inference.kv_layout=shift,concat", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["set:inference.kv_layout"], r["status"], r["grid"]) for r in rows] == [
        ("shift", "ok", "8x8"), ("concat", "ok", "8x8")]
    assert list(tmp_path.iterdir()) == []


def test_a_serving_sweep_runs_each_executor_simulation_engine_names(capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor is the experiment's key, as a training run's: ``--vary simulation.engine=fast,reference``
    serves each point on both, and the two agree on every measured column (the executors may differ only in
    when an op runs, never in what it costs; a continuous-batching load makes them schedule). ``--engine``
    sets the key for every point."""
    from wsesim.experiments import points

    ran: list[str] = []
    real = points.run_inference
    monkeypatch.setattr(points, "run_inference", lambda spec, **kw: ran.append(spec.simulation.engine)
                        or real(spec, **kw))
    load = ["--set", "inference.load.arrival=poisson", "--set", "inference.load.rate=200000", "--set", "inference.load.requests=3"]
    assert cli.main(["infer", *TINY, *load, "--vary", "simulation.engine=fast,reference", "--json"]) == 0
    fast, reference = json.loads(capsys.readouterr().out)
    assert ran == ["fast", "reference"]
    assert [(r["set:simulation.engine"], r["engine"]) for r in (fast, reference)] == [("fast", "fast"),
                                                                                      ("reference", "reference")]
    assert fast["status"] == "ok" and fast["ttft_s"] > 0
    own = ("set:simulation.engine", "engine", "point_key", "point")
    assert {k: v for k, v in fast.items() if k not in own} == {k: v for k, v in reference.items() if k not in own}
    ran.clear()
    assert cli.main(["infer", *TINY, "--engine", "reference", "--vary", "inference.scheduler.batch=1,2", "--json"]) == 0
    assert ran == ["reference", "reference"]
    ran.clear()  # two executors asked for at once: refused, nothing served
    capsys.readouterr()
    assert cli.main(["infer", *TINY, "--engine", "reference", "--set", "simulation.engine=fast"]) == 2
    assert ran == [] and capsys.readouterr().err.strip() == (
        "wsesim: --engine: expected one executor, got --engine reference and --set simulation.engine=fast")


@pytest.mark.parametrize(("args", "line"), [
    (["--vary", "inference.scheduler.batch=1,2", "--search"],
     "wsesim: --vary: expected no --search with --vary (a sweep serves each point once)"),
    (["--vary", "inference.scheduler.batch=1,2", "--resume"],
     "wsesim: --resume: expected --out DIR with --resume (the folder whose results.csv to resume)"),
    (["--vary", "inference.kv_layout=shift,paged"],
     "wsesim: --vary: point 1 {inference.kv_layout=paged}: inference.kv_layout: expected 'shift' or "
     """'concat', got "paged" (a string)"""),
])
def test_infer_vary_refuses_what_a_sweep_cannot_do(args: list[str], line: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", *TINY, *args]) == 2
    assert capsys.readouterr().err == line + "\n"


def test_plot_draws_a_serving_sweeps_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    path = _sweep_file(tmp_path / "s.yaml")
    assert cli.main(["sweep", str(path), *ROOMY, "--out", str(out), "--workers", "1"]) == 0
    assert not (out / "figures.json").exists()
    capsys.readouterr()
    assert cli.main(["plot", str(out / "results.csv"), "--json"]) == 0
    assert [Path(p).name for p in json.loads(capsys.readouterr().out)] == [
        "serving_vs_batch.png", "serving_vs_batch.svg", "serving_vs_batch.pdf", "throughput_vs_latency.png",
        "throughput_vs_latency.svg", "throughput_vs_latency.pdf", "figures.json", "manifest.json"]
    assert os.path.getsize(out / "serving_vs_batch.svg") > 0
    assert "plot" in json.loads((out / "manifest.json").read_text())["also"]
