"""The executors of a program by name: the ``simulation.engine`` key of a training run and of a serving
run alike (``wsesim infer --engine`` sets it) reads this one table, through ``engine_for``. Each entry is a
function ``(plan, program, costs) -> Trace``, imported here so that a reader (or a tool) follows the hop from
the runner to the executor by its imports; the CLI lists the names from ``config.specs`` without loading
this module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...config.tables import entry
from . import engine, reference

ENGINES: dict[str, Callable[..., Any]] = {
    "fast": engine.simulate,  # the default
    # plain SimPy, to vouch for the fast one: same program and costs
    "reference": reference.simulate,
}


def engine_for(spec: Any) -> Callable[..., Any]:
    """The executor a run's ``simulation.engine`` names, a training step's or a serving run's (``ENGINES``):
    it runs a costed program. Raises ``ConfigError`` for an unknown name, listing the valid ones."""
    return entry(ENGINES, spec.simulation.engine, "simulation.engine")


__all__ = ["ENGINES", "engine_for"]
