"""One decode step as a table, one row per op: the data of a serving run's ``ops.csv`` (``wsesim infer
--out``), as ``analysis.ops`` is a training step's.

Pure functions over a finished serving program and its costs (``sim.cost.costing.cost_serving``): for each
stage in pipeline order, each kernel of its decode step in the order it runs — its op name, kind (gemv,
allreduce, elementwise, ...), layer, its dimensions at the context the step is costed at
(``sim.cost.costing.decode_context``: the last decode step's, where attention costs most), the region of the
stage's grid it runs on, ``start`` (cycles since the stage began the step: the ops run one after another)
and ``cycles``, split along its critical path into instruction issue, arithmetic, wavelets on the fabric
and waiting, and whether it fits (its reason if not); then the hand-off of the token's activations to the
next stage (``handoff``). A stage's kernel rows add up to its decode step's cycles at that context (the
``StageCosts.decode_step``), the hand-off after them; the same program, the same table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..sim.cost.costing import Costs, decode_context
from ..sim.programs.program import Program, ServeBatches

if TYPE_CHECKING:
    from ..config.inference import InferenceExperimentSpec

DECODE_OPS_COLUMNS = ("stage", "wafer", "op", "kind", "layer", "dims", "region", "context", "start",
                      "cycles", "instruction_cycles", "compute_cycles", "communication_cycles",
                      "waiting_cycles", "fits", "reason")


def decode_ops(spec: InferenceExperimentSpec, program: Program, costs: Costs) -> list[dict[str, Any]]:
    """One dict per op of a decode step, stage by stage (keys ``DECODE_OPS_COLUMNS``; ``None`` where a value
    does not apply): one request's at the spec's lengths."""
    serve = next(op for op in program.body if isinstance(op, ServeBatches))
    context = decode_context(spec.inference.load.prompt_len, spec.inference.load.output_len)
    rows: list[dict[str, Any]] = []
    for work, cost in zip(serve.stages, costs.stages, strict=True):
        stage = {"stage": work.stage.index, "wafer": work.stage.wafer}
        start = 0.0
        for op, c in zip(work.decode, cost.decode, strict=True):
            waiting = max(0.0, c.cycles - c.overhead - c.compute - c.communication)
            rows.append({**stage, "op": op.name, "kind": str(op.kind), "layer": op.layer,
                         "dims": "x".join(str(d) for d in op.at(context)),
                         "region": None if op.region is None else f"{op.region[0]}x{op.region[1]}",
                         "context": context, "start": start, "cycles": c.cycles,
                         "instruction_cycles": c.overhead, "compute_cycles": c.compute,
                         "communication_cycles": c.communication, "waiting_cycles": waiting,
                         "fits": c.feasible, "reason": c.reason or None})
            start += c.cycles
        rows.append({**stage, "op": "handoff", "kind": "handoff", "layer": None,
                     "dims": str(work.handoff_decode.values), "region": None, "context": context,
                     "start": start, "cycles": cost.handoff_decode, "instruction_cycles": None,
                     "compute_cycles": None, "communication_cycles": None,
                     "waiting_cycles": None, "fits": True, "reason": None})
    return rows


PARTS = ("instruction_cycles", "compute_cycles", "communication_cycles", "waiting_cycles")
"""How a decode op's cycles split along its critical path (the columns of ``DECODE_OPS_COLUMNS``)."""


def decode_step_plan(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``wsesim plot`` draws of a serving run's ``ops.csv`` (rows as read: text cells): each stage's
    decode step split into ``PARTS`` plus its hand-off, and the first stage's first layer op by op, each
    split the same way. Every row is counted once in ``stages``; ``layer`` holds the ops of one layer."""
    def cycles(row: dict[str, Any], part: str) -> float:
        return float(row[part]) if row.get(part) not in (None, "") else 0.0

    stages: dict[str, dict[str, float]] = {}
    for row in rows:
        totals = stages.setdefault(str(row["stage"]), {**dict.fromkeys(PARTS, 0.0), "handoff_cycles": 0.0})
        if row["op"] == "handoff":
            totals["handoff_cycles"] += cycles(row, "cycles")
        else:
            for part in PARTS:
                totals[part] += cycles(row, part)
    first = next((r for r in rows if r["op"] != "handoff" and r.get("layer") not in (None, "")), None)
    layer = [{"op": r["op"], **{part: cycles(r, part) for part in PARTS}} for r in rows
             if first is not None and r["stage"] == first["stage"] and r.get("layer") == first["layer"]]
    return {"stages": [{"stage": k, **v} for k, v in stages.items()],
            "layer": {"stage": first["stage"] if first else None, "layer": first["layer"] if first else None,
                      "ops": layer},
            "context": rows[0]["context"] if rows else None}
