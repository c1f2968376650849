"""JSON Schemas of wsesim's YAML kinds, made from the specs, for editors (``wsesim schema``).

What a schema says is what ``wsesim validate`` checks, as far as JSON Schema can say it: the YAML key
names (the specs' aliases), unknown keys refused, each quantity a string matching the unit spellings
of ``units.unit_pattern`` (its range in the description, e.g. 'a size, e.g. "48 KiB" (1 KiB to
1 TiB)'), integers with their bounds, and ``kind:`` required. Cross-field rules (top_k ≤ experts, the
staging buffer within the SRAM) and the physical bounds of unit strings are left to ``wsesim validate``.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from .gpu import GpuSpec
from .inference import InferenceExperimentSpec
from .loader import preset_names
from .specs import SPEC_KINDS

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_OWN_KINDS: dict[str, type[BaseModel]] = {**SPEC_KINDS, "gpu": GpuSpec, "inference": InferenceExperimentSpec}
KINDS = (*_OWN_KINDS, "sweep")  # every kind ``wsesim validate`` knows (a sweep is validated by a later layer)


def json_schema(kind: str, spec: type[BaseModel] | None = None) -> dict[str, Any]:
    """The JSON Schema of a ``kind:`` file. ``spec`` is the kind's model; it defaults to the config
    layer's own (hardware, model, experiment) and must be given for a sweep (``SweepSpec`` lives with
    the sweep runner, a later layer)."""
    spec = spec or _OWN_KINDS[kind]
    schema = _raw(spec)
    if kind in ("experiment", "inference"):
        _references(schema)
    if kind == "sweep":  # base: a path to an experiment file, or an inline experiment (training or serving)
        for name, base in (("ExperimentSpec", SPEC_KINDS["experiment"]), ("InferenceExperimentSpec",
                                                                          InferenceExperimentSpec)):
            experiment = _raw(base)
            _references(experiment)
            defs = experiment.pop("$defs", {})
            schema.setdefault("$defs", {}).update({**defs, name: experiment})
        schema["properties"]["base"] = {
            "description": "the base experiment: a path (relative to this file) or an inline experiment "
                           "mapping, a training experiment (kind: experiment) or a serving one "
                           "(kind: inference)",
            "anyOf": [{"type": "string"}, {"$ref": "#/$defs/ExperimentSpec"},
                      {"$ref": "#/$defs/InferenceExperimentSpec"}]}
    return {"$schema": DIALECT, "title": f"wsesim {kind}",
            "description": f"A wsesim {kind} file (kind: {kind}); see the README's Configuration reference.",
            **{k: v for k, v in schema.items() if k not in ("title", "description")}}


def _raw(spec: type[BaseModel]) -> dict[str, Any]:
    """pydantic's schema by alias, with ``kind`` required and no generated titles (the YAML key is
    the name an editor should show)."""
    schema = copy.deepcopy(spec.model_json_schema(by_alias=True, mode="validation"))
    for node in [schema, *schema.get("$defs", {}).values()]:
        node.pop("title", None)
        for prop in node.get("properties", {}).values():
            prop.pop("title", None)
    _plain_descriptions(schema)
    kind = schema["properties"]["kind"]
    schema["properties"]["kind"] = {"const": kind.get("const", kind.get("default"))}
    schema["required"] = ["kind", *[r for r in schema.get("required", []) if r != "kind"]]
    return schema


def _plain_descriptions(node: Any) -> None:
    """Every description as an editor shows it, plain text: the docstrings' RST ``code`` as `code`."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                node[key] = value.replace("``", "`")
            else:
                _plain_descriptions(value)
    elif isinstance(node, list):
        for item in node:
            _plain_descriptions(item)


def _references(experiment: dict[str, Any]) -> None:
    """An experiment's ``hardware:`` and ``model:`` may be a preset name or a path as well as a mapping."""
    for part, spec in (("hardware", "HardwareSpec"), ("model", "ModelSpec")):
        presets = ", ".join(preset_names(part))
        experiment["properties"][part] = {
            "description": f"a {part} preset ({presets}), a path relative to this file, or an inline mapping",
            "anyOf": [{"type": "string", "minLength": 1}, {"$ref": f"#/$defs/{spec}"}]}
