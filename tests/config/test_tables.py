"""The plug-in tables' lookup (wsesim.config.tables): an unknown name names the key and the valid ones;
a ``"module:attribute"`` reference loads what it names, and a broken one is a bug (``InternalError``)."""

from __future__ import annotations

import pytest

from wsesim.config.errors import ConfigError, InternalError
from wsesim.config.tables import entry, load


def test_an_unknown_name_lists_the_valid_ones_at_its_key() -> None:
    table = {"fast": 1, "reference": 2}
    assert entry(table, "reference", "simulation.engine") == 2
    with pytest.raises(ConfigError) as e:
        entry(table, "quick", "simulation.engine")
    assert str(e.value) == "simulation.engine: expected one of fast, reference, got 'quick'"
    with pytest.raises(ConfigError, match="expected one of fast, reference"):
        entry(table, ["unhashable"], "simulation.engine")  # type: ignore[arg-type]


def test_a_reference_loads_its_attribute() -> None:
    assert load("wsesim.config.tables:entry") is entry
    with pytest.raises(InternalError, match="wsesim.config.tables:nothing"):
        load("wsesim.config.tables:nothing")
    with pytest.raises(InternalError, match="wsesim.config.no_such_module"):
        load("wsesim.config.no_such_module:x")
