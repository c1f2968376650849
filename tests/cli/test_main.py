"""The command line (wsesim.cli.main) through the real entry points: ``python -m wsesim`` and the installed
``wsesim`` script in a subprocess, and ``cli.main`` in-process where many cases share one check.

A bad input is one line on stderr, exit code 2, no traceback, and nothing written to the cwd.
Each subprocess costs about a second (mostly pint's unit registry), so they are few and batched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wsesim import cli

REPO = Path(__file__).resolve().parents[2]
ATTENTION = ["memory", "attention", "--seq-len", "4096", "--head-dim", "64", "--tile", "128", "--heads", "16",
             "--bytes-per-value", "4 B"]
TINY_EXPERIMENT = """\
kind: experiment
hardware: tiny8
model: tiny-moe
training:
  seq_len: 64
"""
WSE2_TOTALS = {
    # 750 × 994 PEs; 745,500 · 48 KiB; · 8 FLOP · 850 MHz; · 24 B · 850 MHz; · 8 ports · 32 bit · 850 MHz;
    # 750 links · 2 directions · 4 B · 850 MHz; 1.2 Tbit/s / 8
    "pes": 745_500,
    "sram_total_bytes": 36_642_816_000,
    "peak_flops_per_s": 5.0694e15,
    "sram_bandwidth_bytes_per_s": 1.52082e16,
    "fabric_bandwidth_bits_per_s": 1.622208e17,
    "bisection_bandwidth_bytes_per_s": 5.1e12,
    "io_bandwidth_bytes_per_s": 1.5e11,
    "memoryx_update_bandwidth_bytes_per_s": 3.6e12,
}


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "wsesim", *args]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command(*args), cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """An empty working directory, to check that nothing is written to it."""
    d = tmp_path / "cwd"
    d.mkdir()
    return d


# ------------------------------------------------------------------------------------ subprocesses


def test_memory_attention_json(cwd: Path) -> None:
    """mlsysim's registered case: 4096² · 4 B = 67,108,864 B; ratio 138,412,032 / 4,227,072 = 32.744186…"""
    r = _run(*ATTENTION, "--json", cwd=cwd)
    assert (r.returncode, r.stderr) == (0, "")
    data = json.loads(r.stdout)
    assert data["score_matrix"] == 67_108_864
    assert data["stored_ratio"] == pytest.approx(32.74418604651163, rel=1e-12)
    assert data["tile_count"] == 1024
    assert list(cwd.iterdir()) == []


def test_hardware_show_wse2_json(cwd: Path) -> None:
    r = _run("hardware", "show", "wse2", "--json", cwd=cwd)
    assert (r.returncode, r.stderr) == (0, "")
    data = json.loads(r.stdout)
    assert data.pop("name") == "wse2"
    assert set(data) == set(WSE2_TOTALS)
    for key, value in WSE2_TOTALS.items():
        assert data[key] == pytest.approx(value, rel=1e-12), key
    assert data["pes"] == 745_500 and isinstance(data["pes"], int)


def test_validate_every_shipped_file(cwd: Path) -> None:
    files = sorted([*(REPO / "hardware").rglob("*.yaml"), *(REPO / "workloads").rglob("*.yaml")])
    r = _run("validate", *map(str, files), cwd=cwd)
    assert (r.returncode, r.stderr) == (0, "")
    lines = r.stdout.splitlines()
    assert len(lines) == len(files)
    assert all(line.startswith(f"{f}: ok (") for f, line in zip(files, lines, strict=True))
    assert "ok (hardware wse2)" in r.stdout and "ok (model qwen3-30b-a3b)" in r.stdout
    assert "ok (experiment qwen3-30b-a3b-wse2)" in r.stdout
    assert list(cwd.iterdir()) == []


def _bad_files(d: Path) -> dict[str, tuple[Path, str]]:
    """One file per kind of error, and the start of the line ``wsesim validate`` must print."""
    tiny8 = (REPO / "hardware" / "tiny8.yaml").read_text(encoding="utf-8")
    tiny_moe = (REPO / "workloads" / "tiny-moe.yaml").read_text(encoding="utf-8")
    texts = {
        "unknown_key": (tiny8.replace("  simd_width: 4", "  simd_width: 4\n  simd: 4"), "pe.simd: unknown key"),
        "bare_number": (tiny8.replace("sram: 48 KiB", "sram: 48"), 'pe.sram: expected a size like "48 KiB", got 48'),
        "wrong_dimension": (tiny8.replace("clock: 1 GHz", "clock: 48 KiB"), "clock: expected a frequency"),
        "duplicate": (tiny8.replace("  rows: 8", "  rows: 8\n  rows: 8"), "mesh.rows: duplicate key"),
        "alias": (tiny8.replace("  rows: 8", "  rows: &n 8").replace("  cols: 8", "  cols: *n"),
                  "mesh.rows: expected a plain value"),
        "empty": ("", "expected a YAML mapping, got an empty file"),
        "list": ("- 1\n", "expected a YAML mapping at the top level, got a list"),
        "syntax": ("kind: model\nname: [x\n", "line 3: invalid YAML"),
        "no_kind": (tiny_moe.replace("kind: model\n", ""), "kind: required key is missing"),
        "cross_field": (tiny_moe.replace("top_k: 2", "top_k: 5"), "top_k: expected at most experts (4), got 5"),
        "preset": ("kind: experiment\nhardware: wse9\nmodel: tiny-moe\n", "hardware: expected a hardware preset"),
    }
    out = {}
    for name, (text, expected) in texts.items():
        path = d / f"{name}.yaml"
        path.write_text(text, encoding="utf-8")
        out[name] = (path, f"wsesim: {path}: {expected}")
    out["missing"] = (d / "missing.yaml", f"wsesim: {d / 'missing.yaml'}: no such file")
    return out


def test_bad_input_through_the_entry_point(tmp_path: Path, cwd: Path) -> None:
    """A schema error, a YAML error, a missing file, a usage error and a bad ``--set``: exit 2, exactly one
    line on stderr, nothing on stdout, no traceback, nothing written. (Every kind of bad file is checked
    in-process below; the processes here run side by side to keep the test quick.)"""
    inputs = tmp_path / "in"
    inputs.mkdir()
    bad = _bad_files(inputs)
    cases = {name: (["validate", str(bad[name][0])], bad[name][1]) for name in ("bare_number", "alias", "syntax",
                                                                                 "missing")}
    cases["usage"] = (["memory", "attention", "--seq-len", "4096"], "wsesim memory attention: the following")
    cases["set"] = (["hardware", "show", "tiny8", "--set", "pe.sram=48"],
                    'wsesim: --set: pe.sram: expected a size like "48 KiB", got 48 (a bare number)')
    procs = {name: subprocess.Popen(_command(*args), cwd=cwd, text=True, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE) for name, (args, _) in cases.items()}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, (name, err)
        assert out == "", name
        assert err.endswith("\n") and err.count("\n") == 1, (name, err)
        assert err.startswith(cases[name][1]), (name, err)
        assert "Traceback" not in err
    assert list(cwd.iterdir()) == []
    assert sorted(p.name for p in inputs.iterdir()) == sorted(f"{n}.yaml" for n in bad if n != "missing")


def test_memory_training_json_with_overrides(capsys: pytest.CaptureFixture[str], tmp_path: Path, cwd: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """tiny8 / tiny-moe at S 64 with B set to 1 by ``--set``: the peak is attention_bwd's 21,645 B (derived
    in test_memory.py), and auto would give B 6."""
    exp = tmp_path / "tiny.yaml"
    exp.write_text(TINY_EXPERIMENT, encoding="utf-8")
    monkeypatch.chdir(cwd)
    code, out, err = _main(capsys, "memory", "training", str(exp), "--set", "training.batch_per_tile=1", "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert list(data) == ["hardware", "model", "seq_len", "batch_per_tile", "auto_batch_per_tile", "tiles", "expert_load",
                          "capacity_bytes_per_pe", "peak_bytes_per_pe", "binding_phase", "feasible",
                          "infeasible_reason", "phases"]
    assert (data["hardware"], data["model"], data["seq_len"], data["batch_per_tile"], data["auto_batch_per_tile"],
            data["tiles"]) == ("tiny8", "tiny-moe", 64, 1, 6, 1)
    assert (data["capacity_bytes_per_pe"], data["peak_bytes_per_pe"], data["binding_phase"]) == (
        49_152, 21_645, "attention_bwd")
    assert (data["feasible"], data["infeasible_reason"]) == (True, "")
    assert list(data["phases"]) == ["attention_fwd", "experts_fwd", "lm_head", "experts_bwd", "attention_bwd"]
    assert data["phases"]["attention_bwd"]["total"] == 21_645
    assert data["phases"]["attention_bwd"]["attention_transient"] == 3_840
    assert list(cwd.iterdir()) == []


def _installed_script() -> str | None:
    """The console script beside this interpreter (a venv's bin/), or else on PATH."""
    here = Path(sys.executable).parent
    return shutil.which("wsesim", path=os.pathsep.join([str(here), os.environ.get("PATH", "")]))


def test_installed_console_script(cwd: Path) -> None:
    script = _installed_script()
    if script is None:
        pytest.skip("the wsesim console script is not installed beside this interpreter nor on PATH")
    r = subprocess.run([script, *ATTENTION], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    assert (r.returncode, r.stderr) == (0, "")
    row = next(line for line in r.stdout.splitlines() if line.startswith("score_matrix"))
    assert row.split() == ["score_matrix", "67.109", "MB"]  # the human view: decimal MB, 5 digits
    assert list(cwd.iterdir()) == []


# ------------------------------------------------------------------------------------------ in-process


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate"],
        ["memory"],
        ["memory", "attention", "--seq-len", "x", "--head-dim", "64", "--tile", "128", "--heads", "16",
         "--bytes-per-value", "4 B"],
        ["hardware", "show"],
        ["hardware", "show", "wse2", "--colour"],
        ["validate"],
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(args)
    out, err = capsys.readouterr()
    assert (e.value.code, out) == (2, "")
    assert err.startswith("wsesim") and err.count("\n") == 1 and err.endswith("(see --help)\n")


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "validate" in out and "hardware" in out and "memory" in out


def test_validate_bad_files_in_process(capsys: pytest.CaptureFixture[str], tmp_path: Path, cwd: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(cwd)
    for name, (path, expected) in _bad_files(tmp_path).items():
        code, out, err = _main(capsys, "validate", str(path))
        assert (code, out) == (2, ""), name
        assert err.startswith(expected) and err.count("\n") == 1, (name, err)
    assert list(cwd.iterdir()) == []


def test_validate_stops_at_the_first_bad_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    good = REPO / "hardware" / "tiny8.yaml"
    missing = tmp_path / "missing.yaml"
    code, out, err = _main(capsys, "validate", str(good), str(missing))
    assert code == 2
    assert out == f"{good}: ok (hardware tiny8)\n"
    assert err == f"wsesim: {missing}: no such file\n"


def test_hardware_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "hardware", "list")
    assert (code, err) == (0, "")
    tables = out.split("\n\n")
    names = [line.split()[0] for table in tables[:2] for line in table.splitlines()[2:]]
    assert names == sorted(p.stem for p in (REPO / "hardware").glob("*.yaml") if "kind: gpu" not in p.read_text()) \
        + sorted(p.stem for p in (REPO / "hardware").glob("*.yaml") if "kind: gpu" in p.read_text())
    assert tables[1].startswith("GPU ") and "h100" in tables[1]  # the GPUs in a table of their own
    assert "Cerebras WSE-2 (CS-2)" in out and "swarmx" in out  # descriptions, and the interconnects


def test_hardware_show_with_override(capsys: pytest.CaptureFixture[str]) -> None:
    """tiny8 with 96 KiB per PE: 64 · 98,304 = 6,291,456 B in all."""
    code, out, _ = _main(capsys, "hardware", "show", "tiny8", "--set", "pe.sram=96 KiB", "--json")
    assert code == 0 and json.loads(out)["sram_total_bytes"] == 6_291_456
    code, out, _ = _main(capsys, "hardware", "show", "tiny8")
    rows = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in out.splitlines()[3:])
    assert code == 0 and out.startswith("tiny8: ")
    assert (rows["mesh"], rows["PEs"], rows["clock"], rows["I/O per direction"]) == ("8 x 8", "64", "1000 MHz", "4.0 GB/s")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["hardware", "show", "tiny8", "--set", "pe.sram"], "wsesim: --set: expected KEY.PATH=VALUE, got 'pe.sram'"),
        (["hardware", "show", "tiny8", "--set", "pe.sram.x=1"], "wsesim: --set: pe.sram.x: cannot set pe.sram.x"),
        (["hardware", "show", "tiny8", "--set", "pe.srma=1 B"], 'wsesim: --set: pe.srma: unknown key; did you mean "sram"?'),
        (["hardware", "show", "wse9"], "wsesim: <command line>: hardware: expected a hardware preset ("),
        (["memory", "training", "--set", "training.batch_per_tile=x"],
         "wsesim: --set: training.batch_per_tile: expected an integer or 'auto', got \"x\" (a string)"),
        (["memory", "training", "--set", "model.experts=4"], "wsesim: --set: model.top_k: expected at most experts (4)"),
        ([*ATTENTION[:-1], "4"], 'wsesim: bytes_per_value: expected a size like "48 KiB", got "4" (no unit)'),
        ([*ATTENTION[:-1], "4 B", "--tile", "0"], "wsesim: tile: expected a positive integer, got 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], line: str) -> None:
    code, out, err = _main(capsys, *args)
    assert (code, out) == (2, "")
    assert err.startswith(line) and err.count("\n") == 1, err


def test_memory_training_reports_infeasible_without_failing(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    """B 7 does not fit on tiny8 (50,829 B > 49,152 B, see test_memory.py): a result, exit 0."""
    exp = tmp_path / "tiny.yaml"
    exp.write_text(TINY_EXPERIMENT, encoding="utf-8")
    code, out, err = _main(capsys, "memory", "training", str(exp), "--set", "training.batch_per_tile=7", "--json")
    data = json.loads(out)
    assert (code, err, data["feasible"], data["peak_bytes_per_pe"]) == (0, "", False, 50_829)
    assert "attention_bwd" in data["infeasible_reason"] and "49,152 B" in data["infeasible_reason"]
    code, out, _ = _main(capsys, "memory", "training", str(exp), "--set", "training.batch_per_tile=7")
    assert code == 0 and "infeasible: SRAM: phase attention_bwd needs 50,829 B" in out


def test_memory_training_auto_on_the_shipped_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(capsys, "memory", "training", "--json")
    data = json.loads(out)
    assert code == 0 and (data["hardware"], data["model"]) == ("wse2", "qwen3-30b-a3b")
    assert data["batch_per_tile"] == data["auto_batch_per_tile"] > 0 and data["feasible"] is True
    code, out, _ = _main(capsys, "memory", "training")
    assert code == 0 and f"batch_per_tile auto -> {data['auto_batch_per_tile']}" in out


# ----------------------------------------------------- a sweep's workers with stdin and stderr closed

SERVE_TINY = ["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
              "--set", "inference.load.output_len=4", "--set", "hardware.pe.sram=1 MiB",
              "--set", "inference.load.arrival=poisson", "--set", "inference.load.requests=3", "--set", "inference.scheduler.batch=4"]


def test_a_vary_on_two_workers_with_stdin_and_stderr_closed_serves_every_point(tmp_path: Path) -> None:
    """``wsesim infer --vary ... --workers 2 2>&- <&-`` (issue 40): the stream made for the closed stdin
    took fd 2, non-inheritable, so the workers started without a stderr, died, and every point was a
    "worker died" row, exit 0. Now each point is served."""
    def close_stdin_and_stderr() -> None:
        os.close(0)
        os.close(2)

    r = subprocess.run([sys.executable, "-m", "wsesim", *SERVE_TINY, "--vary", "inference.load.rate=1000,2000",
                        "--workers", "2", "--json"], cwd=tmp_path, stdout=subprocess.PIPE,
                       preexec_fn=close_stdin_and_stderr, check=False, timeout=300, text=True)
    assert r.returncode == 0, r.stdout[-2000:]
    assert [row["status"] for row in json.loads(r.stdout)] == ["ok", "ok"]


def test_a_sweep_whose_worker_died_exits_1_and_says_so(tmp_path: Path) -> None:
    """Point 1's worker is killed (as the out-of-memory killer would): the other points are served, its
    row says why, and the command says on stderr that a point was not run and exits 1, not 0."""
    (tmp_path / "dyingpoint.py").write_text(
        "import os\nfrom wsesim.experiments import sweep\nreal = sweep.run_point\n\n\n"
        "def run_point(raw, source, point):\n    if point.index == 1:\n        os.kill(os.getpid(), 9)\n"
        "    return real(raw, source, point)\n", encoding="utf-8")
    argv = [*SERVE_TINY, "--vary", "inference.load.rate=1000,2000,3000", "--workers", "2", "--json"]
    (tmp_path / "driver.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nimport dyingpoint\nfrom wsesim import cli\n"
        "from wsesim.experiments import sweep\nif __name__ == '__main__':\n"
        "    sweep.run_point = dyingpoint.run_point\n"
        f"    sys.exit(cli.main({argv!r}))\n", encoding="utf-8")
    r = subprocess.run([sys.executable, str(tmp_path / "driver.py")], cwd=tmp_path, capture_output=True,
                       stdin=subprocess.DEVNULL, check=False, timeout=300, text=True)
    assert r.returncode == 1, r.stderr[-2000:]
    rows = {str(row["set:inference.load.rate"]): row for row in json.loads(r.stdout)}
    assert [rows[k]["status"] for k in ("1000", "2000", "3000")] == ["ok", "error", "ok"]
    assert rows["2000"]["reason"].startswith("the worker process running this point died")
    assert "wsesim: 1 point of 3 not run: the worker process running each died" in r.stderr


@pytest.mark.parametrize("command", ["", "infer", "kernel", "run"])
def test_help_names_the_limits_and_their_variables(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40: there was no way to override the memory limit; its variable is in every --help that runs work."""
    with pytest.raises(SystemExit):
        cli.main([*([command] if command else []), "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(v in out for v in ("WSESIM_MAX_MEMORY", "WSESIM_MAX_RUN_S", "WSESIM_MAX_SWEEP_S")), out


def test_infer_help_lists_the_inference_keys_and_where_they_are_described(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 (low): ``infer --help`` named no ``inference.*`` key and pointed nowhere."""
    from wsesim.config.inference import InferenceSpec

    with pytest.raises(SystemExit):
        cli.main(["infer", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(k in out for k in InferenceSpec.model_fields if k != "chunk")
    assert "wsesim schema inference" in out and "docs/model.md §11" in out


@pytest.mark.parametrize(("x", "digits", "text"), [
    (3510.4, 3, "3,510"), (44.5, 3, "44.5"), (5.0, 3, "5"), (0.123, 3, "0.123"), (905.6, 4, "905.6"),
    (2.832e-06, 4, "2.832e-06"), (0.0, 3, "0"), (1234567.0, 4, "1,234,567")])
def test_significant_never_writes_a_large_number_in_scientific_notation(x: float, digits: int, text: str) -> None:
    """Issue 40 (low): infer printed "energy per token 3.51e+03 J" (``:,.3g``); ``:g`` where it reads well."""
    from wsesim.cli.common import significant

    assert significant(x, digits) == text
    if "e" not in f"{x:.{digits}g}":
        assert text.replace(",", "") == f"{x:.{digits}g}"  # unchanged where :g read well
