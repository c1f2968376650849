"""JSON Schemas of the YAML kinds (wsesim.config.schema, ``wsesim schema``; issue 12 item 20): YAML key
names, unit strings as patterned strings, and what they accept agrees with ``wsesim validate`` on every
shipped file and on typical mistakes. jsonschema, where installed, checks them as Draft 2020-12."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from wsesim.config.schema import DIALECT, KINDS, json_schema
from wsesim.config.units import unit_pattern
from wsesim.experiments.sweep import SweepSpec

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted([*(REPO / "hardware").rglob("*.yaml"), *(REPO / "workloads").rglob("*.yaml")])


def schema_of(kind: str) -> dict[str, Any]:
    return json_schema(kind, SweepSpec if kind == "sweep" else None)


def _kind_of(path: Path) -> str:
    return str(yaml.safe_load(path.read_text(encoding="utf-8"))["kind"])


def test_every_kind_has_a_schema_in_yaml_key_names() -> None:
    hw = schema_of("hardware")
    assert (hw["$schema"], hw["title"], hw["type"]) == (DIALECT, "wsesim hardware", "object")
    assert hw["required"][0] == "kind" and hw["properties"]["kind"] == {"const": "hardware"}
    assert hw["additionalProperties"] is False
    assert set(hw["properties"]) == {"kind", "name", "description", "mesh", "clock", "pe", "fabric", "io", "memoryx",
                                     "runtime", "energy"}
    pe = hw["$defs"]["PESpec"]["properties"]
    assert set(pe) == {"sram", "simd_width", "sram_bandwidth", "reserved_sram",  # aliases, not sram_bytes
                       "simd_width_fp32", "sram_read", "sram_write", "instruction_issue",
                       "partial_sum_width", "reduction", "simd_width_mixed", "microthreads"}
    assert pe["sram"] == {"type": "string", "pattern": unit_pattern("size"),
                          "description": 'a size, e.g. "48 KiB" (from 1 KiB to 1 TiB)'}
    assert pe["reserved_sram"]["anyOf"][0] == {"type": "number", "minimum": 0.0, "exclusiveMaximum": 1.0}
    assert pe["simd_width"] == {"type": "integer", "exclusiveMinimum": 0, "maximum": 65_536}
    assert hw["properties"]["clock"]["description"] == 'a frequency, e.g. "850 MHz" (from 1 MHz to 100 GHz)'
    model = schema_of("model")
    assert model["properties"]["experts"]["maximum"] == 65_536 and "num_experts" not in model["properties"]
    experiment = schema_of("experiment")
    assert experiment["properties"]["hardware"]["anyOf"] == [{"type": "string", "minLength": 1},
                                                             {"$ref": "#/$defs/HardwareSpec"}]
    assert "wse2" in experiment["properties"]["hardware"]["description"]
    sweep = schema_of("sweep")
    assert sweep["properties"]["base"]["anyOf"][1] == {"$ref": "#/$defs/ExperimentSpec"}
    assert "HardwareSpec" in sweep["$defs"] and "ExperimentSpec" in sweep["$defs"]


def _walk(schema: dict[str, Any], node: dict[str, Any]) -> Any:
    """Every $ref in ``node`` resolves inside ``schema``."""
    for key, value in node.items():
        if key == "$ref":
            assert value.startswith("#/$defs/") and value.removeprefix("#/$defs/") in schema["$defs"], value
        elif isinstance(value, dict):
            _walk(schema, value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _walk(schema, item)


@pytest.mark.parametrize("kind", KINDS)
def test_every_reference_resolves(kind: str) -> None:
    schema = schema_of(kind)
    _walk(schema, schema)


# ------------------------------------------------------------------------------- checked by jsonschema


def _validator(kind: str) -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = schema_of(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_file_passes_its_schema(path: Path) -> None:
    validator = _validator(_kind_of(path))
    errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text(encoding="utf-8")))]
    assert errors == []


@pytest.mark.parametrize(("kind", "change", "why"), [
    ("hardware", lambda d: d["pe"].update(sram=48), "is not of type 'string'"),
    ("hardware", lambda d: d["pe"].update(sram="48 MHz"), "does not match"),
    ("hardware", lambda d: d["pe"].update(srma="48 KiB"), "Additional properties are not allowed"),
    ("hardware", lambda d: d.update(clock="fast"), "does not match"),
    ("hardware", lambda d: d["mesh"].update(rows=0), "less than or equal to the minimum of 0"),
    ("hardware", lambda d: d["runtime"].update(gemm_efficiency=2), "is not valid under any of the given schemas"),
    ("hardware", lambda d: d.update(name="a\x1bb"), "does not match"),
    ("hardware", lambda d: d.pop("kind"), "'kind' is a required property"),
    ("model", lambda d: d.update(experts=65_537), "is greater than the maximum of 65536"),
    ("model", lambda d: d.update(dtype="int4"), "is not one of"),
    ("experiment", lambda d: d["training"].update(batch_per_tile="many"), "is not valid under any of"),
    ("experiment", lambda d: d.update(hardware=[1]), "is not valid under any of"),
    ("sweep", lambda d: d["grid"].update({"model.experts": []}), "should be non-empty"),
])
def test_typical_mistakes_fail_the_schema(kind: str, change: Any, why: str) -> None:
    validator = _validator(kind)
    path = {"hardware": "hardware/tiny8.yaml", "model": "workloads/tiny-moe.yaml",
            "experiment": "workloads/qwen3-30b-a3b/experiment.yaml", "sweep": "workloads/qwen3-30b-a3b/bta-paper.yaml"}
    data = yaml.safe_load((REPO / path[kind]).read_text(encoding="utf-8"))
    change(data)
    messages = [e.message for e in validator.iter_errors(data)]
    assert any(why in m for m in messages), messages
