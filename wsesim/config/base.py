"""The base of every spec, and the error a cross-field rule raises: shared by ``specs`` and the spec
modules it builds on (``cluster``), so that they need not import each other."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic_core import PydanticCustomError


def fail(message: str, at: str = "") -> PydanticCustomError:
    """A cross-field rule's error: ``validation`` shows its message as it is, at the field's path, or at
    the key ``at`` below it (a rule on a whole section that is about one of its keys)."""
    return PydanticCustomError("cross_field", "{msg}", {"msg": message, **({"at": at} if at else {})})


class Spec(BaseModel):
    """Base of every spec: frozen, strict, unknown keys refused, YAML keys by alias."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=False)
