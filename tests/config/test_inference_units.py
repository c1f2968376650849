"""Issue 40, item 4: ``inference.load.rate`` takes a unit as every other quantity does ("2 /s"), a bare number
still working; a grid beyond the mesh is blamed on ``inference.grid``, not on ``inference``."""

from __future__ import annotations

from typing import Any

import pytest

from wsesim import cli
from wsesim.config.inference import load_inference

POISSON = {"inference.load.arrival": "poisson", "inference.load.requests": 4}


@pytest.mark.parametrize(("rate", "per_second"), [("2 /s", 2.0), ("0.5 requests/s", 0.5), ("3/s", 3.0),
                                                  ("1e3 /s", 1000.0), (4, 4.0), (1.5, 1.5)])
def test_a_rate_with_its_unit_or_a_bare_number(rate: Any, per_second: float) -> None:
    spec = load_inference(hardware="tiny8", model="tiny-moe", overrides={**POISSON, "inference.load.rate": rate}).spec
    assert spec.inference.load.rate == per_second


@pytest.mark.parametrize("rate", ["2 Hz", "fast", "0 /s", "2e6 /s"])
def test_a_bad_rate_is_one_line_naming_the_key(rate: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.arrival=poisson",
            "--set", "inference.load.requests=4", "--set", f"inference.load.rate={rate}"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("wsesim: --set: inference.load.rate: expected ")


def test_a_grid_beyond_the_mesh_is_blamed_on_inference_grid(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.grid=1000x1000"]) == 2
    err = capsys.readouterr().err
    assert err == 'wsesim: --set: inference.grid: expected a grid within the 8x8 mesh, got "1000x1000"\n'
