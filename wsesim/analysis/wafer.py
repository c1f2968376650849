"""Where the time and the bytes go on the wafer: per-node maps computed from a finished run (pure).

Maps are over the mesh's nodes (one per PE at ``pe`` granularity, one per K×K block at ``block:K``):

* ``busy``  — fraction of the step each node's PEs compute: whole-wafer ops (attention, router, LM
  head) occupy every PE; an expert op occupies its region's PEs;
* ``sram``  — SRAM high-water per PE (bytes): the memory model's peak phase, with each region's expert
  working set scaled by its busiest layer's load;
* ``link``  — bytes the busiest outgoing link of each node carries over the step's dispatches and combines;
* ``region`` — the expert region each node belongs to (-1: none), and the experts of each region;
* ``gantt`` — one layer's forward, recompute and backward spans: the step timeline, the weight chunks of
  that layer arriving (lane ``weights in``), and the ``GANTT_REGIONS`` expert regions that waited longest
  for their weights in it (each op, and before it the wait, ``<pass> weight_wait``).

``WaferMaps.to_dict``/``from_dict`` round-trip through JSON, so ``wsesim plot --wafer DIR`` can draw a
saved run.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ..fabric.fidelity import dispatch_models
from ..fabric.mesh import INJECT, LINKS_PER_NODE
from ..model.memory import EXPERT_PARTS, training_memory
from ..model.routing import region_load
from ..model.vocabulary import Phase, Track

GANTT_REGIONS = 8


@dataclass
class WaferMaps:
    rows: int
    cols: int
    block: int
    clock_hz: float
    step_cycles: float
    busy: list[list[float]]
    sram: list[list[float]]
    sram_capacity: float
    link: list[list[float]]
    region: list[list[int]]
    region_experts: list[list[int]]
    gantt_layer: int
    gantt: list[tuple[str, str, float, float]]
    title: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WaferMaps:
        fields = {k: data[k] for k in cls.__dataclass_fields__}
        fields["gantt"] = [tuple(g) for g in fields["gantt"]]  # JSON has no tuples
        return cls(**fields)


_WAFER_BUSY = frozenset({Phase.ATTENTION, Phase.ROUTER, Phase.LM_HEAD})
"""Whole-wafer phases counted as every node's busy time. (A dense FFN and the in-place copy ops are not
counted here yet: the busy map of a dense or in-place run understates the wafer's work.)"""


def wafer_maps(run: Any) -> WaferMaps:
    """The maps of a finished, feasible ``runner.Run``."""
    result, trace, plan, mesh, placement = run.result, run.trace, run.plan, run.mesh, run.placement
    nodes_shape = (mesh.rows, mesh.cols)
    step = trace.step_cycles
    region_of_node = np.full(mesh.nodes, -1, dtype=np.int64)
    for r, region in enumerate(placement.regions):
        region_of_node[mesh.region_nodes(region)[0]] = r

    # busy: whole-wafer ops everywhere, expert ops on their region
    wafer_ops = sum(end - start for track, name, start, end, _ in trace.spans
                    if track == Track.STEP and name in _WAFER_BUSY)
    region_busy = np.zeros(len(placement.regions))
    region_index = np.asarray(placement.expert_region_index)
    for ops in trace.expert_ops:
        np.add.at(region_busy, region_index[ops.experts], ops.end - ops.start)
    busy = np.full(mesh.nodes, wafer_ops / step)
    inside = region_of_node >= 0
    busy[inside] += region_busy[region_of_node[inside]] / step

    # SRAM: each region's peak from the memory model at its own load (the result's peak is the hottest's)
    hw, m, t = plan.hw, plan.model, plan.training
    tokens = plan.tokens
    region_pes = [r.pes for r in placement.regions]
    per_region = [training_memory(hw, m, t, batch_per_tile=plan.batch_per_tile,
                                  expert_load=load).peak_bytes_per_pe
                  for load in region_load(tokens, region_index, region_pes, hw.pes)]
    outside = training_memory(hw, m, t,
                              batch_per_tile=plan.batch_per_tile).peak_bytes_per_pe_without(EXPERT_PARTS)
    sram = np.full(mesh.nodes, float(outside))
    sram[inside] = np.asarray(per_region, dtype=float)[region_of_node[inside]]

    # link load: every dispatch and combine of the step
    per_layer = tokens.astype(float) * m.hidden_size * m.bytes_per_value
    passes = 3 if t.activations == "recompute" else 2  # forward, (recompute,) backward
    link = np.zeros(mesh.nodes * LINKS_PER_NODE)
    for model in dispatch_models(mesh, placement).values():  # the models the step was timed with
        link += passes * model.link_load(per_layer.sum(axis=0))
    link_out = link.reshape(mesh.nodes, LINKS_PER_NODE)[:, :INJECT].max(axis=1)  # the four mesh links

    layer = m.layers // 2
    gantt = _gantt(trace, layer, region_index, len(placement.regions))
    experts_of = [[] for _ in placement.regions]
    for e, r in enumerate(region_index):
        experts_of[r].append(e)
    shape = f"E={result.experts} top_k={result.top_k}" if result.experts else "dense"
    title = (f"{result.model} on {result.hardware}: {shape} "
             f"seq_len={result.seq_len} B={result.batch_per_tile} G={result.tiles}")
    return WaferMaps(mesh.rows, mesh.cols, mesh.block, hw.clock_hz, step,
                     busy.reshape(nodes_shape).tolist(), sram.reshape(nodes_shape).tolist(),
                     float(result.sram_capacity_bytes_per_pe), link_out.reshape(nodes_shape).tolist(),
                     region_of_node.reshape(nodes_shape).tolist(), experts_of, layer, gantt, title)


def _gantt(trace: Any, layer: int, region_index: np.ndarray,
           regions: int) -> list[tuple[str, str, float, float]]:
    """The Gantt chart's bars of one ``layer``: the step's ops, the weights that came in for it, and the
    expert ops (with their waits for weights) of the ``GANTT_REGIONS`` regions that waited longest."""
    gantt = [(Track.STEP, f"{args.get('pass', '')} {name}", start, end)
             for track, name, start, end, args in trace.spans
             if track == Track.STEP and args.get("layer") == layer]
    io = trace.io_in
    for i in np.flatnonzero(~np.isnan(io.arrival)) if io is not None else ():
        key = io.names[i]
        if len(key) > 2 and key[1] == layer:  # (pass, layer, tensor[, expert])
            gantt.append(("weights in", f"{key[0]} {'expert' if len(key) > 3 else 'layer'}_weights",
                          float(io.start[i]), float(io.arrival[i])))
    in_layer = [ops for ops in trace.expert_ops if ops.layer == layer]
    waited, last = np.zeros(regions), np.zeros(regions)
    for ops in in_layer:
        np.add.at(waited, region_index[ops.experts], ops.weight_wait)
        np.maximum.at(last, region_index[ops.experts], ops.end)
    shown = set(sorted(range(len(waited)), key=lambda r: (-waited[r], -last[r], r))[:GANTT_REGIONS])
    for ops in in_layer:
        for e, a, b, w in zip(ops.experts.tolist(), ops.start.tolist(), ops.end.tolist(),
                              ops.weight_wait.tolist(), strict=True):
            r = int(region_index[e])
            if r in shown:
                if w > 0:
                    gantt.append((f"region {r}", f"{ops.pass_} weight_wait", a - w, a))
                gantt.append((f"region {r}", f"{ops.pass_} {ops.op}", a, b))
    return gantt


def hottest_region(maps: WaferMaps,
                   values: list[list[float]]) -> tuple[int, tuple[int, int, int, int]] | None:
    """The expert region whose nodes hold the highest mean of ``values`` (a map of the mesh), and its
    bounding box in nodes (row0, col0, rows, cols); None without regions or where all are equal."""
    region, data = np.asarray(maps.region), np.asarray(values, dtype=float)
    ids = [r for r in range(len(maps.region_experts)) if (region == r).any()]
    if not ids:
        return None
    means = [float(data[region == r].mean()) for r in ids]
    if max(means) <= min(means):
        return None
    best = ids[int(np.argmax(means))]
    rows, cols = np.nonzero(region == best)
    return best, (int(rows.min()), int(cols.min()), int(rows.max() - rows.min() + 1),
                  int(cols.max() - cols.min() + 1))


def expert_ranges(experts: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``: a region's experts, short enough to print on it."""
    parts, run = [], []
    for e in sorted(experts):
        if run and e == run[-1] + 1:
            run.append(e)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [e]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


def region_colours(region: list[list[int]], count: int, colours: int = 8) -> list[int]:
    """A colour index (``0 … colours-1``) for each of ``count`` expert regions on the map ``region`` (each
    node's region, -1 for none), no two that touch (share an edge of the map) alike: greedy, the regions
    with most neighbours first. Regions numbered side by side once took neighbouring colours of a
    palette that pairs light and dark of one hue, and a wafer's neighbours read as one block. Planar maps
    need at most four; should a region touch ``colours`` others of every colour, it takes the least
    used among its neighbours' (never reached on a mesh of rectangles)."""
    grid = np.asarray(region)
    touching: list[set[int]] = [set() for _ in range(count)]
    for a, b in ((grid[:, :-1], grid[:, 1:]), (grid[:-1, :], grid[1:, :])):
        for p, q in zip(a.ravel().tolist(), b.ravel().tolist(), strict=True):
            if p != q and p >= 0 and q >= 0:
                touching[p].add(q)
                touching[q].add(p)
    out = [-1] * count
    for r in sorted(range(count), key=lambda r: (-len(touching[r]), r)):
        taken = [out[n] for n in touching[r] if out[n] >= 0]
        free = [c for c in range(colours) if c not in taken]
        out[r] = free[0] if free else min(range(colours), key=taken.count)
    return out
