"""Shared fixtures: the repository's preset folders, the tiny wafer and model, and a YAML writer.

The tiny fixtures are the shipped presets ``hardware/tiny8.yaml`` (8 × 8 PEs, 48 KiB each, 1 GHz) and
``workloads/tiny-moe.yaml`` (2 layers, 4 experts), so that golden values can be derived by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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
