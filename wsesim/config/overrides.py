"""``--set KEY.PATH=VALUE``: one override read from the command line (``parse_override``, the value a YAML
scalar), a sweep's keys each with its values (``parse_grid_pairs``: ``sweep --grid``, ``infer --vary``),
and a raw tree with its dotted keys set (``apply_overrides``), before anything is validated."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
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


def parse_grid_pairs(pairs: Sequence[str] | None, flag: str = "--grid") -> dict[str, list[Any]]:
    """``KEY=v1,v2,...`` pairs given to ``flag`` (``wsesim sweep --grid``, ``wsesim infer --vary``) as a
    sweep's grid keys, each value read as ``--set`` reads one, a path kept as written (the command line
    resolves it). A key given twice, an empty value, or a value given twice (its point would run twice) is
    refused."""
    out: dict[str, list[Any]] = {}
    for text in pairs or ():
        key, sep, values = text.partition("=")
        key, items = key.strip(), [v.strip() for v in values.split(",")] if sep else []
        if not key or key in out or not items or not all(items):
            raise ConfigError("expected KEY=v1,v2,... once per key (comma-separated values, none empty), got "
                              f"{shown_repr(text)}", source=flag)
        if twice := next((v for i, v in enumerate(items) if v in items[:i]), None):
            raise ConfigError(f"expected each value once, got {shown_repr(twice)} twice in "
                              f"{shown_repr(text)} (its point would run twice)", source=flag, path=key)
        try:
            out[key] = [parse_override(f"{key}={v}")[1] for v in items]
        except ConfigError as e:
            raise ConfigError(e.message, source=flag, path=e.path) from None
    return out


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
