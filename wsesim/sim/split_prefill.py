"""Split prefill on the one-request pipeline (docs/model.md §11.10), as costs the executors run unchanged:
the prompt is prefilled on wafers of its own (``inference.prefill_systems``, their own mapping and
costs), its KV cache handed to the decode wafers, which then decode as before.

The KV cache of the prompt's S tokens is, per layer, S · ``kv_bytes_per_token`` (K and V, §11.3). Each
prefill wafer sends the layers its stages hold through its own I/O link while each decode wafer takes
in the layers its stages hold through its own, every wafer at once; the hand-off ends when the wafer
with the most bytes to move, sending or receiving, is done, plus one interconnect node:

    t_kv = max over wafers (bytes through its link) / io_bytes_per_cycle + latency   (``wafer_handoff``).

In the pipeline's terms: the first decode stage's prefill is the prefill wafers' whole path (their
stages' prefills and the hand-offs between them, ``prefill_path``: the first token is out when it
ends), the other decode stages pass it on at no cost, and the last decode stage's hand-off after the
prefill is t_kv: the first decode step starts when the cache has landed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..config.inference import InferenceExperimentSpec
from ..model.energy import EventCounts
from ..model.serving import kv_bytes_per_token
from .batch_costs import BatchCosts
from .costing import Costs, wafer_handoff
from .mapping import Mapping
from .speculative import prefill_path

__all__ = ["KvHandoff", "kv_handoff", "kv_rate", "split_prefill_costs"]


def kv_handoff(spec: InferenceExperimentSpec, prefill: Mapping, decode: Mapping) -> tuple[float, float]:
    """(bytes of one request's KV cache, cycles to hand it from the prefill wafers to the decode ones)."""
    per_layer = kv_bytes_per_token(spec.model) * spec.inference.prompt_len
    sent: Counter[tuple[str, int]] = Counter()
    for side, mapping in (("prefill", prefill), ("decode", decode)):
        for st in mapping.stages:
            sent[side, st.wafer] += len(st.layers) * per_layer
    total = per_layer * spec.model.layers
    return total, wafer_handoff(spec, max(sent.values()))


def split_prefill_costs(costs: Costs, prefill: Costs,
                        kv_cycles: float) -> Costs:
    """The decode wafers' costs with the prompt prefilled elsewhere (see the module's docstring)."""
    last = len(costs.stages) - 1
    stages = tuple(replace(c, prefill=(), elsewhere=prefill_path(prefill) if s == 0 else 0.0,
                           handoff_prefill=kv_cycles if s == last else 0.0)
                   for s, c in enumerate(costs.stages))
    return replace(costs, stages=stages)


def kv_rate(spec: InferenceExperimentSpec, prefill: Mapping, decode: Mapping) -> float:
    """Bytes through the busiest wafer link per prompt token of KV cache handed from the prefill wafers
    to the decode ones (``kv_handoff``'s max over wafers, for one token)."""
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
        self.iteration, self.counts = last.iteration, last.counts

    def handoff(self, values: int) -> float:
        return wafer_handoff(self.spec, values * self.per_token) if values else 0.0

    def handoff_counts(self, values: int) -> EventCounts:
        """Every byte of the cache out of a prefill wafer and into a decode wafer (the busiest link's
        bytes stand for the time, every layer's for the energy)."""
        whole = values * kv_bytes_per_token(self.spec.model) * self.spec.model.layers
        return EventCounts(io_bytes=2.0 * whole)
