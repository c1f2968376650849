"""The parts of a serving experiment's spec (``config.inference``) that stand alone: the bounds of its
counts and quantities, its latency targets (``SloSpec``) and its speculative draft (``SpeculativeSpec``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .base import Spec
from .fields import count, quantity
from .specs import ModelSpec

__all__ = ["Acceptance", "DraftTokens", "ExpertGrids", "Rate", "Requests", "Sigma", "SloSpec",
           "SpeculativeSpec", "StageLayers", "Systems", "Target", "Tokens"]

# Serving contexts reach 128K-1M tokens; 2^24 is past any of them. Batches of thousands of requests.
Tokens = count(16_777_216)
Requests = count(65_536)
Systems = count(65_536)
StageLayers = count(16_384)
ExpertGrids = count(4_096)  # grids one MoE layer's experts spread over
# a wafer serves a request in milliseconds: 10^6 requests/s is past any load one could offer it
Rate = Annotated[float, Field(gt=0, le=1e6)]
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
