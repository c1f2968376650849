"""What serving one mapping costs, from its counts alone, so that serving that cannot finish here is
refused before its program is built (``wsesim infer``, ``--search``, each point of ``--vary`` and of a
serving sweep): the engine visits each stage once per request and output token, and keeps each visit in
its trace. The limits are training's (``estimate.machine_memory``, ``WSESIM_MAX_RUN_S``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config.errors import ConfigError
from .estimate import BASE_BYTES, MEMORY_FRACTION
from .machine import _duration, _size, machine_memory, max_run_seconds

# (seconds, bytes) per stage visit of a served request's token (stages × requests × output tokens): fast
# measured 7 µs, 370 B (Qwen3-235B-A22B, batch 64, 2,000 output tokens on 32 stages: 4.1 M visits, 28 s,
# 1.5 GB); the reference executor visits each about 4 times (128,019 visits for fast's 32,000)
SERVE_VISIT = {"fast": (7.5e-6, 400.0), "reference": (30e-6, 1600.0)}
# seconds per (decode token, expert, MoE layer) key of sampled routing's Gumbel draw (inference.routing
# uniform or zipf): measured 42 ns (DeepSeek-V3's 256 experts, 20,000 tokens, 2-core machine under load)
ROUTING_DRAW_S = 45e-9


@dataclass(frozen=True)
class ServingEstimate:
    """What serving one mapping costs: its stage visits (stages × requests × output tokens)."""

    stages: int
    batch: int
    output_len: int
    engine: str
    runs: int = 1  # candidates of a search, each on its own mapping (``visits`` their sum)
    visits: int = 0
    draws: int = 0  # sampled routing's keys: decode tokens × experts × MoE layers (0: balanced)
    # how the requests come (inference.arrival): "together", a batch of ``batch``; "poisson" or "trace",
    # ``batch`` requests of ``output_len`` tokens (their mean) under continuous batching
    arrival: str = "together"

    @property
    def seconds(self) -> float:
        visit = SERVE_VISIT.get(self.engine, SERVE_VISIT["reference"])[0]
        return visit * self.visits + ROUTING_DRAW_S * self.draws

    @property
    def bytes(self) -> float:  # the largest run's trace: runs are one after another
        per = SERVE_VISIT.get(self.engine, SERVE_VISIT["reference"])[1]
        return BASE_BYTES + per * self.stages * self.batch * self.output_len


def estimate_serving(stages: int, batch: int, output_len: int, engine: str = "fast",
                     visits: int | None = None, runs: int = 1, draws: int = 0,
                     arrival: str = "together") -> ServingEstimate:
    """The cost of serving ``batch`` requests of ``output_len`` tokens through ``stages`` stages (of
    ``runs`` candidates with ``visits`` stage visits in all, when a search tries several), with
    ``draws`` keys of sampled routing; ``arrival`` as ``ServingEstimate`` says."""
    own = stages * batch * output_len
    return ServingEstimate(stages, batch, output_len, engine, runs, own if visits is None else visits, draws,
                           arrival)


def check_serving(e: ServingEstimate, *, what: str = "this serving run") -> None:
    """Raise the one-line ``ConfigError`` when ``e`` cannot finish on this machine: the estimate, its
    counts, the limit, and what would fit (``_advice``)."""
    memory, limit_s = machine_memory(), max_run_seconds()
    too_big, too_long = e.bytes > MEMORY_FRACTION * memory, e.seconds > limit_s
    if not (too_big or too_long):
        return
    why = (f"needs more memory than this machine has ({_size(memory)})" if too_big
           else f"would run longer than {_duration(limit_s)} (WSESIM_MAX_RUN_S)")
    fraction = min(limit_s / e.seconds if too_long else 1.0,
                   MEMORY_FRACTION * memory / e.bytes if too_big else 1.0)
    took = _duration(e.seconds)
    took = took if took.startswith("under") else f"about {took}"
    counts = " × ".join(f"{n:,} {what}{'s' if n != 1 else ''}" for n, what in (
        (e.stages, "stage"), (e.batch, "request"), (e.output_len, "output token")))
    counts = (f"{e.visits:,} stage visits over {e.runs} candidate mappings, the largest {counts}"
              if e.runs > 1 else f"{counts} = {e.visits:,} stage visits")
    raise ConfigError(f"{what} cannot finish here: it {why}: {took} and {_size(e.bytes)} ({counts}, on the "
                      f"{e.engine} engine); {_advice(e, fraction)}")


def _advice(e: ServingEstimate, fraction: float) -> str:
    """The override that scales the stage visits down by ``fraction`` (with a margin), in the mode's
    terms: a batch arriving together is batch × output_len tokens; a load under continuous batching is
    its requests' tokens, so fewer requests (a trace's first rows) or, for a synthetic load, shorter
    outputs (a smaller batch only caps how many are in flight: the same tokens are served)."""
    if e.arrival == "together":
        fit = max(1, int(e.output_len * fraction * 0.95))
        return (f"--set inference.output_len={fit} would fit (now {e.output_len:,}), or a smaller "
                "inference.batch")
    fit = max(1, int(e.batch * fraction * 0.95))
    if e.arrival == "trace":
        return f"--set inference.requests={fit} (the trace's first {fit:,} rows) would fit (now {e.batch:,})"
    return f"--set inference.requests={fit} would fit (now {e.batch:,}), or a shorter inference.output_len"


__all__ = ["ROUTING_DRAW_S", "SERVE_VISIT", "ServingEstimate", "check_serving", "estimate_serving"]
