"""``wsesim kernel`` and ``wsesim hardware`` on the GPU presets (wsesim.cli.kernel_gpu, cli.hardware): the
GEMM through ``python -m wsesim``, the rest in-process; a bad GPU preset, a wafer-only kernel on a GPU
and a GPU kernel on a wafer are one line on stderr and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wsesim import cli
from wsesim.config.errors import ConfigError
from wsesim.config.loader import load_experiment, validate_file

REPO = Path(__file__).resolve().parents[2]


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_gemm_on_an_h100_through_the_command_line() -> None:
    """8192³ bf16 on an H100: 128 x 256 tiles, 64 x 32 = 2,048 of them in ceil(2048/132) = 16 waves,
    compute-bound; its time is the launch and the waves, and it reaches 60-85 % of the dense peak."""
    r = subprocess.run([sys.executable, "-m", "wsesim", "kernel", "gemm", "--hardware", "h100", "--shape",
                        "8192x8192x8192", "--json"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert (r.returncode, r.stderr) == (0, "")
    out = json.loads(r.stdout)
    assert (out["hardware"], out["kind"], out["algorithm"], out["dtype"]) == ("h100", "gemm", "tiled", "bf16")
    assert out["schedule"] == {"tiles": 2048, "waves": 16, "tile_m": 128, "tile_n": 256, "split_k": 1,
                               "bound": "compute"}
    cp = out["critical_path"]
    assert out["seconds"] == pytest.approx(cp["launch"] + cp["compute"] + cp["memory"] + cp["communication"])
    assert cp["launch"] == pytest.approx(2.4e-6) and 0.6 < out["efficiency"] < 0.85
    assert out["cycles"] == pytest.approx(out["seconds"] * 1.83e9)


def test_the_human_report_and_a_sweep_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "kernel", "grouped-gemm", "--hardware", "h100", "--shape", "16x2048x768",
                           "--experts", "128")
    assert (code, err) == (0, "")
    assert out.startswith("h100 grouped-gemm (tiled) on one GPU, 128 experts of 16 tokens, 2048 x 768 weights")
    assert "(memory-bound)" in out and "384 tiles of 128 x 256 in 3 waves" in out
    code, out, _ = _main(capsys, "kernel", "allreduce", "--hardware", "h100", "--grid", "1x8,2x8",
                         "--algorithm", "ring,tree", "--wavelets", "1048576", "--cuda-graphs")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2 + 4 and lines[0].split()[:3] == ["grid", "what", "algorithm"]
    assert [line.split()[0] for line in lines[2:]] == ["1x8", "1x8", "2x8", "2x8"]


def test_attention_and_decode_take_heads(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(capsys, "kernel", "attention", "--hardware", "b200", "--shape", "1x4096x128",
                         "--heads", "32/8", "--no-causal", "--json")
    r = json.loads(out)
    assert code == 0 and r["shape"] == {"batch": 1, "seq": 4096, "head_dim": 128, "heads": 32, "kv_heads": 8}
    assert r["flops"] == 4 * 32 * 128 * 4096**2
    code, out, _ = _main(capsys, "kernel", "decode-attention", "--hardware", "h200", "--shape", "8x2048x128",
                         "--heads", "64/8", "--json")
    assert code == 0 and json.loads(out)["schedule"]["bound"] == "memory"


@pytest.mark.parametrize(("args", "message"), [
    (["kernel", "reduce", "--hardware", "h100"], "wsesim: kind: reduce runs on a wafer only"),
    (["kernel", "gemm", "--hardware", "h100", "--shape", "8x8x8", "--algorithm", "summa"],
     'wsesim: --algorithm: expected tiled for gemm on a GPU, got "summa"'),
    (["kernel", "grouped-gemm", "--hardware", "wse2", "--shape", "16x8x8"],
     "wsesim: kind: grouped-gemm is a GPU kernel and wse2 a wafer"),
    (["kernel", "gemm", "--hardware", "h100", "--shape", "8x8x8", "--png", "pics"],
     "wsesim: --png: h100 is a GPU"),
    (["kernel", "attention", "--hardware", "h100", "--shape", "1x8x8", "--heads", "8/x"],
     'wsesim: --heads: expected H or H/KV heads like "64/8", got "8/x"'),
    (["kernel", "gemm", "--hardware", "h100"], "wsesim: --shape: gemm needs a shape"),
    (["kernel", "allreduce", "--hardware", "h100", "--grid", "0x8"], 'wsesim: --grid: expected NODESxGPUS like "2x8"'),
])
def test_what_a_gpu_cannot_run_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                                       message: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = _main(capsys, *args)
    assert (code, out) == (2, "") and err.startswith(message) and err.count("\n") == 1


def test_kernel_out_writes_a_gpu_run(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _main(capsys, "kernel", "gemv", "--hardware", "h100", "--shape", "1x8192x8192", "--out",
                         str(tmp_path / "k"))
    assert (code, err) == (0, "")
    header, row = (tmp_path / "k" / "kernels.csv").read_text().splitlines()
    assert "schedule_bound" in header.split(",") and "memory" in row.split(",")


def test_hardware_show_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    """An H100: 132 SMs x 4,096 FLOP x 1.83 GHz = 989.4 TFLOP/s dense bf16; the node 8 x 700 W + 4.6 kW."""
    code, out, _ = _main(capsys, "hardware", "show", "h100", "--json")
    totals = json.loads(out)
    assert code == 0 and totals["peak_bf16_flops_per_s"] == pytest.approx(989.42976e12)
    assert totals["node_power_watts"] == pytest.approx(10_200) and totals["gpus_per_node"] == 8
    code, out, _ = _main(capsys, "hardware", "show", "b200")
    assert code == 0 and "peak fp8 (dense)" in out and "4,498.1 TFLOP/s" in out


@pytest.mark.parametrize(("edit", "message"), [
    (("  bf16: 4096", "  bf17: 4096"), "tensor.bf17: unknown key"),
    (("sms: 132", "sms: 0"), "sms: "),
    (("  bandwidth: 3.35 TB/s", "  bandwidth: 3.35"), "hbm.bandwidth: expected a bandwidth"),
    (("kind: gpu", "kind: gpus"), "kind: expected kind: hardware, got kind: 'gpus'"),
])
def test_a_bad_gpu_preset_is_one_line_naming_the_file_and_key(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              edit: tuple[str, str], message: str) -> None:
    text = (REPO / "hardware" / "h100.yaml").read_text(encoding="utf-8")
    assert edit[0] in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace(edit[0], edit[1], 1), encoding="utf-8")
    code, out, err = _main(capsys, "hardware", "show", str(bad))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(f"wsesim: {bad}: ") and message in err


def test_a_gpu_validates_as_its_own_kind_and_trains_as_a_node() -> None:
    kind, spec = validate_file(REPO / "hardware" / "h200.yaml")
    assert (kind, spec.name, spec.hbm.capacity_bytes) == ("gpu", "h200", 141e9)
    assert load_experiment(hardware="h100").spec.hardware.node.gpus == 8  # docs/model.md §13.8
    with pytest.raises(ConfigError) as e:
        load_experiment(hardware="h100", overrides={"simulation.moe_mapping": "in_place"})
    assert e.value.path == "simulation.moe_mapping" and "regions on a GPU" in e.value.message


def test_the_python_api_runs_a_gpu_kernel() -> None:
    """``wsesim.kernel`` on a GPU preset: one GPU for a GEMM, a node for a collective by default."""
    import wsesim

    r = wsesim.kernel("grouped-gemm", shape="16x2048x768", hardware="h100", dtype="bf16", experts=128)
    assert (r.kind, r.gpus, r.bound) == ("grouped-gemm", 1, "memory")
    assert wsesim.kernel("allreduce", hardware="h200", wavelets=1024).gpus == 8
