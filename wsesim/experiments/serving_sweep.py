"""A sweep's points when its base is a serving experiment (``kind: inference``): each validated by the
inference loader (``config.inference.load_inference_data``, presets and files by name as in a training
sweep) and served by ``experiments.inference.run_inference`` on the fast engine; one CSV row per point
(``experiments.table.serving_columns``). An infeasible mapping is a row with its reason, a failure a row
with the error: neither stops the sweep.

A serving point's work is estimated from its mapping's stage visits (``serving_work``,
``experiments.estimate.estimate_serving``) plus ``POINT_SECONDS``: the sweep's limits (points, the total
time, workers' memory) hold as for training.
"""

from __future__ import annotations

import json
from typing import Any

from ..config.inference import load_inference_data
from ..config.loader import Loaded
from ..sim.mapping import map_stages
from .estimate import BASE_BYTES
from .inference import run_inference, serving_estimate
from .table import (
    SERVING_COLUMNS,
    SERVING_MEASURED,
    STATUS_ERROR,
    STATUS_INFEASIBLE,
    STATUS_OK,
    failure,
    swept_values,
)

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
    mapping = map_stages(loaded.spec) if loaded.spec.hardware.kind != "gpu" else None  # a GPU's: §13.7
    if mapping is None or not mapping.feasible:
        return POINT_SECONDS, BASE_BYTES
    e = serving_estimate(loaded.spec, mapping, "fast")
    return POINT_SECONDS + e.seconds, e.bytes


def serving_plan_key(loaded: Loaded) -> str:
    """Points on the same hardware and model share a worker where balance allows (its kernel costs are
    cached per process)."""
    spec = loaded.spec
    return json.dumps([spec.hardware.model_dump(mode="json"), spec.model.model_dump(mode="json")],
                      sort_keys=True)


def run_serving_point(raw: dict[str, Any], source: str, point: Any) -> dict[str, Any]:
    """Serve one point (in a worker process); returns its CSV row. Never raises."""
    row: dict[str, Any] = {"point": point.index, "point_key": point.key}
    row.update({f"set:{k}": v for k, v in point.overrides.items()})
    try:
        loaded = load_inference_data(raw, source=source, overrides=point.run_overrides(),
                                     base_dir=point.base_dir_path)
        row.update(swept_values(loaded.spec, point.swept or point.overrides))
        result = run_inference(loaded.spec, engine="fast").result
        served = result.to_dict()
        row.update({c: served[c] for c in SERVING_COLUMNS})
        row["layers_per_stage"] = "+".join(str(n) for n in served["layers_per_stage"])  # "11+11+10"
        row["status"] = STATUS_OK if result.feasible else STATUS_INFEASIBLE
        row["reason"] = result.infeasible_reason
        if not result.feasible:  # nothing was served: empty, not 0
            row.update(dict.fromkeys(SERVING_MEASURED, ""))
    except Exception as e:  # a failing point is a row, never the end of the sweep
        row["status"] = STATUS_ERROR
        row["reason"] = failure(e)
    return row
