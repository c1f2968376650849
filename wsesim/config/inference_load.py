"""A serving experiment's load and scheduler (``inference.load``, ``inference.scheduler``; docs/model.md
§11.7), and where each key of the old flat ``inference:`` section lives now (``MOVED``).

The load is one spec per way requests arrive, chosen by ``arrival``: ``together`` (all at cycle 0),
``poisson`` (``rate`` per second) or ``trace`` (the rows of a CSV ``file``). Each accepts only the keys it
reads, so a key of another arrival cannot be written (``rate`` with ``together`` is refused as unknown
there, naming the arrival it belongs to)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from .base import Spec, fail
from .fields import count
from .inference_parts import Rate, Requests, Sigma, Tokens
from .specs import Seed

__all__ = ["GROUPS", "MOVED", "Load", "LognormalLengths", "PoissonLoad", "SchedulerSpec", "TogetherLoad",
           "TraceLoad", "moved_key"]


class LognormalLengths(Spec):
    """Lognormal lengths: round(median · e^(σ·z)), the medians ``prompt_len`` and ``output_len``."""

    lognormal: Sigma  # σ of ln(length)


class _Load(Spec):
    """What every arrival shares. ``prompt_len`` and ``output_len`` are each request's lengths (the medians
    with lognormal lengths); with a trace, whose rows give each request's own, they are the lengths the
    mapping sizes each request's KV cache for. ``seed`` seeds the synthetic load (arrival times, lengths)
    and sampled routing; ``warmup`` is how many first requests every figure over requests leaves out."""

    prompt_len: Tokens = 4096
    output_len: Tokens = 128
    seed: Seed = 0
    warmup: count(65_535, 0) = 0


class _Synthetic(_Load):
    """A load whose lengths wsesim draws: ``fixed`` (prompt_len and output_len each), ``lognormal`` (σ 1:
    a tenth of the prompts over 3.6× the median, as the Azure 2023 traces' lengths spread) or
    ``{lognormal: σ}``."""

    lengths: Literal["fixed", "lognormal"] | LognormalLengths = "fixed"

    @property
    def lognormal(self) -> bool:
        return self.lengths != "fixed"

    @property
    def sigma(self) -> float:
        """Lognormal lengths' σ of ln (1 unless written)."""
        return self.lengths.lognormal if isinstance(self.lengths, LognormalLengths) else 1.0


class TogetherLoad(_Synthetic):
    """``requests`` at cycle 0 (default: the scheduler's ``batch``, one full batch)."""

    arrival: Literal["together"] = "together"
    requests: Requests | None = None


class PoissonLoad(_Synthetic):
    """``requests`` at ``rate`` per second: exponential gaps of mean 1/rate."""

    arrival: Literal["poisson"]
    rate: Rate
    requests: Requests


class TraceLoad(_Load):
    """The rows of a CSV ``file`` (``config.request_trace``; a relative path is the experiment file's
    folder's), or its first ``requests``."""

    arrival: Literal["trace"]
    file: str
    requests: Requests | None = None


Load = Annotated[TogetherLoad | PoissonLoad | TraceLoad, Field(discriminator="arrival")]


class SchedulerSpec(Spec):
    """How a stage's iterations take work (docs/model.md §11.7). ``batch``: requests in flight at most
    (admission's cap, and the number each stage's KV cache is sized for). ``batching``: continuous (auto)
    queues every decode token and takes prompts by ``prefill``; none takes one decode token or one whole
    prompt at a time, first come first served. ``token_budget``: tokens one iteration takes at most (auto:
    enough to fill the grid's rows). ``kv_block``: the KV cache in blocks of this many tokens (vLLM's
    PagedAttention), the latest-arrived request preempted when none is free, its cache then dropped and
    recomputed or swapped out (``preemption``); none: each request's cache reserved whole."""

    batch: Requests = 1
    batching: Literal["auto", "none", "continuous"] = "auto"
    prefill: Literal["prefill_first", "chunked"] = "prefill_first"
    token_budget: Tokens | Literal["auto"] = "auto"
    kv_block: Tokens | None = None
    preemption: Literal["recompute", "swap"] | None = Field(None, validate_default=True)

    @field_validator("preemption")
    @classmethod
    def _preemption(cls, preemption: str | None, info: Any) -> str | None:
        if preemption is not None and info.data.get("kv_block") is None:
            raise fail(f"expected no preemption without kv_block (a cache reserved whole is never "
                       f"preempted), got {preemption}")
        return preemption

    @property
    def continuous(self) -> bool:
        """Whether iterations batch (auto and continuous do; one request alone is a batch of one)."""
        return self.batching != "none"

    @property
    def preempt_by(self) -> str:
        """What a preempted request's cache becomes (recompute unless ``preemption`` says swap)."""
        return self.preemption or "recompute"


MOVED = {
    "prompt_len": "load.prompt_len", "output_len": "load.output_len", "arrival": "load.arrival",
    "rate": "load.rate", "trace": "load.file", "requests": "load.requests", "lengths": "load.lengths",
    "length_sigma": "load.lengths", "seed": "load.seed", "warmup": "load.warmup",
    "batch": "scheduler.batch", "batching": "scheduler.batching", "prefill": "scheduler.prefill",
    "token_budget": "scheduler.token_budget", "chunk": "scheduler.token_budget",
    "kv_block": "scheduler.kv_block", "preemption": "scheduler.preemption",
    "prefill_systems": "disaggregation.prefill_systems", "routing": "moe.routing",
    "expert_grids": "moe.expert_grids", "price_per_system_hour": "economics.price_per_system_hour",
}
"""Each key of the old flat ``inference:`` section, by its new home under ``inference.``."""

GROUPS = ("load", "scheduler", "disaggregation", "moe", "economics")
"""The groups the flat keys moved into: a figure or a label names a key of one by its own name."""

_HOW = {"trace": " (with arrival: trace)", "length_sigma": " (lengths: {lognormal: σ})"}


def moved_key(key: str) -> str:
    """The one line refusing the old flat key ``inference.<key>``: where it lives now."""
    return f"moved to inference.{MOVED[key]}{_HOW.get(key, '')} (docs/model.md §11.7)"
