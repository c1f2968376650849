"""One point of a sweep, for every kind of base: the one point runner (``run_point``: validate the point,
run it, one CSV row; never raising: an infeasible point is a row with its reason, a failure a row with the
error) and, by the base's ``kind``, what differs (``KINDS``): the loader, the work estimate and plan key
that deal points to workers, and how a point is run into its result's columns. A training base's
(``kind: experiment``) is here; a serving base's (``kind: inference``) functions are
``serving_sweep``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config.inference import load_inference_data
from ..config.loader import Loaded, load_experiment_data
from .estimate import check_work, estimate_search, estimate_work
from .runner import run_experiment
from .serving_sweep import INFERENCE, serve_point, serving_plan_key, serving_work
from .table import (
    MEASURED_COLUMNS,
    SERVING_MEASURED,
    STATUS_ERROR,
    STATUS_INFEASIBLE,
    STATUS_OK,
    failure,
    swept_values,
)
from .tune import candidates, tune, tuned_row


@dataclass(frozen=True)
class PointKind:
    """What a sweep's point of one kind of base does its own way."""

    load: Callable[..., Loaded]  # the kind's loader (``config``'s ``load_*_data``)
    # (loaded, point, check) -> (seconds, peak bytes) of work; ``check``: refuse what cannot finish here
    work: Callable[[Loaded, Any, bool], tuple[float, float]]
    plan_key: Callable[[Loaded], str]  # points with the same key share a worker where balance allows
    # (loaded, point) -> (the result's columns, feasible, the reason it is not)
    run: Callable[[Loaded, Any], tuple[dict[str, Any], bool, str]]
    measured: tuple[str, ...]  # the columns an infeasible row leaves empty (nothing was measured)
    marks: Callable[[Any], dict[str, Any]] = lambda point: {}  # columns every row of the point has


def _training_work(loaded: Loaded, point: Any, check: bool) -> tuple[float, float]:
    """The point's estimated seconds of work (a tuned point runs every tuning candidate) and peak bytes;
    with ``check``, refuse a point that cannot finish on this machine."""
    planned = candidates(loaded.spec) if point.tuned else None
    if check:
        estimate = check_work(loaded.spec, candidates=planned)
    else:
        estimate = estimate_search(loaded.spec, planned) if planned else estimate_work(loaded.spec)
    return estimate.total_seconds(len(planned) if planned else 1), estimate.bytes


def _training_plan_key(loaded: Loaded) -> str:
    """Points on the same wafer, experts and simulation settings share a plan (a worker's caches)."""
    s = loaded.spec
    return json.dumps([s.hardware.model_dump(mode="json"), s.model.experts,
                       s.simulation.model_dump(mode="json"), s.training.seed], sort_keys=True)


def _train(loaded: Loaded, point: Any) -> tuple[dict[str, Any], bool, str]:
    """A training point's step (``tuned``: its G chosen by ``wsesim.tune``) as its result's columns."""
    result = tuned_row(tune(loaded)) if point.tuned else run_experiment(loaded.spec)
    columns = result.scalars()
    return columns, result.feasible, columns.pop("infeasible_reason")


KINDS: dict[str, PointKind] = {
    "experiment": PointKind(load_experiment_data, _training_work, _training_plan_key, _train,
                            MEASURED_COLUMNS, marks=lambda point: {"tuned": point.tuned}),
    INFERENCE: PointKind(load_inference_data, lambda loaded, point, check: serving_work(loaded),
                         serving_plan_key, serve_point, SERVING_MEASURED),
}
"""A sweep's point, by its base's kind."""


def run_point(raw: dict[str, Any], source: str, point: Any) -> dict[str, Any]:
    """Run one point of a base ``raw`` (in a worker process); returns its CSV row. Never raises."""
    kind = KINDS[raw.get("kind", "experiment")]
    row: dict[str, Any] = {"point": point.index, "point_key": point.key}
    row.update({f"set:{k}": v for k, v in point.overrides.items()})
    try:
        loaded = kind.load(raw, source=source, overrides=point.run_overrides(), base_dir=point.base_dir_path)
        row.update(swept_values(loaded.spec, point.swept or point.overrides))
        columns, feasible, reason = kind.run(loaded, point)
        row.update(columns)
        row.update(kind.marks(point))
        row["status"] = STATUS_OK if feasible else STATUS_INFEASIBLE
        row["reason"] = reason
        if not feasible:  # nothing was measured: empty, not 0
            row.update(dict.fromkeys(kind.measured, ""))
    except Exception as e:  # a failing point is a row, never the end of the sweep
        row.update(kind.marks(point))
        row["status"] = STATUS_ERROR
        row["reason"] = failure(e)
    return row


def died_row(point: Any, why: str) -> dict[str, Any]:
    """The row of a point whose worker process died under it: an error, and the sweep goes on."""
    return {"point": point.index, "point_key": point.key,
            **{f"set:{k}": v for k, v in point.overrides.items()},
            "tuned": point.tuned, "status": STATUS_ERROR, "reason": why}
