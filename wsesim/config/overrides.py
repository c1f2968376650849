"""``--set KEY.PATH=VALUE``: one override read from the command line (``parse_override``, the value a YAML
scalar) and a raw tree with its dotted keys set (``apply_overrides``), before anything is validated."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError, shown_repr
from .yaml_strict import parse_yaml

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def parse_override(text: str) -> tuple[str, Any]:
    """``"model.experts=64"`` -> ``("model.experts", 64)``; the value is read as a YAML scalar."""
    bad = _CONTROL.search(text)
    if bad:
        raise ConfigError(f"expected KEY.PATH=VALUE without control characters, got {shown_repr(text)} "
                          f"(U+{ord(bad.group()):04X})", source="--set")
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"expected KEY.PATH=VALUE, got {shown_repr(text)}", source="--set")
    if _RADIX.fullmatch(value.strip()):  # "0x1" is a grid of PEs to a user, not YAML 1.1's hex 1
        return key, value.strip()
    try:
        parsed = parse_yaml(value, "--set") if value.strip() else ""
    except ConfigError:
        parsed = value
    return key, parsed


_RADIX = re.compile(r"[-+]?0[xXoObB][0-9a-fA-F_]*")


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``data`` with each dotted key set; the original is never mutated.

    An override may create a key that the schema knows but the file omits (validation then judges it);
    it may not descend into a value that is not a mapping.
    """
    out = copy.deepcopy(data)
    for dotted, value in overrides.items():
        node = out
        parts = dotted.split(".")
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                where = ".".join(parts[: i + 1])
                raise ConfigError(f"cannot set {dotted}: {where} is {shown_repr(child)}, not a mapping",
                                  source="--set", path=dotted)
            node = child
        node[parts[-1]] = copy.deepcopy(value)
    return out
