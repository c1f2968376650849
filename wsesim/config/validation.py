"""Validation of a raw tree against a spec, and pydantic's errors as one line each:
``KEY.PATH: expected …, got …``, naming the file the value came from (a preset, the experiment, or
``--set``), and for an unknown key the closest valid one (``did you mean "experts"?``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from .errors import ConfigError, shown
from .specs import Spec
from .yaml_strict import describe_value as _describe

_TYPE_WORDS = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "string_type": "a string",
    "bool_type": "true or false", "bool_parsing": "true or false", "dict_type": "a mapping",
    "model_type": "a mapping", "model_attributes_type": "a mapping", "list_type": "a list",
}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The spec classes a field's annotation allows (one, or a union's branches)."""
    return [a for a in getattr(annotation, "__args__", (annotation,))
            if isinstance(a, type) and issubclass(a, BaseModel)]


def _walk(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[type[BaseModel]],
                                                                  list[type[BaseModel]]]:
    """``loc`` without the union branches pydantic writes into it ("int", "literal[...]", a model's class
    name, a tagged branch's tag), with the spec classes it ends at: the branch taken, and every branch of
    the union it was taken from (for 'belongs to' messages)."""
    clean: list[Any] = []
    options: list[type[BaseModel]] = [model]
    union: list[type[BaseModel]] = []
    for part in loc:
        if isinstance(part, str) and (part in _BRANCH_MARKERS or part.startswith(_BRANCH_PREFIXES)):
            continue
        branch = [c for c in options if c.__name__ == part
                  or len(options) > 1 and any(_literal(c, k) == part for k in c.model_fields)]
        if branch:
            union, options = options, branch[:1]
            continue
        clean.append(part)
        fields = [f for c in options for n, f in c.model_fields.items() if (f.alias or n) == part]
        options, union = (_models_in(fields[0].annotation) if fields else []), []
    return tuple(clean), options, union


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str] | None:
    """The YAML keys valid at ``loc`` in ``model``'s tree (for 'unknown key' messages)."""
    options = _walk(model, loc)[1]
    return sorted((f.alias or n) for n, f in options[0].model_fields.items()) if options else None


def _belongs(model: type[BaseModel], loc: tuple[Any, ...], key: str) -> str:
    """An unknown ``key`` in a tagged union's branch that another branch reads: why it cannot be written
    here, naming the branch it belongs to ("rate belongs to arrival: poisson"); "" when none reads it."""
    _, options, union = _walk(model, loc)
    here = _tag(options, union)
    if not here:
        return ""
    owners = [str(_literal(c, here[0])) for c in union if c is not options[0] and key in c.model_fields]
    if not owners:
        return ""
    return (f"expected no {key} with {here[0]}: {here[1]} ({key} belongs to {here[0]}: "
            f"{' or '.join(owners)})")


def _required(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """A key a tagged union's branch requires, named with the branch ("expected rate with arrival:
    poisson, got none"); "" elsewhere."""
    tag = _tag(*_walk(model, loc[:-1])[1:])
    return f"expected {loc[-1]} with {tag[0]}: {tag[1]}, got none" if tag else ""


def _tag(options: list[type[BaseModel]], union: list[type[BaseModel]]) -> tuple[str, Any] | None:
    """(key, value) of the tag that chose the branch ``options[0]`` of a tagged ``union`` (``arrival``,
    ``poisson``), or None when no tagged branch was taken."""
    if not options or not union:
        return None
    return next(((k, v) for k in options[0].model_fields if (v := _literal(options[0], k)) is not None), None)


def _literal(cls: type[BaseModel], key: str) -> Any:
    """The one literal value of ``cls``'s field ``key`` (a tagged branch's tag), or None."""
    f = cls.model_fields.get(key)
    args = getattr(f.annotation, "__args__", ()) if f else ()
    return args[0] if f and getattr(f.annotation, "__origin__", None) is Literal and len(args) == 1 else None


_BRANCH_MARKERS = {"int", "str", "float", "constrained-int", "constrained-float", "bool"}
_BRANCH_PREFIXES = ("literal[", "function-", "constrained-")


def _expectation(err: Any) -> str:
    kind = err["type"]
    if kind == "literal_error":
        return str(err.get("ctx", {}).get("expected", ""))
    if kind in _TYPE_WORDS:
        return _TYPE_WORDS[kind]
    if kind in _BOUNDS:
        return f"a value {_BOUNDS[kind]} {next(iter(err.get('ctx', {}).values()))}"
    return str(err["msg"])


_BOUNDS = {"greater_than": ">", "greater_than_equal": "≥", "less_than": "<", "less_than_equal": "≤"}


def _message(model: type[BaseModel], err: Any, siblings: list[Any] = ()) -> tuple[str, str]:
    loc = tuple(err["loc"])
    # a union (int | "auto") reports one error per branch, with the branch in the loc: drop it
    at = (err.get("ctx") or {}).get("at") if err["type"] == "cross_field" else None
    clean = _walk(model, loc)[0] + ((at,) if at else ())  # a rule about one key (fail(at=))
    path = shown(".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in clean).replace(".[", "["))
    kind, value = err["type"], err.get("input")
    if kind == "extra_forbidden":
        key = str(clean[-1]) if clean else ""
        return path, _belongs(model, loc[:-1], key) or _unknown_key(key, _fields_at(model, loc[:-1]))
    if kind == "union_tag_invalid":
        ctx = err.get("ctx") or {}
        return path, (f"expected {ctx.get('discriminator', '').strip(chr(39))}: one of "
                      f"{ctx.get('expected_tags')}, got {_describe(ctx.get('tag'))}")
    if kind == "missing":
        return path, _required(model, loc) or "required key is missing"
    if kind in ("quantity", "cross_field"):
        return path, err["msg"]
    if len(siblings) > 1:  # a union: say what each branch wanted
        return path, f"expected {' or '.join(_expectation(e) for e in siblings)}, got {_describe(value)}"
    if kind in _TYPE_WORDS or kind in _BOUNDS or kind == "literal_error":
        return path, f"expected {_expectation(err)}, got {_describe(value)}"
    return path, f"{err['msg']}, got {_describe(value)}"


def _unknown_key(key: str, valid: list[str] | None) -> str:
    """'unknown key', with the closest valid key when one is close (difflib), else the valid keys."""
    close = difflib.get_close_matches(key, valid or [], n=1)
    if close:
        return f'unknown key; did you mean "{close[0]}"?'
    return f"unknown key (valid keys: {', '.join(valid)})" if valid else "unknown key"


def validate(model: type[Spec], data: Any, *, source: str, sources: Mapping[str, str] | None = None,
             overridden: Iterable[str] = (), baseline: Any = None) -> Any:
    """Validate ``data`` as ``model``; turn the first error into a one-line ``ConfigError``.

    ``sources`` maps a top-level key to the file its value came from (a preset), and the error's path
    is then made relative to that file; an error at or under an ``overridden`` key names ``--set``, and
    so does any error when ``baseline`` (``data`` before the overrides) is given and valid: an override
    broke a rule that spans keys (``model.experts=1`` under ``top_k: 2``).
    """
    try:
        return model.model_validate(data)
    except ValidationError as e:
        # an unknown key first: a misspelt key is also a missing one, and "unknown key" names the culprit
        # and of a union (a name or a mapping), the branch the value's shape chose
        errors = sorted(e.errors(include_url=False), key=lambda err: (err["type"] != "extra_forbidden",
                        err["type"] == "literal_error" and isinstance(err["input"], dict)))
        first = _walk(model, tuple(errors[0]["loc"]))[0]
        siblings = [err for err in errors if _walk(model, tuple(err["loc"]))[0] == first]  # union branches
        path, message = _message(model, errors[0], siblings)
        for key in overridden:
            if path == key or path.startswith(key + ".") or key.startswith(path + "."):
                raise ConfigError(message, source="--set", path=path) from None
        if baseline is not None and _is_valid(model, baseline):
            raise ConfigError(message, source="--set", path=path or None) from None
        top = path.split(".", 1)
        if sources and top[0] in sources and sources[top[0]] != source:
            return_path = top[1] if len(top) > 1 else None
            raise ConfigError(message, source=sources[top[0]], path=return_path) from None
        raise ConfigError(message, source=source, path=path or None) from None


def _is_valid(model: type[Spec], data: Any) -> bool:
    try:
        model.model_validate(data)
    except ValidationError:
        return False
    return True
