"""One workload on a wafer and on GPUs (docs/model.md §13.9): ``wsesim infer --vary hardware=...
--vary inference.scheduler.batch=... --out DIR`` draws the frontier (tokens/s per user against tokens/s per system
and per kW) with every row either a point or named, and ``wsesim compare DIR`` sets the hardware side by
side; a point that does not fit one hardware is a row with its reason, a combination one hardware refuses
is one line with exit code 2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wsesim import cli
from wsesim.analysis.frontier import kw_per_system
from wsesim.config.loader import load_hardware

SMALL = ["--model", "llama3-8b", "--hardware", "wse3", "--set", "inference.load.prompt_len=256",
         "--set", "inference.load.output_len=16"]


def _sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[Path, list[dict[str, str]]]:
    out = tmp_path / "side"
    assert cli.main(["infer", *args, "--out", str(out)]) == 0
    capsys.readouterr()
    return out, list(csv.DictReader((out / "results.csv").open()))


def _frontier(out: Path) -> dict:
    figures = json.loads((out / "figures.json").read_text())["figures"]
    return next(f for f in figures if f["stem"] == "throughput_vs_latency")


def test_a_wafer_and_a_gpu_node_each_a_curve_per_system_and_per_kw(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, rows = _sweep(tmp_path, capsys, *SMALL, "--vary", "hardware=wse3,h100", "--vary", "inference.scheduler.batch=1,4")
    assert [(r["hardware"], r["batch"], r["status"], r["system"]) for r in rows] == [
        ("wse3", "1", "ok", "wafer"), ("wse3", "4", "ok", "wafer"),
        ("h100", "1", "ok", "8-GPU node"), ("h100", "4", "ok", "8-GPU node")]
    plan = _frontier(out)
    assert plan["load"] == "inference.scheduler.batch"
    assert [p["metric"] for p in plan["panels"]] == ["tokens_per_s_per_system", "tokens_per_s_per_kw"]
    assert [(s["label"], s["system"], [p["load"] for p in s["points"]]) for s in plan["series"]] == [
        ("hardware wse3", "wafer", ["1", "4"]), ("hardware h100", "8-GPU node", ["1", "4"])]
    drawn = [p for s in plan["series"] for p in s["points"]]
    for p, row in zip(drawn, rows, strict=True):
        assert p["tokens_per_s_per_system"] == float(row["tokens_per_s_per_system"])
        assert p["tokens_per_s_per_kw"] == float(row["tokens_per_s_per_kw"])
        # per kW is per system over each system's simulated mean kW (power_w over the systems)
        assert float(row["tokens_per_s_per_kw"]) == pytest.approx(
            float(row["tokens_per_s_per_system"]) / kw_per_system(row), rel=1e-12)
    gpu = load_hardware("h100")
    floor_kw, busy_kw = gpu.power.node_floor_watts / 1e3, gpu.node.gpus * gpu.power.gpu_watts / 1e3
    for row in rows[2:]:  # a node draws its floor all the time and its 8 GPUs' TDP at most
        assert floor_kw <= kw_per_system(row) <= floor_kw + busy_kw
    assert (out / "throughput_vs_latency.png").stat().st_size > 0

    assert cli.main(["compare", str(out)]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[1] == "one system: wafer on wse3; 8-GPU node on h100"
    body = [line.split() for line in text[5:9]]
    assert [(b[0], b[1], " ".join(b[2:4] if b[3] == "wafer" else b[2:5])) for b in body] == [
        ("1", "wse3", "1 wafer"), ("1", "h100", "1 8-GPU node"), ("4", "wse3", "1 wafer"),
        ("4", "h100", "1 8-GPU node")]


def test_a_point_that_does_not_fit_one_hardware_is_a_row_and_the_figure_names_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """LLaMA-3.1-70B on at most one system: no CS-3 holds its weights, one 8-GPU H200 node does."""
    out, rows = _sweep(tmp_path, capsys, *SMALL, "--model", "llama3.1-70b", "--set", "inference.systems=1",
                       "--vary", "hardware=wse3,h200", "--vary", "inference.scheduler.batch=1,2")
    assert [r["status"] for r in rows] == ["infeasible", "infeasible", "ok", "ok"]
    plan = _frontier(out)
    assert [(p["series"], p["load"], p["status"]) for p in plan["left_out"]] == [
        ("hardware wse3", "1", "infeasible"), ("hardware wse3", "2", "infeasible")]
    assert all("do not fit 1 wafer" in p["reason"] for p in plan["left_out"])
    assert sum(len(s["points"]) for s in plan["series"]) + len(plan["left_out"]) == len(rows)
    assert cli.main(["compare", str(out)]) == 0
    assert "infeasible: the weights do not fit 1 wafer" in capsys.readouterr().out


def test_a_combination_one_hardware_refuses_is_one_line_and_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ds"
    assert cli.main(["infer", "--model", "deepseek-v3", "--vary", "hardware=wse3,h200", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "point 1 {hardware=h200}" in err and "latent attention on a GPU" in err
    assert not out.exists()


def test_compare_of_one_folder_that_is_no_serving_sweep_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "result.json").write_text('{"feasible": true, "throughput_tokens_per_s": 1.0}')
    assert cli.main(["compare", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"wsesim: {tmp_path}: expected a serving sweep's folder or results.csv (infer --vary --out) "
                   "to set its rows side by side, or two runs or sweeps to compare, got a training run alone\n")
