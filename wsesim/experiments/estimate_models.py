"""The work estimate's terms for the MoE mapping and the compute model (``estimate.estimate_work`` adds
them; what each counts is in its module docstring): chosen by their tables' names, as a run chooses its
mapping and compute model, and measured on this project's 2-core machine (docs/architecture.md, "The work
estimate")."""

from __future__ import annotations

import math
from typing import Any

from ..config.specs import ExperimentSpec
from ..model.memory import max_batch_per_tile
from .mappings import moe_mapping

# in_place, per (layer × expert × PE column): a + b·√(copies each) seconds, at most c (numpy's binomial:
# 33-44 ns at 0.3-0.8 copies, 67 at 3.9, 123 at 15; a constant ~90 ns past ~30 copies)
IN_PLACE_DRAW = (20e-9, 27e-9, 110e-9)
IN_PLACE_EXPERT_SECONDS = 1.8e-5  # in_place: per (micro-batch × layer × expert), its ops laid one by one
KERNEL_LOOKUPS = (20.0, 0.55)    # compute: kernel: cost lookups per layer, + per expert
COMPUTE_LOOKUP_SECONDS = {"kernel": 7.4e-6}  # per lookup (the cached kernel cost and its op's share);
                                 # constant's cost pass is arithmetic, in the engine term


def in_place_term(spec: ExperimentSpec, micro_batches: int, sims: float = 1.0) -> tuple[float, float]:
    """(seconds, peak bytes) the ``in_place`` mapping adds to a run (see the module docstring): the
    copies' spread over the PE columns, drawn once per run at the step's size, and the experts' ops laid
    one by one; the draws hold one layer's ``E × C`` counts at a time."""
    hw, m, t = spec.hardware, spec.model, spec.training
    C, E, L = hw.mesh.cols, m.experts, m.layers
    B = t.batch_per_tile if isinstance(t.batch_per_tile, int) else max(_balanced_batch(spec), 1)
    copies = B * t.tiles * t.seq_len * m.top_k / (E * C)
    a, b, most = IN_PLACE_DRAW
    draw = L * E * C * min(a + b * math.sqrt(copies), most)
    return sims * (draw + micro_batches * L * E * IN_PLACE_EXPERT_SECONDS), 8.0 * E * C


MAPPING_WORK: dict[str, Any] = {"in_place": in_place_term}
"""The work a mapping adds to a run, by ``simulation.moe_mapping`` (``regions``: none beyond the engine's)."""


def _balanced_batch(spec: ExperimentSpec) -> int:
    return max_batch_per_tile(spec.hardware, spec.model, spec.training)


def model_terms(spec: ExperimentSpec, micro_batches: int, sims: float) -> dict[str, tuple[float, float]]:
    """The (seconds, peak bytes) terms of ``spec``'s mapping and compute model, by their names (none for
    ``regions`` and ``constant``, whose work is the engine's terms); ``sims``: simulations per run."""
    sim, m = spec.simulation, spec.model
    terms: dict[str, tuple[float, float]] = {}
    if m.experts and (mapping_term := MAPPING_WORK.get(sim.moe_mapping)) is not None:
        terms[sim.moe_mapping] = mapping_term(spec, micro_batches, sims)
    if (per_lookup := COMPUTE_LOOKUP_SECONDS.get(sim.compute)) is not None:
        lookups = m.layers * (KERNEL_LOOKUPS[0] + KERNEL_LOOKUPS[1] * m.experts)
        terms[sim.compute] = (sims * lookups * per_lookup, 0.0)
    return terms


def dispatched(mapping: str) -> bool:
    """Whether ``mapping`` sends tokens over the fabric (so builds the dispatch bases)."""
    return moe_mapping(mapping).dispatched
