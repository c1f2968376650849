"""Issue 29 deliver 2: serving and kernels from Python beside training (``wsesim.infer``, ``wsesim.kernel``,
``wsesim.load_inference``), and a run's folder and trace written from Python as the commands write them
(``wsesim.write_run``, ``wsesim.write_trace``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import wsesim
from wsesim import cli

TINY = {"inference.load.prompt_len": 16, "inference.load.output_len": 4, "hardware.pe.sram": "1 MiB"}
TINY_ARGS = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
             "--set", "inference.load.output_len=4", "--set", "hardware.pe.sram=1 MiB"]


def test_infer_from_python_is_the_commands_result(capsys: pytest.CaptureFixture[str]) -> None:
    served = wsesim.infer(hardware="tiny8", model="tiny-moe", overrides=TINY)
    assert cli.main(["infer", *TINY_ARGS, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    got = served.result.to_dict()
    assert {k: v for k, v in got.items() if k != "wall_s"} == {k: v for k, v in printed.items() if k != "wall_s"}
    loaded = wsesim.load_inference(hardware="tiny8", model="tiny-moe", overrides=TINY)
    assert wsesim.infer(loaded).result.ttft_s == served.result.ttft_s


def test_infer_search_and_its_objective(capsys: pytest.CaptureFixture[str]) -> None:
    best = wsesim.infer(hardware="tiny8", model="tiny-moe", overrides=TINY, search=True, objective="ttft")
    assert best.result.feasible
    with pytest.raises(wsesim.ConfigError, match="objective: expected one of tpot, ttft, throughput"):
        wsesim.infer(hardware="tiny8", model="tiny-moe", overrides=TINY, search=True, objective="fast")


def test_an_error_in_overrides_names_overrides() -> None:
    with pytest.raises(wsesim.ConfigError) as e:
        wsesim.infer(overrides={"inference.scheduler.batch": 0})
    assert str(e.value).startswith("overrides: inference.scheduler.batch: expected a value > 0")
    with pytest.raises(wsesim.ConfigError, match="^overrides: model: expected a model preset"):
        wsesim.load_inference(overrides={"model": "nope"})


def test_kernel_from_python_is_the_commands_result(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's GEMV: 1,326 cycles on 420 × 420 PEs of a WSE-2 (``wsesim kernel gemv``)."""
    gemv = wsesim.kernel("gemv", "420x420", shape="1x16384x16384")
    assert cli.main(["kernel", "gemv", "--grid", "420x420", "--shape", "1x16384x16384", "--json"]) == 0
    assert gemv.to_dict() == json.loads(capsys.readouterr().out)
    assert gemv.cycles == 1326
    assert wsesim.kernel("gemv", (420, 420), shape=(1, 16384, 16384)).cycles == 1326
    reduce = wsesim.kernel("allreduce", "4x4", hardware="tiny8", wavelets=2)
    assert reduce.wavelets == 2 and reduce.to_dict()["wavelets"] == 2
    with pytest.raises(wsesim.ConfigError, match='^shape: expected MxKxN'):
        wsesim.kernel("gemv", "4x4", shape="1x2")
    with pytest.raises(wsesim.ConfigError, match="^overrides: hardware.pe.sram"):
        wsesim.kernel("gemv", "4x4", shape="1x8x8", overrides={"hardware.pe.sram": 48})


def test_write_run_and_trace_of_a_serving_run_are_the_commands_files(tmp_path: Path) -> None:
    loaded = wsesim.load_inference(hardware="tiny8", model="tiny-moe", overrides=TINY)
    written = wsesim.write_run(wsesim.infer(loaded), tmp_path / "py", loaded)
    assert [p.name for p in written] == ["result.json", "requests.csv", "ops.csv", "manifest.json"]
    assert wsesim.write_trace(wsesim.infer(loaded, spans=True), tmp_path / "py" / "t.json.gz", loaded) is not None
    assert cli.main(["infer", *TINY_ARGS, "--out", str(tmp_path / "cli"), "--trace",
                     str(tmp_path / "cli" / "t.json.gz")]) == 0
    for name in ("result.json", "requests.csv", "ops.csv", "t.json.gz"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert json.loads(gzip.decompress((tmp_path / "py" / "t.json.gz").read_bytes()))["traceEvents"]
    assert json.loads((tmp_path / "py" / "manifest.json").read_text())["kind"] == "infer"
    with pytest.raises(ValueError, match="loaded="):
        wsesim.write_trace(wsesim.infer(loaded), tmp_path / "x.json")


def test_write_run_and_trace_of_a_training_run_are_the_commands_files(tmp_path: Path) -> None:
    overrides = {"training.seq_len": 16, "training.batch_per_tile": 1, "simulation.granularity": "pe"}
    loaded = wsesim.load_experiment(hardware="tiny8", model="tiny-moe", overrides=overrides)
    run = wsesim.simulate_experiment(loaded.spec)
    written = wsesim.write_run(run, tmp_path / "py", loaded)
    assert [p.name for p in written] == ["result.json", "ops.csv", "wafer.json", "manifest.json"]
    wsesim.write_trace(run, tmp_path / "py" / "step.json")
    assert cli.main(["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "training.seq_len=16",
                     "--set", "training.batch_per_tile=1", "--set", "simulation.granularity=pe",
                     "--out", str(tmp_path / "cli"), "--trace", str(tmp_path / "cli" / "step.json")]) == 0
    for name in ("result.json", "ops.csv", "wafer.json", "step.json"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name


def test_the_new_names_are_exported() -> None:
    assert {"infer", "kernel", "load_inference", "write_run", "write_trace"} <= set(wsesim.__all__)
