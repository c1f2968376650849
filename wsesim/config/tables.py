"""Plug-in tables: each kind of interchangeable part (a fabric fidelity, an MoE mapping, an event engine)
is one table from its name to an entry, so that adding one touches that table and its own module.

``entry`` looks a name up with the error every such key gives (the key, the valid names, the name
given). An entry names code it must not load before it is used as ``"package.module:attribute"``, and
``load`` imports it then: a run loads only the fidelity and engine it uses. The tables themselves live
with what they choose between (``fabric.fidelity.FABRICS``, ``experiments.mappings.MOE_MAPPINGS``,
``sim.executors.engines.ENGINES``); ``SimulationSpec`` in ``specs.py`` lists the same names, and a test
checks that each table and its key agree.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, TypeVar

from .errors import ConfigError, InternalError, shown

T = TypeVar("T")


def entry(table: Mapping[str, T], name: str, key: str) -> T:
    """``table[name]``; an unknown name is a ``ConfigError`` at ``key`` listing the valid names."""
    try:
        return table[name]
    except (KeyError, TypeError):
        raise ConfigError(f"expected one of {', '.join(table)}, got {shown(repr(name))}", path=key) from None


def load(reference: str) -> Any:
    """What a ``"package.module:attribute"`` reference names, its module imported now (a table's entry
    naming code that is missing is a bug in the table: ``InternalError``)."""
    module, _, attribute = reference.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as e:
        raise InternalError(f"a table names {reference!r}, which does not load: {e}") from e
