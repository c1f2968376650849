"""What a run is, a training step's or a serving run's alike: the order of its steps (``compose``, written
once), what each kind of run supplies for them (a ``Composer``; the table of them by spec and hardware kind
is ``runner.COMPOSERS``), and what a run gives back (``Run``): its result — a ``RunResult`` or a
``ServeResult``, each a ``Result`` — and, when it ran, what produced it, for traces, pictures and a run's
folder (``output.run_folder``)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..fabric.mesh import Mesh
    from ..fabric.placement import Placement
    from ..sim.cost.costing import Costs
    from ..sim.programs.mapping import Mapping
    from ..sim.programs.plan import StepPlan, Trace
    from ..sim.programs.program import Program

__all__ = ["Composer", "Options", "Result", "Run", "compose"]


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


@dataclass(frozen=True)
class Options:
    """How a caller asks for a run beyond its spec: ``check`` refuses work that cannot finish here (off
    when a search has checked all its candidates at once); ``objective`` chooses a serving run's
    ``grid: auto`` (``inference.OBJECTIVES``); ``spans``: a trace will be written, its spans counted."""

    check: bool = True
    objective: str = "tpot"
    spans: bool = False


@dataclass(frozen=True)
class Composer:
    """What one kind of run (training or serving, on a wafer or a GPU node) does at each step of
    ``compose``. ``layout`` is the kind's own record of where the work goes (a training step's sizing,
    a serving run's mapping): it says ``feasible`` and, if not, ``reason``; ``plan`` is what the program
    was built for and is costed and executed with; ``executed`` what the executor gave back."""

    refuse: Callable[[Any, Any, Options], None]  # (spec, layout or None, options): ConfigError if too much
    lay_out: Callable[[Any, Options], Any]  # (spec, options) -> layout
    infeasible: Callable[[Any, Any, float], Run]  # (spec, layout, start) -> the run that says why not
    build: Callable[[Any, Any, Options], tuple[Any, Program]]  # (spec, layout, options) -> (plan, program)
    cost: Callable[[Any, Any, Program], Costs | Any]  # (spec, plan, program) -> its costs
    execute: Callable[[Any, Any, Program, Any], Any]  # (spec, plan, program, costs) -> executed
    measure: Callable[[Any, Any, Any, Program, Any, Any, float], Run]  # (..., executed, start) -> Run
    quiet_collector: bool = False  # pause Python's cyclic collector for the run (``_collector_paused``)


def compose(kind: Composer, spec: Any, options: Options = Options()) -> Run:
    """Run ``spec`` as ``kind`` does each step: refuse what cannot finish here before anything is built,
    lay the work out, return a layout that does not fit as a result with its reason (never an exception),
    refuse again what the layout shows, then build the program, cost it, execute it and measure it."""
    start = time.perf_counter()
    with _collector_paused() if kind.quiet_collector else nullcontext():
        kind.refuse(spec, None, options)
        layout = kind.lay_out(spec, options)
        if not layout.feasible:
            return kind.infeasible(spec, layout, start)
        kind.refuse(spec, layout, options)
        plan, program = kind.build(spec, layout, options)
        costs = kind.cost(spec, plan, program)
        executed = kind.execute(spec, plan, program, costs)
        return kind.measure(spec, layout, plan, program, costs, executed, start)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic collector paused for one step: planning and executing it make ~10⁵ small objects
    that live until it ends (chunk names, spans, SimPy events), and the collector would walk them and
    everything imported again and again while they are made (~10 % of a 512-expert step's time). Cycles
    the step leaves are collected after it, as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
