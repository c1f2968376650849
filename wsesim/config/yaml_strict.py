"""Strict YAML: one document, a mapping at the top, no duplicate keys and no aliases or anchors (a
config should say each value once). Errors are ``ConfigError`` lines naming the file and the key path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and anchors (a config should say each value once)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._steps: list[str] = []  # key path of the node being composed, so that errors can name it

    def compose_node(self, parent: Any, index: Any) -> Any:
        # the composer passes a mapping value's key node, or a sequence item's position, as ``index``
        step = f".{index.value}" if isinstance(index, yaml.ScalarNode) else f"[{index}]" if isinstance(index, int) else ""
        self._steps.append(step)
        try:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                what = f"an alias *{event.anchor}" if isinstance(event, yaml.AliasEvent) else f"an anchor &{event.anchor}"
                raise _YamlProblem(f"expected a plain value (YAML anchors and aliases are not allowed), got {what} "
                                   f"(line {event.start_mark.line + 1})", "".join(self._steps).lstrip(".") or None)
            return super().compose_node(parent, index)
        finally:
            self._steps.pop()


class _YamlProblem(Exception):
    def __init__(self, message: str, path: str | None) -> None:
        super().__init__(message)
        self.message, self.path = message, path


def _to_python(node: yaml.Node, loader: _StrictLoader, path: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)):
                raise ConfigError(f"line {key_node.start_mark.line + 1}: expected a plain key, got a {type(key).__name__}",
                                  path=path or None)
            if key in out:
                where = f"{path}.{key}" if path else str(key)
                raise ConfigError(f"duplicate key (line {key_node.start_mark.line + 1})", path=where)
            out[key] = _to_python(value_node, loader, f"{path}.{key}" if path else str(key))
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(n, loader, f"{path}[{i}]") for i, n in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def parse_yaml(text: str, source: str) -> Any:
    """Parse one YAML document strictly. Raises ``ConfigError`` naming ``source``."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ConfigError("expected a YAML mapping, got an empty file", source=source)
        return _to_python(node, loader, "")
    except ConfigError as e:
        raise e.located(source=source) from None
    except _YamlProblem as e:
        raise ConfigError(e.message, source=source, path=e.path) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{where}invalid YAML ({problem})", source=source) from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level is a mapping."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("no such file", source=source) from None
    except IsADirectoryError:
        raise ConfigError("expected a YAML file, got a directory", source=source) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read file ({e.__class__.__name__})", source=source) from None
    data = parse_yaml(text, source)
    if not isinstance(data, dict):
        raise ConfigError(f"expected a YAML mapping at the top level, got {describe_value(data)}", source=source)
    return data


def describe_value(value: Any) -> str:
    """How an error names a value it got: "48 (an int)", "\"x\" (a string)", "a mapping"."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f'"{value}" (a string)'
    name = type(value).__name__
    return f"{value!r} ({'an' if name[0] in 'aeiou' else 'a'} {name})"
