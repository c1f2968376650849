"""Shared fixtures: the repository's preset folders, the tiny wafer and model, and a YAML writer.

The tiny fixtures are the shipped presets ``hardware/tiny8.yaml`` (8 × 8 PEs, 48 KiB each, 1 GHz) and
``workloads/tiny-moe.yaml`` (2 layers, 4 experts), so that golden values can be derived by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from wsesim.config.loader import load_hardware, load_model
from wsesim.config.specs import HardwareSpec, ModelSpec

REPO = Path(__file__).resolve().parent.parent
HARDWARE_DIR = REPO / "hardware"
WORKLOADS_DIR = REPO / "workloads"


@pytest.fixture(scope="session")
def tiny8() -> HardwareSpec:
    return load_hardware("tiny8")


@pytest.fixture(scope="session")
def tiny_moe() -> ModelSpec:
    return load_model("tiny-moe")


@pytest.fixture(scope="session")
def tiny8_text() -> str:
    return (HARDWARE_DIR / "tiny8.yaml").read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def tiny_moe_text() -> str:
    return (WORKLOADS_DIR / "tiny-moe.yaml").read_text(encoding="utf-8")


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[str, str], Path]:
    """``write_yaml("name.yaml", text)`` writes a file under ``tmp_path`` and returns its path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def watch_points(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[Any], None]], list[int]]:
    """``watch_points(before)`` calls ``before(point)`` ahead of each point a sweep runs (workers=1: in this
    process) and returns the list of the point indices run, filled as they run."""
    from wsesim.experiments import sweep as sweep_module

    run_point = sweep_module.run_point

    def watch(before: Callable[[Any], None]) -> list[int]:
        ran: list[int] = []

        def watched(raw: dict[str, Any], source: str, point: Any) -> dict[str, Any]:
            before(point)
            ran.append(point.index)
            return run_point(raw, source, point)

        monkeypatch.setattr(sweep_module, "run_point", watched)
        return ran

    return watch
