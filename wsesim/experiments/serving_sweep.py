"""What a sweep's point does its own way when its base is a serving experiment (``kind: inference``;
the point runner is ``experiments.points``'s): each is served by ``experiments.inference.run_inference``
on the executor its ``simulation.engine`` names (a key a sweep may vary), into the serving columns of its
CSV row (``experiments.table.serving_columns``).

A serving point's work is estimated from its mapping's stage visits (``serving_work``,
``experiments.estimate.estimate_serving``) plus ``POINT_SECONDS``: the sweep's limits (points, the total
time, workers' memory) hold as for training.
"""

from __future__ import annotations

import json
from typing import Any

from ..config.loader import Loaded
from ..sim.mapping import map_stages
from .estimate import BASE_BYTES
from .inference import run_inference, serving_estimate
from .table import SERVING_COLUMNS

INFERENCE = "inference"
POINT_SECONDS = 0.3
"""What a serving point is costed (seconds of work) for dealing points to workers and the sweep's limit:
LLaMA3-8B on WSE-2, 4,096 + 128 tokens, took 0.17-0.38 s a point on the 2-core machine (batch 1-16, grids
250² to 750²), a tiny model on tiny8 0.05 s."""


def serving_work(loaded: Loaded) -> tuple[float, float]:
    """A serving point's (seconds, peak bytes) of work: its mapping's stage visits as
    ``estimate.estimate_serving`` costs them (the mapping is found in milliseconds), ``POINT_SECONDS`` at
    least (the kernels' costs); a point whose mapping does not fit costs ``POINT_SECONDS`` and a process's
    base memory. A point that alone cannot finish here is refused when it is served: its row says why."""
    mapping = map_stages(loaded.spec)
    if not mapping.feasible:
        return POINT_SECONDS, BASE_BYTES
    e = serving_estimate(loaded.spec, mapping)
    return POINT_SECONDS + e.seconds, e.bytes


def serving_plan_key(loaded: Loaded) -> str:
    """Points on the same hardware and model share a worker where balance allows (its kernel costs are
    cached per process)."""
    spec = loaded.spec
    return json.dumps([spec.hardware.model_dump(mode="json"), spec.model.model_dump(mode="json")],
                      sort_keys=True)


def serve_point(loaded: Loaded, point: Any) -> tuple[dict[str, Any], bool, str]:
    """Serve one point: its result's serving columns, whether it was served, and why not."""
    result = run_inference(loaded.spec).result
    served = result.to_dict()
    columns = {c: served[c] for c in SERVING_COLUMNS}
    columns["layers_per_stage"] = "+".join(str(n) for n in served["layers_per_stage"])  # "11+11+10"
    return columns, result.feasible, result.infeasible_reason
