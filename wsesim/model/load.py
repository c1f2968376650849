"""A serving run's requests (docs/model.md §11.7): when each arrives, its prompt's length and its
output's, from the experiment's ``inference`` keys.

* ``together`` — ``requests`` (default ``batch``) at cycle 0;
* ``poisson`` — ``requests`` at ``rate`` per second: exponential gaps of mean 1/rate, each arrival
  rounded to a whole clock cycle (the simulator's unit of time);
* ``trace`` — the rows of a CSV file (``config.request_trace``), the arrivals rounded to cycles too.

Synthetic lengths (together, poisson) are ``fixed`` (prompt_len and output_len each) or ``lognormal``:
round(median · e^(σ·z)) for z standard normal, at least 1 token, the medians prompt_len and output_len
and σ ``length_sigma`` (default 1: a long tail, a tenth of the prompts over 3.6× the median, as the
Azure 2023 traces' lengths are spread). Every draw comes from one numpy Generator seeded with
``inference.load.seed``: the same keys give the same requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..config.request_trace import MAX_TOKENS, read_request_trace

if TYPE_CHECKING:
    from ..config.inference import InferenceExperimentSpec

__all__ = ["Requests", "requests_of"]


@dataclass(frozen=True, eq=False)
class Requests:
    """The requests of a run, in arrival order: ``arrival`` (cycles, whole), ``prompt`` and ``output``
    (tokens, at least 1 each)."""

    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival)


def _lengths(rng: np.random.Generator, median: int, sigma: float, n: int, lognormal: bool) -> np.ndarray:
    if not lognormal:
        return np.full(n, median, dtype=np.int64)
    drawn = np.rint(median * np.exp(sigma * rng.standard_normal(n)))
    return np.clip(drawn, 1, MAX_TOKENS).astype(np.int64)


def requests_of(spec: InferenceExperimentSpec) -> Requests:
    """The run's requests (see the module's docstring)."""
    inf, clock = spec.inference, spec.hardware.clock_hz
    if inf.load.arrival == "trace":
        assert inf.load.file is not None
        seconds, prompt, output = read_request_trace(inf.load.file)
        n = min(len(seconds), inf.load.requests or len(seconds))  # requests: the trace's first rows
        return Requests(np.rint(seconds[:n] * clock), prompt[:n].copy(), output[:n].copy())
    n = inf.request_count
    rng = np.random.default_rng(inf.load.seed)
    if inf.load.arrival == "poisson":
        assert inf.load.rate is not None
        arrival = np.rint(np.cumsum(rng.exponential(clock / inf.load.rate, n)))
    else:
        arrival = np.zeros(n)
    lognormal = inf.load.lognormal
    return Requests(arrival, _lengths(rng, inf.load.prompt_len, inf.load.sigma, n, lognormal),
                    _lengths(rng, inf.load.output_len, inf.load.sigma, n, lognormal))
