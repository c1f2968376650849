"""Each request of a serving run, from its trace (docs/model.md §11.7): when it arrived, was admitted,
started, gave its first token, each output after it and its last (``RequestTimes``, the rows of
``requests.csv``), and the figures over requests that ``analysis.serving`` puts in a run's result: the
medians and 99th percentiles of TTFT and TPOT, the inter-token latency over every gap between two outputs
of a request, each request's end to end, queueing, batch sizes and goodput (``load_figures``)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..sim.programs.plan import Trace
from ..sim.programs.program import Program, ServeBatches

if TYPE_CHECKING:
    from ..config.inference import InferenceExperimentSpec

__all__ = ["REQUEST_COLUMNS", "RequestTimes", "load_figures", "nan_mean", "percentile", "request_times",
           "requests_csv", "spread"]


@dataclass(frozen=True, eq=False)
class RequestTimes:
    """Each request's cycles from cycle 0 (NaN where it never happened: a refused request has no
    admission, first token or finish) at ``clock`` Hz; as seconds (a one-token output has no TPOT):
    ``queueing`` from arrival to the first stage starting its prompt, ``ttft`` from arrival to its first
    token, ``tpot`` (finish − first token) / (output − 1), ``end_to_end`` from arrival to finish; ``itl``
    the gaps between consecutive outputs of each request, pooled. Each difference is taken in cycles,
    then divided by the clock. ``emitted`` holds every output's cycle, request by request, ``outputs[r]``
    of request r's (its tokens; with speculative decoding its verify passes after the first token)."""

    cycles: dict[str, np.ndarray]  # arrival, admitted, started, first, finished
    prompt: np.ndarray
    output: np.ndarray
    refused: np.ndarray
    clock: float
    emitted: np.ndarray
    outputs: np.ndarray

    def seconds(self, name: str) -> np.ndarray:
        return self.cycles[name] / self.clock

    def after(self, warmup: int) -> RequestTimes:
        """The requests after the first ``warmup`` (``inference.load.warmup``: left out of the figures)."""
        if not warmup:
            return self
        first = int(self.outputs[:warmup].sum())
        return RequestTimes({k: v[warmup:] for k, v in self.cycles.items()}, self.prompt[warmup:],
                            self.output[warmup:], self.refused[warmup:], self.clock, self.emitted[first:],
                            self.outputs[warmup:])

    @property
    def arrival(self) -> np.ndarray:
        return self.seconds("arrival")

    @property
    def finished(self) -> np.ndarray:
        return self.seconds("finished")

    @property
    def queueing(self) -> np.ndarray:
        return (self.cycles["started"] - self.cycles["arrival"]) / self.clock

    @property
    def ttft(self) -> np.ndarray:
        return (self.cycles["first"] - self.cycles["arrival"]) / self.clock

    @property
    def tpot(self) -> np.ndarray:
        c = self.cycles
        with np.errstate(invalid="ignore", divide="ignore"):
            per_token = np.where(self.output > 1, (c["finished"] - c["first"]) / (self.output - 1), np.nan)
        return per_token / self.clock

    @property
    def end_to_end(self) -> np.ndarray:
        return (self.cycles["finished"] - self.cycles["arrival"]) / self.clock

    @property
    def itl(self) -> np.ndarray:
        """Every gap between two consecutive outputs of a request, request by request (a refused one has
        none), in seconds."""
        gaps = np.diff(self.emitted)
        gaps[np.cumsum(self.outputs, dtype=np.int64)[:-1] - 1] = np.nan  # one's last to the next's first
        gaps = gaps[~np.isnan(gaps)]
        gaps /= self.clock
        return gaps


def request_times(spec: InferenceExperimentSpec, program: Program, trace: Trace) -> RequestTimes:
    """The requests' times of a run, from its ``BatchLog``."""
    op = program.body[0]
    b = trace.batches
    assert isinstance(op, ServeBatches) and b is not None, "a serving run's trace has its batch log"
    return RequestTimes({"arrival": op.arrival, "admitted": b.admitted, "started": b.started,
                         "first": b.first, "finished": b.finished}, op.prompt, op.output, b.refused,
                        spec.hardware.clock_hz, b.emitted, op.outputs())


REQUEST_COLUMNS = ("request", "status", "arrival_s", "prompt_len", "output_len", "admitted_s",
                   "first_token_s", "finish_s", "queueing_s", "ttft_s", "tpot_s", "end_to_end_s")
"""The columns of ``requests.csv``, one row per request in arrival order."""


def requests_csv(t: RequestTimes) -> str:
    """``requests.csv``'s text: each request's times in seconds (``repr``: exact), empty where none."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(REQUEST_COLUMNS)
    cols = (t.arrival, t.seconds("admitted"), t.seconds("first"), t.finished, t.queueing, t.ttft, t.tpot,
            t.end_to_end)
    for r in range(len(t.prompt)):
        times = ["" if np.isnan(c[r]) else repr(float(c[r])) for c in cols]
        w.writerow([r, "refused" if t.refused[r] else "served", times[0], int(t.prompt[r]), int(t.output[r]),
                    *times[1:]])
    return out.getvalue()


def percentile(x: np.ndarray, q: float) -> float:
    """The ``q``-th percentile of ``x``'s numbers (NaN left out), 0 when there are none."""
    x = x[~np.isnan(x)]
    return float(np.percentile(x, q)) if x.size else 0.0


def spread(x: np.ndarray) -> tuple[float, float, float]:
    """Mean, median and 99th percentile of ``x`` (no NaN in it), each 0 when it is empty: as ``nan_mean`` and
    ``percentile`` give them, without their copies of a large array."""
    if not x.size:
        return 0.0, 0.0, 0.0
    p50, p99 = np.percentile(x, (50, 99))
    return float(x.mean()), float(p50), float(p99)


def nan_mean(x: np.ndarray) -> float:
    """The mean of ``x``'s numbers (NaN left out), 0 when there are none."""
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else 0.0


def load_figures(spec: InferenceExperimentSpec, t: RequestTimes, trace: Trace) -> dict[str, Any]:
    """The latency percentiles, queueing, batch sizes and goodput of a run's requests."""
    inf = spec.inference
    served = ~t.refused
    window = (float(np.nanmax(t.finished)) - float(t.arrival[served].min())) if served.any() else 0.0
    tpot, ttft, end = t.tpot, t.ttft, t.end_to_end
    itl = dict(zip(("itl_s", "itl_p50_s", "itl_p99_s"), spread(t.itl), strict=True))
    e2e = dict(zip(("e2e_mean_s", "e2e_p50_s", "e2e_p99_s"), spread(end[~np.isnan(end)]), strict=True))
    figures: dict[str, Any] = {
        "requests": len(t.prompt), "refused": int(t.refused.sum()),
        "ttft_p50_s": percentile(ttft, 50), "ttft_p99_s": percentile(ttft, 99),
        "tpot_p50_s": percentile(tpot, 50), "tpot_p99_s": percentile(tpot, 99), **itl, **e2e,
        "queueing_s": nan_mean(t.queueing)}
    b = trace.batches
    if b is not None:
        decoding = b.decodes[b.decodes > 0]
        figures["mean_batch"] = float(decoding.mean()) if decoding.size else 0.0
        events = np.concatenate([t.cycles["admitted"][served], t.cycles["finished"][served]])
        steps = np.concatenate([np.ones(int(served.sum())), -np.ones(int(served.sum()))])
        order = np.lexsort((steps, events))  # a leave before an entry in the same cycle
        figures["largest_batch"] = int(np.cumsum(steps[order]).max()) if served.any() else 0
    else:
        figures["mean_batch"], figures["largest_batch"] = 1.0, len(t.prompt)
    if inf.slo is not None:  # without targets the three stay None: n/a, not 0
        # over every request: a refused one meets no target (it never gets a first token)
        met = served & (ttft <= inf.slo.ttft_s) & ((t.output == 1) | (tpot <= inf.slo.tpot_s))
        figures.update(slo_attainment=float(met.sum() / max(len(t.prompt), 1)),
                       goodput_requests_per_s=float(met.sum()) / window if window else 0.0,
                       goodput_tokens_per_s=float(t.output[met].sum()) / window if window else 0.0)
    return figures
