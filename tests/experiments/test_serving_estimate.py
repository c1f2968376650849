"""The serving work estimate (experiments/serving_estimate.py) and the memory limit's override
(``WSESIM_MAX_MEMORY``, experiments/machine.py): issue 40's false refusals and under-estimates."""

from __future__ import annotations

from typing import Any

import pytest

from wsesim import cli
from wsesim.config.errors import ConfigError
from wsesim.config.inference import load_inference
from wsesim.config.loader import input_file
from wsesim.experiments import machine
from wsesim.experiments.serving_estimate import (
    PIECE_SECONDS,
    SERVE_ITERATION,
    SPAN,
    ServingEstimate,
    check_serving,
    serving_estimate,
)
from wsesim.sim.programs.mapping import map_stages

POISSON = {"inference.load.arrival": "poisson", "inference.load.rate": "2 /s", "inference.scheduler.batch": 64}


def _spec(**overrides: Any) -> Any:
    return load_inference(str(input_file("workloads/llama3-8b/serve.yaml")), overrides=overrides).spec


def test_the_memory_limit_is_overridden_by_wsesim_max_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset: 0.8 of the machine's; set: the size given, in any size unit; the refusal names the variable."""
    monkeypatch.delenv("WSESIM_MAX_MEMORY", raising=False)
    assert machine.memory_limit() == pytest.approx(0.8 * machine.machine_memory())
    assert "WSESIM_MAX_MEMORY=<size> allows more" in machine.too_much_memory()
    monkeypatch.setenv("WSESIM_MAX_MEMORY", "3 GiB")
    assert machine.memory_limit() == 3 * 2**30
    e = ServingEstimate(1, 1000, 10_000_000, "fast", visits=10**10)  # 10^10 visits: 4 TB
    with pytest.raises(ConfigError, match=r"needs more memory than WSESIM_MAX_MEMORY allows \(3\.2 GB\)"):
        check_serving(e)
    monkeypatch.setenv("WSESIM_MAX_MEMORY", "10 PB")
    monkeypatch.setenv("WSESIM_MAX_RUN_S", "1e12")
    check_serving(e)  # the user's word: allowed
    for bad in ("lots", "40", "-3 GB", "0 GB"):
        monkeypatch.setenv("WSESIM_MAX_MEMORY", bad)
        with pytest.raises(ConfigError, match=r"^WSESIM_MAX_MEMORY: expected a .*size"):
            machine.memory_limit()


def test_the_override_reaches_the_cli_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WSESIM_MAX_MEMORY", "1 MB")  # below the interpreter's own: every run refused
    assert cli.main(["kernel", "gemm", "--grid", "4x4", "--shape", "4x4x4"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "needs more memory than WSESIM_MAX_MEMORY allows (1.0 MB)" in err[0]


def test_a_load_under_continuous_batching_counts_stage_iterations_not_token_visits() -> None:
    """Issue 40: 65,536 Poisson requests of 128 tokens under continuous batching were costed as 400 B per
    (stage × request × token) visit, 26 GB on the 70B's stages, and refused (they take a few GB). Each
    stage iteration holds at least one token or one prompt, so a stage runs at most 65,536 × 129
    iterations, each ``SERVE_ITERATION``: the 8B's 2 stages 17 M at most."""
    spec = _spec(hardware="wse3", **POISSON, **{"inference.load.requests": 65536, "inference.grid": "755x585"})
    mapping = map_stages(spec)
    e = serving_estimate(spec, mapping)
    S = len(mapping.stages)
    assert e.continuous and e.visits == S * 65536 * (128 + 1)
    assert e.bytes == pytest.approx(250e6 + SERVE_ITERATION["fast"][1] * e.visits)
    assert e.bytes < 8e9  # was S × 65,536 × 128 × 400 B


def test_together_counts_the_longest_output_once_per_stage() -> None:
    """Eight requests arriving together decode as one batch: 8 prompts' passes and 128 iterations a stage,
    not 8 × 128."""
    spec = _spec(hardware="wse3", **{"inference.scheduler.batch": 8, "inference.grid": "755x585"})
    mapping = map_stages(spec)
    assert serving_estimate(spec, mapping).visits == len(mapping.stages) * (128 + 8)


def test_chunked_prefill_counts_its_pieces_and_is_refused_under_a_short_limit(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40: a 20,000-token prompt in pieces of one token (``token_budget: 1``, chunked) is 20,000
    passes through the stage, each costed at a new context (40 s of CPU for two), once estimated as one
    visit and accepted under a 1 s limit."""
    sets = {"model": "llama3.2-1b", "hardware": "wse3", "inference.load.prompt_len": 20000, "inference.load.output_len": 2,
            "inference.scheduler.token_budget": 1, "inference.scheduler.prefill": "chunked", "inference.scheduler.batch": 2,
            "inference.grid": "755x1170"}
    spec = _spec(**sets)
    mapping = map_stages(spec)
    e = serving_estimate(spec, mapping)
    S = len(mapping.stages)
    assert e.pieces == S * 40000 and e.seconds >= PIECE_SECONDS * 40000
    monkeypatch.setenv("WSESIM_MAX_RUN_S", "5")
    argv = ["infer", "--model", "llama3.2-1b", "--hardware", "wse3"]
    for k, v in sets.items():
        if k.startswith("inference."):
            argv += ["--set", f"{k}={v}"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "40,000 prompt passes" in err[0] and "token_budget" in err[0], err


def test_a_chrome_trace_is_counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40: ``--trace`` under continuous batching builds every iteration's spans (a 3-million-row
    request trace ended in MemoryError, estimated without them): each iteration costs ``SPAN`` more."""
    spec = _spec(hardware="wse3", **POISSON, **{"inference.load.requests": 100, "inference.grid": "755x585"})
    mapping = map_stages(spec)
    plain, traced = serving_estimate(spec, mapping), serving_estimate(spec, mapping, spans=True)
    assert traced.bytes - plain.bytes == pytest.approx(SPAN[1] * plain.visits)
    assert traced.seconds - plain.seconds == pytest.approx(SPAN[0] * plain.visits)
    monkeypatch.setenv("WSESIM_MAX_MEMORY", f"{(plain.bytes + traced.bytes) / 2:.0f} B")
    argv = ["infer", "--hardware", "wse3", "--set", "inference.load.arrival=poisson", "--set", "inference.load.rate=2 /s",
            "--set", "inference.scheduler.batch=64", "--set", "inference.load.requests=100", "--set", "inference.grid=755x585"]
    assert cli.main([*argv, "--trace", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "with --trace" in err[0] and not (tmp_path / "t.json").exists()
