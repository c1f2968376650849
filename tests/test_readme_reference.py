"""The README's reference stays complete (issue 29, item 9): every shipped preset is in its preset table,
and every key of a ``kind: inference`` file and of a model is in its configuration reference; and its
serving paragraph's mapping is the one the CSV has (Medium 7: "the smaller grids need 4 and 9 stages ...
and a second wafer from 8 requests on")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wsesim.config.inference import InferenceExperimentSpec, InferenceSpec, load_inference
from wsesim.config.specs import ModelSpec
from wsesim.sim.programs.mapping import map_stages

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("folder", ["hardware", "workloads", "hardware/interconnect"])
def test_every_preset_file_is_in_the_preset_table(folder: str) -> None:
    table = _section("Presets").split("\n\n", 1)[0]
    names = set(re.findall(r"`([^`]+)`", table))
    missing = [p.stem for p in sorted((ROOT / folder).glob("*.yaml")) if p.stem not in names]
    assert missing == []


def _paragraph(kind: str) -> str:
    reference = _section("Configuration reference")
    return reference.split(f"(`kind: {kind}`", 1)[1].split("\n\n", 1)[0]


def test_every_inference_key_is_documented() -> None:
    text = _paragraph("inference")
    keys = [*(k for k in InferenceExperimentSpec.model_fields if k not in ("kind", "inference")),
            *InferenceSpec.model_fields]
    assert [k for k in keys if f"`{k}`" not in text] == []


def test_every_model_key_is_documented() -> None:
    text = _paragraph("model")
    assert [k for k in ModelSpec.model_fields if k != "kind" and f"`{k}`" not in text] == []


def test_the_serving_paragraphs_mapping_is_the_runs() -> None:
    """LLaMA3-8B on WSE-2s, 4,096 + 128 tokens: at one request 375² takes 4 stages and 250² 9, on one wafer;
    at 8 requests both take a second wafer (the KV cache of 8 requests)."""
    text = " ".join(_section("Serving: prefill and decode with the weights resident").split())
    assert "the smaller grids need 4 and 9 stages to hold the model (and a second wafer from 8 requests on)" in text

    def mapping(grid: str, batch: int) -> tuple[int, int]:  # as run_inference maps it, before serving
        mp = map_stages(load_inference(overrides={"inference.grid": grid, "inference.scheduler.batch": batch}).spec)
        return len(mp.stages), mp.systems

    assert [mapping("375x375", 1), mapping("250x250", 1)] == [(4, 1), (9, 1)]
    assert [mapping("375x375", 4)[1], mapping("250x250", 4)[1]] == [1, 1]
    assert [mapping("375x375", 8)[1], mapping("250x250", 8)[1]] == [2, 2]
