"""``wsesim run`` (wsesim.cli.run) through the real entry point (``python -m wsesim``, about a second
each), and in-process (``cli.main``) for the cases that only differ in what is printed or written.

Also: a dense run says nothing of experts, in text or pictures; a result records how it was simulated
and a manifest names the commit; an infeasible run says why; the shipped workloads are found from outside
the checkout.

A bad input is one line on stderr, exit code 2, no traceback, and nothing written.
"""

from __future__ import annotations

import gzip
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import wsesim
from wsesim import cli
from wsesim.analysis.wafer import WaferMaps

TINY_ARGS = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
             "--set", "training.seq_len=32"]
RESULT_KEYS = {"hardware", "model", "experts", "top_k", "seq_len", "batch_per_tile", "tiles", "global_batch",
               "feasible", "infeasible_reason", "step_cycles", "step_time_s", "tokens_per_step",
               "throughput_tokens_per_s", "model_flops_per_step", "mfu", "phases", "io_bytes_in", "io_bytes_out",
               "peak_sram_bytes_per_pe", "expert_load_imbalance", "events", "wall_s"}


def _wsesim(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wsesim", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    d = tmp_path / "cwd"
    d.mkdir()
    return d


def test_run_json(cwd: Path) -> None:
    r = _wsesim("run", *TINY_ARGS, "--json", cwd=cwd)
    assert (r.returncode, r.stderr) == (0, "")
    data = json.loads(r.stdout)
    assert set(data) >= RESULT_KEYS
    assert (data["hardware"], data["model"], data["experts"], data["seq_len"]) == ("tiny8", "tiny-moe", 4, 32)
    assert data["feasible"] is True and data["infeasible_reason"] == ""
    assert data["global_batch"] == data["batch_per_tile"] * data["tiles"]
    assert data["tokens_per_step"] == data["global_batch"] * data["seq_len"]
    assert data["throughput_tokens_per_s"] == pytest.approx(data["tokens_per_step"] / data["step_time_s"])
    assert sum(data["phases"].values()) == pytest.approx(data["step_cycles"])
    assert 0 < data["mfu"] <= 1
    assert list(cwd.iterdir()) == []  # --json alone writes nothing


def test_run_out_and_trace(cwd: Path) -> None:
    """--out writes result.json (the same object --json prints) and wafer.json; --trace writes a trace
    event file, making its folder if needed."""
    r = _wsesim("run", *TINY_ARGS, "--json", "--out", "res", "--trace", "traces/step.json", cwd=cwd)
    assert (r.returncode, r.stderr) == (0, "")
    saved = json.loads((cwd / "res" / "result.json").read_text(encoding="utf-8"))
    assert saved == {k: v for k, v in json.loads(r.stdout).items() if k != "wall_s"}  # the host's time: in the manifest
    maps = WaferMaps.from_dict(json.loads((cwd / "res" / "wafer.json").read_text(encoding="utf-8")))
    assert maps.step_cycles == saved["step_cycles"]
    trace = json.loads((cwd / "traces" / "step.json").read_text(encoding="utf-8"))
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert spans and all({"name", "ts", "dur", "pid", "tid", "args"} <= set(e) for e in spans)
    step_us = sum(e["dur"] for e in spans if e["pid"] == 2)
    assert step_us * trace["otherData"]["clock_hz"] / 1e6 == pytest.approx(saved["step_cycles"], rel=1e-9)
    assert sorted(p.name for p in cwd.rglob("*")) == ["manifest.json", "ops.csv", "res", "result.json", "step.json",
                                                      "traces", "wafer.json"]
    ops = (cwd / "res" / "ops.csv").read_text(encoding="utf-8").splitlines()
    assert ops[0].startswith("op,pass,layer,tile,where,start,cycles") and len(ops) > 10


@pytest.mark.parametrize(("args", "start"), [
    (["--set", "training.bogus=1"], "wsesim: --set: training.bogus: unknown key"),
    (["missing.yaml"], "wsesim: missing.yaml: no such file"),
    (["--trace", "trace.txt", "--out", "o"], "wsesim: --trace: expected a .json or .json.gz file name"),
    (["--out", "o", "--png", "afile"], "wsesim: afile: expected a folder for the output"),
    (["--out", "o", "--trace", "afile/sub/t.json"], "wsesim: afile/sub: expected a folder for the output"),
], ids=["unknown-key", "missing-file", "trace-name", "png-is-a-file", "trace-under-a-file"])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(args: list[str], start: str, cwd: Path) -> None:
    (cwd / "afile").write_text("x", encoding="utf-8")
    r = _wsesim("run", *TINY_ARGS, *args, cwd=cwd)
    assert r.returncode == 2
    assert r.stdout == ""
    [line] = r.stderr.splitlines()
    assert line.startswith(start)
    assert [p.name for p in cwd.iterdir()] == ["afile"]


# ------------------------------------------------------------------------------------------- in-process


def test_human_output_lists_what_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", *TINY_ARGS, "--out", "o"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0].startswith("tiny-moe on tiny8: E=4 top_k=2 seq_len=32 B=")
    assert any(line.startswith("throughput ") and line.endswith(" tokens/s") for line in lines)
    assert lines[-4:] == [f"wrote {Path('o') / name}" for name in ("result.json", "ops.csv", "wafer.json", "manifest.json")]


def test_png_draws_the_wafer_pictures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """--png hands the run's wafer maps to plotting.plot_wafer (replaced here: drawing is test_plotting's)."""
    import wsesim.output.plotting

    drawn: list[tuple[Any, Path]] = []

    def fake_plot_wafer(maps: Any, out: Path) -> list[Path]:
        drawn.append((maps, out))
        return [out / "wafer_busy.png"]

    monkeypatch.setattr(wsesim.output.plotting, "plot_wafer", fake_plot_wafer)
    assert cli.main(["run", *TINY_ARGS, "--png", str(tmp_path / "pics"), "--json"]) == 0
    [(maps, out)] = drawn
    assert isinstance(maps, WaferMaps) and (maps.rows, maps.cols) == (8, 8)
    assert out == tmp_path / "pics" and out.is_dir()
    assert json.loads(capsys.readouterr().out)["feasible"] is True


def test_infeasible_run_is_a_result_not_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "traces" / "t.json"
    out = tmp_path / "o"
    assert cli.main(["run", *TINY_ARGS, "--set", "training.batch_per_tile=5000", "--json", "--trace", str(trace),
                     "--out", str(out)]) == 0
    stdout, stderr = capsys.readouterr()
    data = json.loads(stdout)
    assert data["feasible"] is False and "SRAM" in data["infeasible_reason"]
    assert data["tokens_per_step"] == 5000 * 32
    assert stderr == "wsesim: no trace: the configuration is infeasible\n"
    assert not trace.parent.exists()  # not even its folder
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "result.json"]  # no wafer maps: no step ran


# ---------------------------------------------------------------------- outputs refused before the run


@pytest.mark.parametrize("option", [("--out", ""), ("--out", "/sub/dir"), ("--png", ""), ("--trace", "/t.json")],
                         ids=["out", "out-below", "png", "trace"])
def test_a_read_only_output_folder_is_refused_before_the_step_runs(
        read_only: Path, option: tuple[str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """It used to simulate the whole step and then fail writing (PermissionError: an internal error)."""
    import wsesim.cli.run

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the step ran although its output could not be written")

    monkeypatch.setattr(wsesim.cli.run, "run", never)
    flag, below = option
    code = cli.main(["run", *TINY_ARGS, flag, f"{read_only}{below}"])
    out, err = capsys.readouterr()
    named = f"{read_only}{below}" if flag != "--trace" else str(read_only)
    where = f" (it would be made in {read_only})" if below == "/sub/dir" else ""
    assert (code, out) == (2, "")
    assert err.startswith(f"wsesim: {named}: expected a folder wsesim can write to{where}, got a read-only one (")
    assert err.endswith(")\n") and err.count("\n") == 1
    assert list(read_only.iterdir()) == []  # the probe leaves no file behind


def test_a_trace_path_that_is_a_directory(cwd: Path) -> None:
    """``--trace t.json`` where t.json is a folder failed at the very end (IsADirectoryError, exit 1)."""
    (cwd / "t.json").mkdir()
    r = _wsesim("run", *TINY_ARGS, "--trace", "t.json", "--out", "o", cwd=cwd)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "wsesim: --trace: expected a .json or .json.gz file name for the trace, got the directory 't.json'\n"
    assert [p.name for p in cwd.iterdir()] == ["t.json"] and list((cwd / "t.json").iterdir()) == []


# ------------------------------------------------------------------- issue 12 items 15, 16: what is written


def test_the_same_run_twice_writes_the_same_result_files_and_a_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """result.json, wafer.json and a .json.gz trace are the same bytes twice (the wall clock and the time of
    day are only in manifest.json); the manifest holds the resolved specs after presets and --set, the
    overrides as given, the command line and the versions."""
    monkeypatch.chdir(tmp_path)
    args = ["run", *TINY_ARGS, "--set", "hardware.pe.sram=96 KiB", "--set", "training.tiles=2"]
    for name in ("a", "b"):
        assert cli.main([*args, "--out", name, "--trace", f"{name}/step.json.gz"]) == 0
    capsys.readouterr()
    for name in ("result.json", "ops.csv", "wafer.json", "step.json.gz"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    trace = json.loads(gzip.decompress((tmp_path / "a" / "step.json.gz").read_bytes()))
    assert any(e["ph"] == "X" for e in trace["traceEvents"])
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["kind"] == "run" and manifest["wsesim_version"] == wsesim.__version__
    assert manifest["command"] == "wsesim " + " ".join([*args[:-4], "--set", "'hardware.pe.sram=96 KiB'",
                                                       *args[-2:], "--out", "a", "--trace", "a/step.json.gz"])
    assert manifest["overrides"]["set"] == [*TINY_ARGS[5::2], "hardware.pe.sram=96 KiB", "training.tiles=2"]
    assert (manifest["overrides"]["hardware_ref"], manifest["overrides"]["model_ref"]) == ("tiny8", "tiny-moe")
    assert manifest["hardware"]["pe"]["sram_bytes"] == 96 * 1024 and manifest["hardware"]["name"] == "tiny8"
    assert manifest["model"]["experts"] == 4 and manifest["experiment"]["training"]["tiles"] == 2
    assert manifest["experiment"]["training"]["seq_len"] == 32
    assert manifest["sources"] == {"hardware": "hardware/tiny8.yaml", "model": "workloads/tiny-moe.yaml"}
    assert manifest["files"] == ["result.json", "ops.csv", "wafer.json", "step.json.gz"]
    assert manifest["wall_s"] > 0 and manifest["created"].endswith("+00:00")
    assert manifest["python"] == platform.python_version() and "numpy" in manifest["packages"]
    assert "wall_s" not in json.loads((tmp_path / "a" / "result.json").read_text(encoding="utf-8"))


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


DENSE_ARGS = [*TINY_ARGS, "--set", "model.experts=0", "--set", "model.top_k=0", "--set",
              "model.expert_intermediate=0", "--set", "model.ffn_intermediate=64"]
ROOT = Path(__file__).resolve().parents[2]


def test_a_dense_run_prints_nothing_about_experts(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", *DENSE_ARGS]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tiny-moe on tiny8: dense seq_len=32 ")
    assert "E=0" not in out and "top_k" not in out and "expert load imbalance" not in out
    assert cli.main(["run", *TINY_ARGS]) == 0  # an MoE run still shows them
    out = capsys.readouterr().out
    assert "E=4 top_k=2" in out and "expert load imbalance" in out


def test_a_dense_run_draws_no_pictures_of_experts_and_says_why(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", *DENSE_ARGS, "--png", str(tmp_path / "pics")]) == 0
    out, err = capsys.readouterr()
    assert sorted(p.name for p in (tmp_path / "pics").glob("*.png")) == ["gantt.png", "wafer_busy.png",
                                                                          "wafer_sram.png"]
    assert err.startswith("wsesim: left out wafer_links.png, wafer_placement.png: the model has no experts")
    assert "wafer_placement" not in out


def test_a_result_records_how_it_was_simulated(tmp_path: Path) -> None:
    assert cli.main(["run", *TINY_ARGS, "--set", "simulation.placement=snake", "--set", "simulation.moe_mapping=in_place",
                     "--out", str(tmp_path / "o")]) == 0
    result = json.loads((tmp_path / "o" / "result.json").read_text(encoding="utf-8"))
    assert {k: result[k] for k in ("moe_mapping", "engine", "granularity", "placement", "compute")} == {
        "moe_mapping": "in_place", "engine": "fast", "granularity": "pe", "placement": "snake", "compute": "constant"}


def test_a_manifest_names_the_commit(tmp_path: Path) -> None:
    assert cli.main(["run", *TINY_ARGS, "--out", str(tmp_path / "o")]) == 0
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text(encoding="utf-8"))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip()
    assert commit and manifest["wsesim_commit"] == commit


def test_hardware_that_cannot_take_the_experiments_granularity_names_the_flag_and_the_fix(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--hardware", "tiny8", "--model", "tiny-moe"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wsesim: --hardware: simulation.granularity: expected a block of at most half")
    assert "add --set simulation.granularity=pe" in err and err.count("\n") == 1
    # set on the command line, the same rule is --set's error, as before
    assert cli.main(["run", "--hardware", "tiny8", "--set", "simulation.granularity=block:16"]) == 2
    assert capsys.readouterr().err.startswith("wsesim: --set: simulation:")


@pytest.mark.parametrize(("flag", "kind"), [("--model", "model"), ("--hardware", "hardware")])
def test_a_bad_name_is_blamed_on_the_flag(flag: str, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", flag, "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"wsesim: {flag}: expected a {kind} preset (") and "experiment.yaml" not in err


def test_a_relative_model_path_is_the_working_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "mine.yaml").write_text((ROOT / "workloads" / "tiny-moe.yaml").read_text().replace(
        "name: tiny-moe", "name: mine"))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", *TINY_ARGS[:2], "--model", "mine.yaml", *TINY_ARGS[4:], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "mine"
