"""``wsesim kernel`` (wsesim.cli.kernel): the issue's three commands through ``python -m wsesim``, the
rest in-process through ``cli.main``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wsesim import cli

REPO = Path(__file__).resolve().parents[2]


def wsesim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wsesim", "kernel", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


@pytest.mark.parametrize(("args", "cycles"), [
    # the network part by hand: the leaf's wavelet is on its ramp at 1, then 511 dependent steps of
    # 2·T_R + 1·t_h + T_OP = 4 + 1 + 1 = 6: 1 + 6 · 511 = 3,067; the reduce is one instruction, so
    # the kernel adds 1 · instruction_issue = 7 (WSE-2): 3,074 in all
    (["reduce", "--grid", "512x1", "--algorithm", "chain", "--wavelets", "1"], 3067),
    (["gemv", "--grid", "420x420", "--shape", "1x16384x16384", "--dtype", "fp16"], None),
    (["gemm", "--grid", "750x750", "--shape", "33000x33000x33000", "--dtype", "fp32"], None)])
def test_the_done_when_commands_print_a_top_level_cycles_key(args: list[str], cycles: int | None) -> None:
    """``cycles``: the network cycles by hand, where given; the top-level ``cycles`` adds the
    instruction issue, which the critical path reports as ``instruction_issue``."""
    r = wsesim(*args, "--json")
    assert (r.returncode, r.stderr) == (0, "")
    out = json.loads(r.stdout)
    cp = out["critical_path"]
    assert out["cycles"] > 0
    if cycles is not None:
        assert (out["cycles"], cp["instruction_issue"]) == (cycles + 7, 7)
    for key in ("seconds", "flops_per_s", "efficiency", "critical_path", "sram", "links", "feasible"):
        assert key in out
    assert cp["instruction_issue"] + cp["compute"] + cp["communication"] + cp["waiting"] == \
        pytest.approx(out["cycles"])


def test_a_star_reduce_over_512_pes_is_feasible() -> None:
    """wsesim kernel reduce --grid 512x1 --algorithm star: one colour (every stream merged into the
    root's, the routers switched), so it fits WSE-2's 24; all-to-all on 32 × 32 fits too, by the rule the
    fabric command applies, which its note names."""
    r = wsesim("reduce", "--grid", "512x1", "--algorithm", "star", "--hardware", "wse2", "--json")
    assert (r.returncode, r.stderr) == (0, "")
    out = json.loads(r.stdout)
    assert out["feasible"] and out["reason"] == "" and out["colours"] == {"used": 1, "available": 24}
    r = wsesim("alltoall", "--grid", "32x32", "--hardware", "wse2")
    assert r.returncode == 0 and "INFEASIBLE" not in r.stdout
    assert "colours 4 of 24 at the busiest router" in r.stdout and "wsesim.fabric.colours" in r.stdout


def test_human_view_and_sweep_table(capsys: pytest.CaptureFixture[str]) -> None:
    """tiny8 (instruction_issue 0), by hand. Chain reduce over 1 × 8, one wavelet: 1 + 7 · (4 + 1 + 1) =
    43 cycles; compute 7 · T_OP = 7, communication 1 + 7 · 2·T_R + 7 hops · t_h = 1 + 28 + 7 = 36.

    GEMM 8 × 8 × 8 on 4 × 4 (fp16, 2 values a wavelet, 4 lanes): 2 × 2 blocks, K split in 4 steps of
    2. A step's work: k·bn = 4 FMAC instructions of bm = 2 elements, 1 cycle each: 4 cycles.
    SUMMA: owners s = 0..3, farthest receiver d = 3, 2, 2, 3; a step's panels 2 + 2 wavelets, so
    comm = 4 + (4 + d + 1) = 12, 11, 11, 12; double-buffered: 4 · 4 + 12 + (11−4) + (11−4) + (12−4) = 50.
    MeshGEMM (folded ring 0, 2, 3, 1): skew's busiest link 2 blocks · 2 wavelets = 4, longest path 3
    hops: 4 + 8 = 12; shifts of ≤ 2 hops: 2 + 2 + 7 = 11; 12 + 4 · 4 + 3 · (11 − 4) = 49."""
    assert cli.main(["kernel", "reduce", "--hardware", "tiny8", "--grid", "1x8", "--algorithm", "chain"]) == 0
    out = capsys.readouterr().out
    assert "43 cycles" in out
    assert "critical path: instruction issue 0, compute 7, communication 36, waiting 0" in out
    assert cli.main(["kernel", "allreduce", "--hardware", "tiny8", "--grid", "1x8,4x4",
                     "--algorithm", "chain,ring"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2 + 4 and "algorithm" in table[0]
    assert cli.main(["kernel", "gemm", "--hardware", "tiny8", "--grid", "4x4", "--shape", "8x8x8",
                     "--algorithm", "summa,meshgemm", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [r["cycles"] for r in runs] == [50, 49]


def test_the_sweep_table_shows_the_instruction_stream(capsys: pytest.CaptureFixture[str]) -> None:
    """The streamed GEMM 8 × 16 × 4 on 1 × 8 with a 10-cycle issue (tests/kernels/test_instructions.py):
    12 DSD operations on the critical PE, and the microthreads hide 24 cycles of each of its 4 outputs."""
    assert cli.main(["kernel", "gemm", "--hardware", "tiny8", "--set", "pe.instruction_issue=10 cycles",
                     "--grid", "1x8", "--shape", "8x16x4", "--algorithm", "stream,summa"]) == 0
    header, _, stream, _ = capsys.readouterr().out.splitlines()
    assert "DSD ops" in header and "microthreads hide" in header
    assert stream.split()[7:9] == ["12", "96"]


@pytest.mark.parametrize(("args", "message"), [
    (["gemm", "--shape", "3x3"], "wsesim: --shape: expected MxKxN"),
    (["gemm"], "wsesim: --shape: gemm needs a shape"),
    (["gemm", "--shape", "8x8x8", "--algorithm", "strassen"], "wsesim: --algorithm: expected one of summa, cannon"),
    (["reduce", "--grid", "9x9"], "wsesim: --grid: expected a grid of PEs within the tiny8 mesh (8 x 8)"),
    (["reduce", "--grid", "0x9"], "wsesim: --grid: expected ROWSxCOLS"),
    (["reduce", "--grid", "4x"], 'wsesim: --grid: expected ROWSxCOLS of PEs like "420x420", got "4x"\n'),
    (["reduce", "--grid", "٤x٤"], 'wsesim: --grid: expected ROWSxCOLS of PEs like "420x420", got "٤x٤"\n'),
    (["reduce", "--grid", "²x2"], 'wsesim: --grid: expected ROWSxCOLS of PEs like "420x420", got "²x2"\n'),
    (["reduce", "--grid", "1" * 5000 + "x1"], 'wsesim: --grid: expected ROWSxCOLS of PEs like "420x420"'),
    (["reduce", "--dtype", "fp8"], "wsesim: --dtype: expected one of fp16, fp32"),
    (["reduce", "--wavelets", "0"], "wsesim: --wavelets: expected a positive integer"),
    (["reduce", "--algorithm", "ring"], "wsesim: --algorithm: expected one of chain, star, tree, two-phase")])
def test_bad_input_is_one_line_naming_the_flag(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["kernel", *args, "--hardware", "tiny8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


@pytest.mark.parametrize("grid", ["4x4", " 4x4", "4X4", "4 × 4", "004x4"])
def test_grid_takes_the_spellings_people_type(grid: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``--grid`` reads as ``config.fields.parse_grid`` does: x, X or ×, spaces around."""
    assert cli.main(["kernel", "reduce", "--hardware", "tiny8", "--grid", grid]) == 0
    assert "on 4 x 4 PEs" in capsys.readouterr().out


def test_png_draws_each_runs_link_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One PNG per run of a sweep, named by kind, algorithm, grid, size and dtype; --json says where."""
    out = tmp_path / "pictures"
    assert cli.main(["kernel", "allreduce", "--hardware", "tiny8", "--grid", "1x8,4x4", "--algorithm", "ring",
                     "--wavelets", "4", "--png", str(out)]) == 0
    printed = capsys.readouterr().out
    names = sorted(p.name for p in out.iterdir())
    assert names == ["links_allreduce_ring_1x8_b4_fp16.png", "links_allreduce_ring_4x4_b4_fp16.png"]
    assert all((out / n).read_bytes().startswith(b"\x89PNG") for n in names) and printed.count("wrote ") == 2
    assert cli.main(["kernel", "gemm", "--hardware", "tiny8", "--grid", "2x2", "--shape", "8x8x8", "--png", str(out),
                     "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["png"] == str(out / "links_gemm_summa_2x2_8x8x8_fp16.png")


def test_a_bad_png_folder_is_one_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli.main(["kernel", "reduce", "--hardware", "tiny8", "--png", str(blocker / "sub")]) == 2
    err = capsys.readouterr().err
    assert "expected a folder for the output, got an existing file" in err and err.count("\n") == 1
    assert blocker.read_text() == "x"


# ------------------------------------------------------------------ issue 40: the kernel's work estimate


def test_the_estimate_follows_the_size_each_algorithm_scales_with() -> None:
    """SUMMA's steps follow K, not the largest dimension (1x1x10^9 was refused as "8 minutes, 100 GB" and
    takes 50 MB); Cannon's and MeshGEMM's skew arrays follow the grid's PEs (8,192² used 5.1 GB unestimated,
    16,384² ended in MemoryError); the weight streams follow N."""
    from wsesim.cli.kernel import MATMUL_UNITS, kernel_work
    from wsesim.kernels.kinds import KernelKind

    gemm = KernelKind.GEMM
    assert kernel_work(gemm, (750, 994), (1, 1, 10**9), 1, "summa") == MATMUL_UNITS[("gemm", "summa")][1]
    assert kernel_work(gemm, (4, 4), (1, 10**7, 1), 1, "summa")[1] == pytest.approx(1e9)
    per_pe = MATMUL_UNITS[("gemm", "cannon")][1][1]
    assert kernel_work(gemm, (16384, 16384), (1, 1, 1), 1, "cannon")[1] == pytest.approx(per_pe * 16384**2)
    assert kernel_work(gemm, (16384, 16384), (1, 1, 1), 1, "summa")[1] < 1e3
    assert kernel_work(gemm, (4, 4), (1, 1, 10**8), 1, "stream-dw")[1] == pytest.approx(4e9)
    # an algorithm the kind does not run is costed as its dearest (it is refused when it runs)
    assert kernel_work(gemm, (4, 4), (1, 10**7, 1), 1, "nonesuch") == kernel_work(gemm, (4, 4), (1, 10**7, 1), 1,
                                                                                  "summa")


def test_a_long_n_runs_and_a_huge_cannon_grid_is_refused(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WSESIM_MAX_MEMORY", raising=False)
    assert cli.main(["kernel", "gemm", "--shape", "1x1x1000000000", "--json"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("WSESIM_MAX_MEMORY", "20 GB")
    argv = ["kernel", "gemm", "--set", "mesh.rows=16384", "--set", "mesh.cols=16384", "--grid", "16384x16384",
            "--shape", "1x1x1", "--algorithm", "cannon"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "needs more memory than WSESIM_MAX_MEMORY allows (20 GB)" in err[0]
    assert "cannon on 16384x16384 PEs" in err[0]
