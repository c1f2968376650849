"""The parts of a serving experiment's spec (``config.inference``) that stand alone: the bounds of its
counts and quantities, and its small groups: the latency targets (``SloSpec``), the speculative draft
(``SpeculativeSpec``), split prefill (``DisaggregationSpec``), MoE serving (``MoeSpec``) and the price
(``EconomicsSpec``)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator

from .base import Spec, fail
from .cluster import Systems
from .errors import shown_repr
from .fields import count, quantity
from .specs import ModelSpec, Tokens, routing_problem, zipf_of

__all__ = ["Acceptance", "DisaggregationSpec", "DraftTokens", "EconomicsSpec", "ExpertGrids", "MoeSpec",
           "Rate", "Requests", "Sigma", "SloSpec", "SpeculativeSpec", "StageLayers", "Systems", "Target",
           "Tokens", "check_experts_fit", "kv_block_problem"]

# Tokens (training's bound, 2^24) is past any serving context too (128K-1M); batches of thousands of requests
Requests = count(65_536)
StageLayers = count(16_384)
ExpertGrids = count(4_096)  # grids one MoE layer's experts spread over
_PER_SECOND = re.compile(r"\s*([0-9][0-9_.]*(?:[eE][+-]?[0-9]+)?)\s*(?:requests?\s*)?/\s*s\s*")


def _rate(value: Any) -> Any:
    """Requests per second as every other quantity is written, with its unit ("2 /s", "0.5 requests/s"),
    or a bare number as before; any other text is refused, naming both spellings."""
    if not isinstance(value, str):
        return value
    if match := _PER_SECOND.fullmatch(value):
        try:
            return float(match.group(1))
        except ValueError:  # "1.2.3 /s": digits and dots, not a number
            pass
    raise fail(f'expected a rate like "2 /s" (requests per second) or a number, got "{value}"')


# a wafer serves a request in milliseconds: 10^6 requests/s is past any load one could offer it
Rate = Annotated[float, BeforeValidator(_rate), Field(gt=0, le=1e6), WithJsonSchema({
    "anyOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": 1e6},
              {"type": "string", "pattern": "^" + _PER_SECOND.pattern.replace("\\s*", " *") + "$"}],
    "description": 'requests per second, e.g. "2 /s" or 2 (above 0, at most 1,000,000)'})]
# the σ of ln(length): 0.5-1.5 fits published traces' prompt and output lengths; 4 is past any of them
Sigma = Annotated[float, Field(gt=0, le=4)]
# a latency target: a token in microseconds to a first token in minutes
Target = quantity("time", "1 us", "3600 s", "500 ms")


class SloSpec(Spec):
    """Latency targets a request must meet to count as goodput: its time to first token and its mean
    time per output token (docs/model.md §11.7)."""

    ttft_s: Target = Field(alias="ttft")
    tpot_s: Target = Field(alias="tpot")


# draft tokens per verify pass: speculative decoding papers use 2-8; past 32 the draft's misses dominate
DraftTokens = count(32)
Acceptance = Annotated[float, Field(ge=0, le=1)]


class SpeculativeSpec(Spec):
    """Speculative decoding (docs/model.md §11.9): a ``draft`` model (a preset name or a model file,
    resolved when loaded) proposes ``tokens`` (K) tokens one decode step at a time, then the target
    verifies the K + 1 positions in one pass; each drafted token is accepted with probability
    ``acceptance`` (α, an input: no rate is published for a wafer)."""

    draft: ModelSpec
    tokens: DraftTokens = 4
    acceptance: Acceptance


class DisaggregationSpec(Spec):
    """Split prefill (docs/model.md §11.10): prompts prefilled on ``prefill_systems`` wafers of their own,
    each KV cache handed to the decode wafers."""

    prefill_systems: Systems


class MoeSpec(Spec):
    """MoE serving (docs/model.md §11.8). ``routing``: "balanced", every token's top_k experts on k regions,
    one expert's time (no sampling); "uniform" or "zipf:<alpha>", each token's experts drawn, as
    training.routing's. ``expert_grids``: the grids one MoE layer's experts spread over (1, N, or auto: the
    mapping decides)."""

    routing: str = "balanced"
    expert_grids: ExpertGrids | Literal["auto"] = 1

    @field_validator("routing")
    @classmethod
    def _routing_kind(cls, routing: str) -> str:
        if problem := routing_problem(routing, ("balanced", "uniform")):
            raise fail(problem)
        return routing

    @property
    def sampled(self) -> bool:
        """Whether each decode token's experts are drawn (``routing`` other than balanced)."""
        return self.routing != "balanced"

    @property
    def zipf_alpha(self) -> float | None:
        return zipf_of(self.routing)


class EconomicsSpec(Spec):
    """US dollars per system per hour (a cloud's rental, or a purchase written off over its hours), for
    ``usd_per_million_tokens``. A CS-3 is not publicly priced by the hour; $1,000,000 an hour is past any
    machine's."""

    price_per_system_hour: Annotated[float, Field(ge=0, le=1_000_000)]


def kv_block_problem(block: int, continuous: bool, kv_layout: str) -> str:
    """Why ``inference.scheduler.kv_block`` cannot page this run's cache (empty: it can). Blocks page
    the batching scheduler's cache: not ``batching: none``'s (one token at a time, each cache reserved
    whole), nor ``concat``'s (a block goes wherever the pool has room, as ``shift`` balances the cache;
    concat puts every decoded token on the grid's last row). With a draft or prefill
    wafers the target's decode cache is paged and theirs kept whole (docs/model.md §11.7)."""
    if not continuous:
        return (f"expected batching: auto or continuous with kv_block (blocks page the cache of batched "
                f"iterations; batching: none serves one token at a time, each cache reserved whole), got "
                f"batching: none with kv_block: {block}")
    if kv_layout == "concat":
        return (f"expected kv_layout: shift with kv_block (a block goes wherever the pool has room, the "
                f"cache balanced over the grid; concat appends every decoded token to the grid's last row), "
                f"got concat with kv_block: {block}")
    return ""


def check_experts_fit(model: ModelSpec, inference: Any) -> None:
    """MoE serving's keys against the model: no more expert grids than experts (as ``expert_grids: auto``
    tries: a grid beyond them would hold none),
    and on a dense model neither grids nor sampled routing (there are no experts: the keys would be
    ignored)."""
    grids = inference.moe.expert_grids
    if not model.experts:
        if grids not in (1, "auto"):
            raise fail(f"expected expert_grids: 1 or auto with a dense model ({model.name} has no experts to "
                       f"spread over grids), got {grids}", at="moe.expert_grids")
        if inference.moe.routing != "balanced":
            raise fail(f"expected routing: balanced with a dense model ({model.name} has no experts to "
                       f"route), got {shown_repr(inference.moe.routing)}", at="moe.routing")
    elif isinstance(grids, int) and grids > model.experts:
        raise fail(f"expected expert_grids at most the model's {model.experts:,} experts (a grid beyond them "
                   f"would hold none), got {grids:,}", at="moe.expert_grids")
