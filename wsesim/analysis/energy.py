"""A run's energy, from the events its trace and costs record (docs/model.md §12): the counts are
gathered here, where the results are measured, and priced by ``model.energy`` (the one home of the
arithmetic).

* Training: the step's executed FLOPs (recomputation included) as FMACs on the model's lanes, with
  their SRAM operand traffic, and the bytes through the system's I/O (weights in, gradients out). The
  step's fabric model times a dispatch by its busiest link and records no hop count, so a training step
  counts no wavelet-hops (docs/model.md §12 says what that leaves out).
* Serving: every stage visit in the trace (a request's prefill or one decode token at one stage) counts
  its stage's kernels at that token's context — FMACs, SRAM bytes, wavelet-hops — and its hand-off
  (wavelet-hops on one wafer, I/O bytes between wafers); under continuous batching every iteration in
  the log counts its kernels at its batch, contexts and prompt pieces (``BatchCosts.counts``) and its
  hand-off the same way.

Every system draws its floor for the whole run. Figures that need a price or an energy section the
hardware lacks are None (n/a), never 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..config.specs import HardwareSpec
from ..kernels.cost import lanes_dtype
from ..model.energy import PARTS, EventCounts, energy_of
from ..model.serving import kv_bytes_per_token
from ..sim.cost.costing import Costs
from ..sim.programs.plan import BatchLog, Trace

__all__ = ["TRAINING_ENERGY_FIELDS", "WAFER_ACCOUNTING", "Accounting", "batch_counts",
           "priced", "serving_energy", "training_counts", "training_energy"]

TRAINING_ENERGY_FIELDS = ("energy_per_step_j", "joules_per_token", "power_w",
                          *(f"energy_{part}_j" for part in PARTS))
"""A training result's energy fields (``RunResult``), all None when the hardware has no energy section."""


def training_counts(bytes_per_value: int, trace: Trace) -> EventCounts:
    """One system's step: its FLOPs as FMACs on the lanes of the model's values, and its I/O bytes."""
    return EventCounts.of_fmacs(trace.executed_flops / 2, lanes_dtype(bytes_per_value),
                                io_bytes=trace.io_bytes_in + trace.io_bytes_out)


def training_energy(hw: HardwareSpec, bytes_per_value: int, trace: Trace, *, step_s: float, systems: int,
                    tokens: int) -> dict[str, Any]:
    """The energy fields of a training result: the step's joules on all ``systems`` (each runs the same
    step), per token of the global batch (``tokens`` on one system), and one system's mean power."""
    energy = energy_of(hw, training_counts(bytes_per_value, trace).scaled(systems), step_s, systems)
    if energy is None:
        return dict.fromkeys(TRAINING_ENERGY_FIELDS)
    return {"energy_per_step_j": energy.joules, "joules_per_token": energy.joules / (systems * tokens),
            "power_w": energy.watts / systems, **{f"energy_{k}_j": v for k, v in energy.parts().items()}}


def batch_counts(costs: Costs, log: BatchLog) -> EventCounts:
    """The events of every iteration a continuously batched run logged, and of its hand-off (summed in
    the log's order, the same for both executors). Iterations alike (the same ``_KEY`` columns) are
    costed once: a chunk of the log at a time, its distinct rows found with numpy (``_distinct``) and
    costed the first time any chunk meets them, then their events gathered row by row and summed."""
    stations, last = costs.stations(), len(costs.stages) - 1
    # with a draft and prefill wafers, the prefill wafers' last stage also sends each first token to it
    first_tokens = len(costs.stages) + len(costs.pool) - 1 if costs.pool and costs.draft is not None else -1

    def events(key: tuple[int, ...]) -> list[float]:
        s, decodes, longest, pieces, tokens, reach, ends, moved = key
        station = stations[s]
        assert station is not None, "a continuously batched run's stages have their batch costs"
        # the last stage's hand-off goes to the draft's wafers when there is one
        moved_counts = (costs.draft.receive_counts(moved) if s == last and costs.draft is not None
                        else station.handoff_counts(moved))
        c = station.counts(decodes, longest, pieces, tokens, reach, ends) + moved_counts
        if s == first_tokens:
            c = c + costs.draft.receive_counts(ends)
        return [getattr(c, name) for name in _FIELDS]

    seen: dict[tuple[int, ...], int] = {}  # each distinct iteration's row in ``table``
    table: list[list[float]] = []
    values, total = np.zeros((0, len(_FIELDS))), np.zeros((1, len(_FIELDS)))
    chunk = 1 << 16
    for at in range(0, len(log.stage), chunk):
        columns = [getattr(log, name)[at:at + chunk] for name in _KEY]
        first, inverse = _distinct(columns)
        ids = []
        for key in zip(*(c[first].tolist() for c in columns), strict=True):
            i = seen.get(key)
            if i is None:
                i = seen[key] = len(table)
                table.append(events(key))
            ids.append(i)
        if len(table) > len(values):
            values = np.concatenate([values, np.array(table[len(values):])])
        # the sum row by row, each field on its own, as adding the EventCounts one by one would: numpy's
        # accumulate adds in order (a chunk's first row carries the sum so far)
        rows = values[np.array(ids, dtype=np.int64)[inverse]]
        total = np.add.accumulate(np.concatenate([total, rows]))[-1:]
    counts = EventCounts(*total[0].tolist())
    kv = log.kv_events
    swapped = float(kv[kv[:, 0] > 0, 4].sum()) if len(kv) else 0.0
    if swapped:  # a paged cache's swaps: every layer's share through its wafer's I/O, out and back in
        stages = [c.batches for c in costs.stages]
        counts = counts + EventCounts(io_bytes=swapped * kv_bytes_per_token(stages[0].spec.model)
                                      * sum(b.layers for b in stages))
    return counts


_KEY = ("stage", "decodes", "longest", "pieces", "prompt_tokens", "reach", "ends", "moved")
"""The log's columns that say what an iteration's events are (``batch_counts``)."""
_FIELDS = tuple(f.name for f in fields(EventCounts))


def _distinct(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``columns`` (integers, all one length) told apart: the index of one row of each distinct
    row, and each row's position among them. The columns packed into one integer a row (one sort of
    integers): by their values' spans where those allow, else by each column's rank among its own values,
    the packed code ranked again whenever the next column would overflow it."""
    lows = [int(c.min()) for c in columns]
    spans = [int(c.max()) - low + 1 for c, low in zip(columns, lows, strict=True)]
    packed, stride = np.zeros(len(columns[0]), dtype=np.int64), 1
    if np.prod(spans, dtype=object) < 1 << 62:
        for c, low, span in zip(columns, lows, spans, strict=True):
            packed += (c.astype(np.int64) - low) * stride
            stride *= span
    else:
        for c in columns:
            values, rank = np.unique(c, return_inverse=True)
            if stride * len(values) >= 1 << 62:  # the code so far by its rank: as many as its distinct rows
                kept, ranked = np.unique(packed, return_inverse=True)
                packed, stride = ranked.reshape(-1).astype(np.int64), len(kept)
            packed = packed * len(values) + rank.reshape(-1)
            stride *= len(values)
    _, first, inverse = np.unique(packed, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def serving_energy(hw: HardwareSpec, costs: Costs, trace: Trace, *, seconds: float, systems: int,
                   tokens: int, price_per_system_hour: float | None) -> dict[str, Any]:
    """The energy fields of a serving result: the run's joules on its ``systems`` wafers over ``seconds``
    (end to end), per output token (``tokens`` in all), tokens/s per kW of mean power, and with a price,
    US dollars per million output tokens (the systems' hours at that price)."""
    assert trace.batches is not None, "a serving run's trace has its batch log"
    counts = batch_counts(costs, trace.batches)
    energy = energy_of(hw, counts, seconds, systems)
    return priced(None if energy is None else energy.joules, {} if energy is None else energy.parts(),
                  counts.to_dict(), seconds=seconds, systems=systems, tokens=tokens,
                  price_per_system_hour=price_per_system_hour)


def priced(joules: float | None, parts: dict[str, float], events: dict[str, float], *, seconds: float,
           systems: int, tokens: int, price_per_system_hour: float | None) -> dict[str, Any]:
    """A serving result's energy fields, on a wafer or on GPUs, from the run's ``joules`` by part (None: n/a)
    over ``seconds`` on ``systems``: the mean power, per output token (``tokens`` in all), tokens/s per kW of
    mean power (None, not 0, when the run drew no power), and with a price, US dollars per million output
    tokens (the systems' hours at that price)."""
    usd = (price_per_system_hour * systems * seconds / 3600 / tokens * 1e6
           if price_per_system_hour is not None and tokens else None)
    if joules is None or not tokens:
        return {"energy_j": None, "energy_by_part_j": {}, "power_w": None, "joules_per_token": None,
                "tokens_per_s_per_kw": None, "usd_per_million_tokens": usd, "energy_events": events}
    return {"energy_j": joules, "energy_by_part_j": parts,
            "power_w": joules / seconds if seconds > 0 else 0.0, "joules_per_token": joules / tokens,
            "tokens_per_s_per_kw": tokens / joules * 1000 if joules > 0 else None,
            "usd_per_million_tokens": usd, "energy_events": events}


@dataclass(frozen=True)
class Accounting:
    """How a serving run's machine is accounted (``analysis.serving.measure_serving``): ``energy(spec,
    costs, trace, busy_cycles, mapping, seconds=, systems=, tokens=)`` its energy fields, ``words`` the
    parts of a decode step as its bottleneck line names them (None: a wafer's own)."""

    energy: Callable[..., dict[str, Any]]
    words: dict[str, str] | None = None


def _wafer_energy(spec: Any, costs: Costs, trace: Trace, busy_cycles: Any, mapping: Any, *, seconds: float,
                  systems: int, tokens: int) -> dict[str, Any]:
    return serving_energy(spec.hardware, costs, trace, seconds=seconds, systems=systems, tokens=tokens,
                          price_per_system_hour=spec.inference.price)


WAFER_ACCOUNTING = Accounting(_wafer_energy)
"""A wafer's: its events' energy (``serving_energy``), its parts by their own names."""
