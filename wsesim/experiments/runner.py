"""The one runner: any run — a training step or a serving run, on a wafer or on a GPU node — is
``run(spec)``, the steps in one order (``runs.compose``: refuse work that cannot finish here, lay it out,
build its program, cost it, execute it, measure it), each kind supplying its own steps through one table
(``COMPOSERS``, by the spec's kind and its hardware's). A new workload is a new entry.

What varies inside a step is looked up in tables too, never special-cased here: the fabric fidelity that
times dispatch (``fabric.fidelity.FABRICS``), the MoE mapping that places experts and costs their ops
(``experiments.mappings.MOE_MAPPINGS``) and the event engine that executes (``sim.executors.engines``).
Randomness comes from one ``numpy.random.Generator`` seeded by the run's seed, split into independent
streams, so a run is a pure function of its inputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .runs import Composer, Options, Run, compose
from .training import TRAINING

if TYPE_CHECKING:
    from ..analysis.results import RunResult
    from ..config.specs import ExperimentSpec

__all__ = ["COMPOSERS", "Run", "composer", "run", "run_experiment", "run_inference", "simulate_experiment"]

COMPOSERS: dict[tuple[str, str], Composer] = {
    ("experiment", "hardware"): TRAINING,  # a training step on a wafer
}
"""Each kind of run's steps (a ``runs.Composer``), by (the spec's ``kind``, its hardware's ``kind``), each
imported by name, so that a reader (or a tool) follows the hop from ``run`` to a workload's steps, and from
there to the executor (``sim.executors.engines``), by imports alone. A training step on a GPU node and
serving, on wafers or GPUs, join the table the first time one is asked for (``composer``)."""


def composer(kind: str, hardware_kind: str) -> Composer:
    """The steps of a run of ``kind`` on hardware of ``hardware_kind`` (``COMPOSERS``)."""
    if (kind, hardware_kind) not in COMPOSERS:
        # local: GPUs' and serving's composers bring the layers only they use (the GPU kernels, the
        # serving scheduler and its analysis: a sixth of a training command's start), loaded only here
        from .gpu_inference import GPU_SERVING
        from .gpu_training import GPU_TRAINING
        from .inference import SERVING

        COMPOSERS.update({
            ("experiment", "gpu"): GPU_TRAINING,  # on a GPU node (docs/model.md §13.8)
            ("inference", "hardware"): SERVING,  # a serving run on wafers
            ("inference", "gpu"): GPU_SERVING,  # on GPU nodes (§13.7)
        })
    return COMPOSERS[kind, hardware_kind]


def run(spec: Any, options: Options | None = None) -> Run:
    """Run ``spec`` (a validated experiment of any kind): its result and what made it. A configuration
    that does not fit is a result with ``feasible=False`` and its reason; work that cannot finish on this
    machine is a ``ConfigError`` before anything is built. ``options``: ``runs.Options``."""
    return compose(composer(spec.kind, spec.hardware.kind), spec, options or Options())


def run_experiment(spec: ExperimentSpec) -> RunResult:
    """One training step of ``spec``: its result (``run(spec).result``)."""
    return run(spec).result


def simulate_experiment(spec: ExperimentSpec) -> Run:
    """One training step of ``spec``, its trace and plan kept (``run``)."""
    return run(spec)


def run_inference(spec: Any, *, check: bool = True, objective: str = "tpot", spans: bool = False) -> Run:
    """Serve ``spec`` (``run``): ``objective`` chooses ``grid: auto``'s mapping (``inference.OBJECTIVES``);
    ``check=False``: its work was already checked, as a search checks all its candidates at once;
    ``spans``: a ``--trace`` will be written, its spans counted."""
    return run(spec, Options(check, objective, spans))
