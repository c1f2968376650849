"""Issue 29 deliver 2 and its low findings: ``kernel --out`` and ``fabric --out`` write a CSV and a manifest
as run and infer do; a kernel sweep's table shows a collective's wavelets (not a pseudo-shape "1x2x1"), its
efficiency as n/a, and why a run does not fit."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wsesim import cli


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_kernel_out_writes_one_row_per_run_and_a_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "k"
    argv = ["kernel", "allreduce", "--grid", "4x4,8x8", "--algorithm", "chain,tree", "--wavelets", "2"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    rows = _rows(out / "kernels.csv")
    assert "kernels.csv" in capsys.readouterr().out
    assert [(r["grid_rows"], r["algorithm"], r["wavelets"]) for r in rows] == [
        ("4", "chain", "2"), ("4", "tree", "2"), ("8", "chain", "2"), ("8", "tree", "2")]
    assert cli.main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["runs"]
    assert [float(r["cycles"]) for r in rows] == [r["cycles"] for r in printed]  # the same runs
    assert [float(r["critical_path_communication"]) for r in rows] == [
        r["critical_path"]["communication"] for r in printed]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "kernel" and manifest["files"] == ["kernels.csv"]
    assert manifest["overrides"]["grid"] == "4x4,8x8" and manifest["hardware"]["name"] == "wse2"


def test_kernel_out_refuses_a_file_in_the_way_before_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("x")
    assert cli.main(["kernel", "allreduce", "--grid", "4x4", "--out", str(tmp_path / "f")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_collective_table_shows_wavelets_na_and_the_reason_it_does_not_fit(
        capsys: pytest.CaptureFixture[str]) -> None:
    """20,000 wavelets of all-to-all on 64×64: two copies × 20,000 × 4 B = 160,000 B per PE, more than a
    WSE-2 PE's 36,864 usable."""
    assert cli.main(["kernel", "alltoall", "--grid", "64x64", "--wavelets", "1,20000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["grid", "size", "per", "PE"]
    assert "1 wavelet " in lines[2] and "20,000 wavelets" in lines[3] and "1x2x1" not in "\n".join(lines)
    assert "n/a" in lines[2].split() and "n/a" in lines[3].split()
    assert lines[3].endswith("no [1]") and lines[2].endswith("yes")
    assert lines[4].startswith("[1] 2 x 20,000 wavelets need 160,000 B per PE, more than the 36,864 B usable")


def test_a_gemm_table_keeps_its_shape_and_efficiency(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["kernel", "gemv", "--grid", "420x420,210x210", "--shape", "1x4096x4096"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[1] == "shape" and "1x4096x4096" in lines[2] and "n/a" not in lines[2]


def test_fabric_out_writes_the_run_as_a_row_its_hottest_links_and_a_manifest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One message over 3 hops of tiny8's row 0: 4 bytes, the first link the busiest."""
    out = tmp_path / "f"
    assert cli.main(["fabric", "tiny8", "--pattern", "message", "--hops", "3", "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    [row] = _rows(out / "fabric.csv")
    assert float(row["cycles"]) == printed["cycles"] and row["mesh_rows"] == "8" and row["pattern"] == "message"
    hottest = _rows(out / "hottest_links.csv")
    assert [(h["from_row"], h["from_col"]) for h in hottest] == [(str(h["from"][0]), str(h["from"][1]))
                                                                 for h in printed["hottest"]]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "fabric" and manifest["overrides"]["hops"] == 3
    assert manifest["files"] == ["fabric.csv", "hottest_links.csv"]
