"""One point of a sweep, for every kind of base: the one point runner (``run_point``: validate the point,
run it, one CSV row; never raising: an infeasible point is a row with its reason, a failure a row with the
error) and, by the base's ``kind`` (``KINDS``), only what differs: the loader, the work and plan key that
deal points to workers, and how a point runs into its result's columns.

A training base (``kind: experiment``) runs a step (``tuned``: its G chosen by ``wsesim.tune``). A serving
base (``kind: inference``) serves each point (the one runner's ``run_inference``, on the executor its
``simulation.engine`` names, a key a sweep may vary) into the serving columns
(``experiments.table.result_columns``); its work is its mapping's stage visits as
``serving_estimate.serving_estimate`` costs them plus ``POINT_SECONDS``, so that a sweep's limits (points,
the total time, workers' memory) hold as for training.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config.inference import load_inference_data
from ..config.loader import Loaded, load_experiment_data
from ..sim.programs.mapping import map_stages
from .estimate import BASE_BYTES, check_work, estimate_search, estimate_work
from .hardware_kinds import hardware_kind
from .inference import serving_estimate
from .runner import run_experiment, run_inference
from .table import (
    MEASURED_COLUMNS,
    SERVING_COLUMNS,
    SERVING_MEASURED,
    STATUS_ERROR,
    STATUS_INFEASIBLE,
    STATUS_OK,
    failure,
    swept_values,
)
from .tune import candidates, tune, tuned_row

INFERENCE = "inference"
POINT_SECONDS = 0.3
"""What a serving point is costed (seconds of work) for dealing points to workers and the sweep's limit:
LLaMA3-8B on WSE-2, 4,096 + 128 tokens, took 0.17-0.38 s a point on the 2-core machine (batch 1-16, grids
250² to 750²), a tiny model on tiny8 0.05 s."""



@dataclass(frozen=True)
class PointKind:
    """What a point of one kind of base does its own way."""

    load: Callable[..., Loaded]  # the kind's loader (``config``'s ``load_*_data``)
    # (loaded, point, check) -> (seconds, peak bytes) of work; ``check``: refuse what cannot finish here
    work: Callable[[Loaded, Any, bool], tuple[float, float]]
    plan_key: Callable[[Loaded], str]  # points with one key share a worker (its caches) where balance allows
    run: Callable[[Loaded, Any], tuple[dict[str, Any], bool, str]]  # -> (columns, feasible, why not)
    measured: tuple[str, ...]  # the columns an infeasible row leaves empty (nothing was measured)
    marks: Callable[[Any], dict[str, Any]] = lambda point: {}  # columns every row of the point has


def _training_work(loaded: Loaded, point: Any, check: bool) -> tuple[float, float]:
    """A tuned point runs every tuning candidate; ``check`` refuses a point that cannot finish here. A GPU
    step's (docs/model.md §13.8) is its kind's ``step_seconds`` a candidate: it has no mesh to size."""
    planned = candidates(loaded.spec) if point.tuned else None
    if (seconds := hardware_kind(loaded.spec.hardware).step_seconds) is not None:
        return seconds * (len(planned) if planned else 1), BASE_BYTES
    if check:
        estimate = check_work(loaded.spec, candidates=planned)
    else:
        estimate = estimate_search(loaded.spec, planned) if planned else estimate_work(loaded.spec)
    return estimate.total_seconds(len(planned) if planned else 1), estimate.bytes


def _train(loaded: Loaded, point: Any) -> tuple[dict[str, Any], bool, str]:
    result = tuned_row(tune(loaded)) if point.tuned else run_experiment(loaded.spec)
    columns = result.scalars()
    return columns, result.feasible, columns.pop("infeasible_reason")


def _serving_work(loaded: Loaded, point: Any, check: bool) -> tuple[float, float]:
    """A point whose mapping does not fit costs ``POINT_SECONDS`` and a process's base memory; one that
    alone cannot finish here is refused when it is served (its row says why), so ``check`` is not read."""
    # found in milliseconds; a GPU's is its own (docs/model.md §13.7), its work the point's least
    mapping = map_stages(loaded.spec) if hardware_kind(loaded.spec.hardware).maps_serving else None
    if mapping is None or not mapping.feasible:
        return POINT_SECONDS, BASE_BYTES
    e = serving_estimate(loaded.spec, mapping)
    return POINT_SECONDS + e.seconds, e.bytes


def _serve(loaded: Loaded, point: Any) -> tuple[dict[str, Any], bool, str]:
    result = run_inference(loaded.spec).result
    served = result.to_dict()
    columns = {c: served[c] for c in SERVING_COLUMNS}
    columns["layers_per_stage"] = "+".join(str(n) for n in served["layers_per_stage"])  # "11+11+10"
    return columns, result.feasible, result.infeasible_reason


def _key(*parts: Any) -> str:
    return json.dumps(parts, sort_keys=True)


KINDS: dict[str, PointKind] = {
    "experiment": PointKind(
        load_experiment_data, _training_work,
        lambda d: _key(d.spec.hardware.model_dump(mode="json"), d.spec.model.experts,
                       d.spec.simulation.model_dump(mode="json"), d.spec.training.seed),
        _train, MEASURED_COLUMNS, marks=lambda point: {"tuned": point.tuned}),
    INFERENCE: PointKind(  # its kernel costs are cached per process: the same hardware and model share
        load_inference_data, _serving_work,
        lambda d: _key(d.spec.hardware.model_dump(mode="json"), d.spec.model.model_dump(mode="json")),
        _serve, SERVING_MEASURED),
}
"""A sweep's point, by its base's kind."""


def _head(point: Any) -> dict[str, Any]:
    return {"point": point.index, "point_key": point.key,
            **{f"set:{k}": v for k, v in point.overrides.items()}}


def run_point(raw: dict[str, Any], source: str, point: Any) -> dict[str, Any]:
    """Run one point of a base ``raw`` (in a worker process); returns its CSV row. Never raises."""
    kind, row = KINDS[raw.get("kind", "experiment")], _head(point)
    try:
        loaded = kind.load(raw, source=source, overrides=point.run_overrides(), base_dir=point.base_dir_path)
        row.update(swept_values(loaded.spec, point.swept or point.overrides))
        columns, feasible, reason = kind.run(loaded, point)
        row.update({**columns, **kind.marks(point), "status": STATUS_OK if feasible else STATUS_INFEASIBLE,
                    "reason": reason})
        if not feasible:  # nothing was measured: empty, not 0
            row.update(dict.fromkeys(kind.measured, ""))
    except Exception as e:  # a failing point is a row, never the end of the sweep
        row.update({**kind.marks(point), "status": STATUS_ERROR, "reason": failure(e)})
    return row


def died_row(point: Any, why: str) -> dict[str, Any]:
    """The row of a point whose worker process died under it: an error, and the sweep goes on."""
    return {**_head(point), "tuned": point.tuned, "status": STATUS_ERROR, "reason": why}
