"""Split prefill as stations of the iteration-level scheduler (docs/model.md §11.10): the prompt is
prefilled on wafers of its own (``inference.disaggregation.prefill_systems``, their own mapping and costs), a
pool of stations before the decode stages, and its KV cache handed to the decode wafers, which then only
decode.

The KV cache of a prompt's S tokens is, per layer, S · ``kv_bytes_per_token`` (K and V, §11.3). Each
prefill wafer sends the layers its stages hold through its own I/O link while each decode wafer takes
in the layers its stages hold through its own, every wafer at once; the hand-off ends when the wafer
with the most bytes to move, sending or receiving, is done, plus one interconnect node:

    t_kv = max over wafers (bytes through its link) / io_bytes_per_cycle + latency   (``wafer_handoff``).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ...model.energy import EventCounts
from ...model.serving import kv_bytes_per_token
from ..programs.mapping import Mapping
from .batch_costs import BatchCosts
from .costing import wafer_handoff

if TYPE_CHECKING:
    from ...config.inference import InferenceExperimentSpec

__all__ = ["KvHandoff", "kv_rate"]


def kv_rate(spec: InferenceExperimentSpec, prefill: Mapping, decode: Mapping) -> float:
    """Bytes through the busiest wafer link per prompt token of KV cache handed from the prefill wafers
    to the decode ones (the max over wafers of the module's formula, for one token)."""
    sent: Counter[tuple[str, int]] = Counter()
    for side, mapping in (("prefill", prefill), ("decode", decode)):
        for st in mapping.stages:
            sent[side, st.wafer] += len(st.layers) * kv_bytes_per_token(spec.model)
    return max(sent.values())


class KvHandoff:
    """The prefill pool's last stage under continuous batching: its iterations as its ``BatchCosts``,
    its hand-off the KV cache of the prompts it finished to the decode wafers, ``values`` prompt tokens
    of it, each wafer's layers through its own link at once (``kv_rate`` bytes a token through the
    busiest), queued behind the one before on that link by the executors."""

    def __init__(self, spec: InferenceExperimentSpec, last: BatchCosts, per_token: float) -> None:
        self.spec, self.last, self.per_token = spec, last, per_token
        self.iteration, self.counts, self.experts = last.iteration, last.counts, last.experts

    def handoff(self, values: int) -> float:
        return wafer_handoff(self.spec, values * self.per_token) if values else 0.0

    def handoff_counts(self, values: int) -> EventCounts:
        """Every byte of the cache out of a prefill wafer and into a decode wafer (the busiest link's
        bytes stand for the time, every layer's for the energy)."""
        whole = values * kv_bytes_per_token(self.spec.model) * self.spec.model.layers
        return EventCounts(io_bytes=2.0 * whole)
