"""The executors of a program by name: the ``simulation.engine`` key of a training run and of a serving
run alike (``wsesim infer --engine`` sets it) reads this one table, through ``engine_for``. Each entry is
``"module:function"``, a function ``(plan, program, costs) -> Trace`` imported when a run first uses it (so
the CLI can list the names without importing an engine)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..config.tables import entry, load

ENGINES: dict[str, str] = {
    "fast": "wsesim.sim.engine:simulate",  # the default
    # plain SimPy, to vouch for the fast one: same program and costs
    "reference": "wsesim.sim.reference:simulate",
}



def engine_for(spec: Any) -> Callable[..., Any]:
    """The executor a run's ``simulation.engine`` names, a training step's or a serving run's (``ENGINES``):
    it runs a costed program. Raises ``ConfigError`` for an unknown name, listing the valid ones."""
    return load(entry(ENGINES, spec.simulation.engine, "simulation.engine"))


__all__ = ["ENGINES", "engine_for"]
