"""What a run gives back, a training step's or a serving run's alike (``runner.simulate_experiment``,
``inference.run_inference``): its result — a ``RunResult`` or a ``ServeResult``, each a ``Result`` — and,
when it ran, what produced it, for traces, pictures and a run's folder (``output.run_folder``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..fabric.mesh import Mesh
    from ..fabric.placement import Placement
    from ..sim.cost.costing import Costs
    from ..sim.programs.mapping import Mapping
    from ..sim.programs.plan import StepPlan, Trace
    from ..sim.programs.program import Program

__all__ = ["Result", "Run"]


@runtime_checkable
class Result(Protocol):
    """What every run's result says: whether it could run (else why not) and its fields by name (the
    row of a sweep's CSV, ``result.json``)."""

    feasible: bool
    infeasible_reason: str

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Run:
    """A run's ``result`` and, when it ran, its ``trace``, ``program`` and ``costs``; a training step's
    ``plan``, ``mesh`` and expert ``placement``; a serving run's stage ``mapping`` (kept even when it
    does not fit: it says why)."""

    result: Any  # a Result: analysis.results.RunResult or analysis.serving.ServeResult
    trace: Trace | None = None
    program: Program | None = None
    costs: Costs | None = None
    plan: StepPlan | None = None
    mesh: Mesh | None = None
    placement: Placement | None = None
    mapping: Mapping | None = None

    @property
    def serving(self) -> bool:
        """A serving run's (it has a stage mapping), not a training step's."""
        return self.mapping is not None
