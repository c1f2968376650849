"""A step's timeline as a table, one row per op: the data of ``ops.csv`` (``wsesim run --out``).

Pure functions over a finished ``Trace``. A row of the step's own timeline (``Track.STEP``) is one
span: its op (phase) name, pass, layer, tile, start and cycles (end - start), the FLOPs and weight
bytes it fed, the bytes it moved over the fabric, and where it ran (``Where``, from ``OP_WHERE``). The
expert regions' ops (``trace.expert_ops``: ``gate_up``/``down`` per expert) are aggregated per (op,
pass, layer): ``start`` the earliest, ``cycles`` from the earliest start to the latest end,
``busy_cycles`` their sum over experts and pieces, ``experts`` how many distinct experts ran it; with
several micro-batches one row holds them all. Their FLOPs are the ``experts`` phase's, not split per
expert op, so the cells are empty. Rows are sorted by start, then by op, pass and layer: the same
trace, the same table.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from typing import Any

import numpy as np

from ..model.vocabulary import Phase, Track, Where
from ..sim.programs.plan import Trace

OP_WHERE: dict[str, Where] = {
    Phase.ATTENTION: Where.WAFER, Phase.FFN: Where.WAFER, Phase.ROUTER: Where.WAFER,
    Phase.EXPAND: Where.WAFER, Phase.WEIGHTED_SUM: Where.WAFER, Phase.LM_HEAD: Where.WAFER,
    Phase.DISPATCH: Where.FABRIC, Phase.COMBINE: Where.FABRIC, Phase.EXPERTS: Where.REGIONS,
    Phase.WEIGHT_STALL: Where.LINK_IN, Phase.GRADIENT_STALL: Where.LINK_OUT,
    Phase.GRADIENT_DRAIN: Where.LINK_OUT, Phase.REDUCE_DRAIN: Where.BETWEEN_WAFERS,
    Phase.OPTIMIZER_STEP: Where.MEMORYX,
}
"""Where each span of the step's timeline ran (an expert op runs on the regions); a test checks that
every ``Phase`` has a place."""

OPS_COLUMNS = ("op", "pass", "layer", "tile", "where", "start", "cycles", "busy_cycles", "experts", "flops",
               "weight_bytes", "bytes")


def ops_table(trace: Trace) -> list[dict[str, Any]]:
    """One dict per op of the step (keys ``OPS_COLUMNS``; ``None`` where a value does not apply)."""
    rows = [_span_row(s.name, s.start, s.end, s.args) for s in trace.spans if s.track == Track.STEP]
    groups: dict[tuple[str, str, int], list[Any]] = defaultdict(list)
    for o in trace.expert_ops:
        groups[(str(o.op), str(o.pass_), int(o.layer))].append(o)
    for (op, pass_, layer), ops in groups.items():
        starts = np.concatenate([np.asarray(o.start, dtype=np.float64) for o in ops])
        ends = np.concatenate([np.asarray(o.end, dtype=np.float64) for o in ops])
        experts = {int(e) for o in ops for e in np.asarray(o.experts).tolist()}
        rows.append(_row(op, pass_, layer, None, Where.REGIONS, float(starts.min()) if starts.size else 0.0,
                         float(ends.max() - starts.min()) if starts.size else 0.0,
                         busy=math.fsum(sorted((ends - starts).tolist())), experts=len(experts)))
    return sorted(rows, key=_order)


def _span_row(name: str, start: float, end: float, args: dict[str, Any]) -> dict[str, Any]:
    where = OP_WHERE.get(str(name), Where.WAFER)
    return _row(str(name), args.get("pass"), args.get("layer"), args.get("tile"), where, float(start),
                float(end - start), flops=args.get("flops"), weight_bytes=args.get("weight_bytes"),
                nbytes=args.get("bytes"))


def _row(op: str, pass_: Any, layer: Any, tile: Any, where: Where, start: float, cycles: float, *,
         busy: float | None = None, experts: int | None = None, flops: Any = None, weight_bytes: Any = None,
         nbytes: Any = None) -> dict[str, Any]:
    return {"op": op, "pass": None if pass_ is None else str(pass_), "layer": plain(layer),
            "tile": plain(tile), "where": str(where), "start": start, "cycles": cycles, "busy_cycles": busy,
            "experts": experts, "flops": plain(flops), "weight_bytes": plain(weight_bytes),
            "bytes": plain(nbytes)}


def plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (anything else as it is)."""
    return value.item() if isinstance(value, np.generic) else value


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    layer = row["layer"]
    return (row["start"], row["op"], row["pass"] or "", -1 if layer is None else layer,
            -1 if row["tile"] is None else row["tile"])


def table_csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    """Rows as CSV text under the header ``columns`` (an empty cell for ``None``, a whole float as an
    integer): the one writer of ``ops.csv``, a training step's or a serving run's decode step."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row[c] is None else csv_cell(row[c]) for c in columns])
    return buf.getvalue()


def csv_cell(value: Any) -> Any:
    """A CSV cell: a whole float as an integer (``3.0`` -> ``3``), anything else as it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
