"""Strict YAML: one document, a mapping at the top, no duplicate keys and no aliases or anchors (a
config should say each value once), printable text only, at most ``MAX_DEPTH`` levels of nesting.
Errors are ``ConfigError`` lines naming the file and the key path; what they quote of the file is
escaped and clipped (``errors.shown``).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError, shown, shown_repr

MAX_DEPTH = 64
"""Levels of nesting a file may have. wsesim's own kinds need 4 (a sweep's points: list, mapping, key,
value); a much deeper file is not a configuration, and would exhaust Python's recursion limit."""
# what PyYAML's reader refuses (yaml.reader.Reader.NON_PRINTABLE): found first, to say where
_NON_PRINTABLE = re.compile("[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]")


_SURROGATE = re.compile("[\ud800-\udfff]")


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases and anchors (a config should say each value once)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._steps: list[str] = []  # key path of the node being composed, so that errors can name it

    def compose_node(self, parent: Any, index: Any) -> Any:
        # the composer passes a mapping value's key node, or a sequence item's position, as ``index``
        step = (f".{index.value}" if isinstance(index, yaml.ScalarNode)
                else f"[{index}]" if isinstance(index, int) else "")
        self._steps.append(step)
        try:
            event = self.peek_event()
            if len(self._steps) > MAX_DEPTH:
                raise _YamlProblem(f"expected at most {MAX_DEPTH} levels of nesting, got more "
                                   f"(line {event.start_mark.line + 1})",
                                   shown("".join(self._steps).lstrip("."), 60))
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                what = (f"an alias *{event.anchor}" if isinstance(event, yaml.AliasEvent)
                        else f"an anchor &{event.anchor}")
                raise _YamlProblem(f"expected a plain value (YAML anchors and aliases are not allowed), "
                                   f"got {what} (line {event.start_mark.line + 1})",
                                   shown("".join(self._steps).lstrip(".")) or None)
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
            key = _construct(key_node, loader, path)
            if isinstance(key, (list, dict)):
                raise ConfigError(f"line {key_node.start_mark.line + 1}: expected a plain key, "
                                  f"got a {type(key).__name__}", path=path or None)
            if key in out:
                where = f"{path}.{key}" if path else str(key)
                raise ConfigError(f"duplicate key (line {key_node.start_mark.line + 1})", path=shown(where))
            out[key] = _to_python(value_node, loader, f"{path}.{key}" if path else str(key))
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(n, loader, f"{path}[{i}]") for i, n in enumerate(node.value)]
    return _construct(node, loader, path)


def _construct(node: yaml.Node, loader: _StrictLoader, path: str) -> Any:
    """A scalar's value; one Python cannot hold (an integer past 4300 digits, a timestamp like
    2024-13-01) is a ``ConfigError`` at its line."""
    try:
        value = loader.construct_object(node, deep=True)
    except (ValueError, OverflowError) as e:
        line = node.start_mark.line + 1
        if node.tag == "tag:yaml.org,2002:int":
            problem = f"an integer of {len(str(node.value))} characters"
            raise ConfigError(f"expected an integer of at most 4300 digits, got {problem} (line {line})",
                              path=shown(path) or None) from None
        raise ConfigError(f'expected a value YAML can read, got "{shown(node.value, 60)}" '
                          f'({shown(e, 80)}, line {line})', path=shown(path) or None) from None
    if isinstance(value, str) and (bad := _SURROGATE.search(value)):  # "\ud800": not text, cannot be written
        raise ConfigError(f"expected text, got a lone surrogate U+{ord(bad.group()):04X} (an escape that is "
                          f"half of a UTF-16 pair, line {node.start_mark.line + 1})",
                          path=shown(path) or None)
    return value


def parse_yaml(text: str, source: str) -> Any:
    """Parse one YAML document strictly. Raises ``ConfigError`` naming ``source``."""
    bad = _NON_PRINTABLE.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        raise ConfigError(f"line {line}: expected printable text, got the non-printable character "
                          f"U+{ord(bad.group()):04X} (column {column})", source=source)
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
        raise ConfigError(f"{where}invalid YAML ({shown(problem, 120)})", source=source) from None
    finally:
        loader.dispose()


MAX_CONFIG_BYTES = 16 * 2**20
"""The largest configuration file read: wsesim's own are a few KiB; a 10,000-point sweep a few MiB."""
_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO (named pipe)",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def read_bounded(path: str | Path, *, limit: int, what: str) -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes: a FIFO, a device
    (``/dev/zero``), a socket or a directory is refused before anything is read (nothing blocks, nothing
    is read without end). Raises ``ConfigError`` naming the file: "expected ``what``, got ..."."""
    source = str(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ConfigError("no such file", source=source) from None
    except (OSError, ValueError) as e:  # a name too long, a NUL byte, no permission
        raise ConfigError(f"cannot read file ({getattr(e, 'strerror', None) or type(e).__name__})",
                          source=source) from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"expected {what}, got "
                          f"{_KINDS.get(stat.S_IFMT(info.st_mode), 'not a regular file')}", source=source)
    if info.st_size > limit:
        raise ConfigError(f"expected {what} of at most {limit:,} bytes, got {info.st_size:,} bytes",
                          source=source)
    try:
        with open(path, "rb") as f:  # a regular file a moment ago (stat above): opening it does not wait
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ConfigError(f"expected {what}, got a file that is not a regular file", source=source)
            data = f.read(limit + 1)
    except OSError as e:
        raise ConfigError(f"cannot read file ({e.strerror or type(e).__name__})", source=source) from None
    if len(data) > limit:
        raise ConfigError(f"expected {what} of at most {limit:,} bytes, got more", source=source)
    return data


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level is a mapping: a regular file, UTF-8, at most ``MAX_CONFIG_BYTES``."""
    path = Path(path)
    source = str(path)
    data_bytes = read_bounded(path, limit=MAX_CONFIG_BYTES, what="a YAML file")
    try:
        text = data_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError("expected a YAML file (UTF-8 text), got bytes that are not UTF-8 "
                          f"(at byte {e.start})", source=source) from None
    data = parse_yaml(text, source)
    if not isinstance(data, dict):
        raise ConfigError(f"expected a YAML mapping at the top level, got {describe_value(data)}",
                          source=source)
    return data


def describe_value(value: Any) -> str:
    """How an error names a value it got: "48 (an int)", "\"x\" (a string)", "a mapping"."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f'"{shown(value)}" (a string)'
    name = type(value).__name__
    return f"{shown_repr(value)} ({'an' if name[0] in 'aeiou' else 'a'} {name})"

