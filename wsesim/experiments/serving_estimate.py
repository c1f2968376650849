"""What serving one mapping costs, from its counts alone, so that serving that cannot finish here is
refused before its program is built (``wsesim infer``, ``--search``, each point of ``--vary`` and of a
serving sweep). The limits are training's (``machine.memory_limit``, ``WSESIM_MAX_MEMORY``;
``WSESIM_MAX_RUN_S``).

* Without batching (``batching: none``, §11.4): each stage runs an iteration per request's output token
  (its prompt, then each decode token), ``SERVE_ITERATION`` each.
* Continuous batching: each stage runs iterations, each holding at least one decode token or one prompt
  piece, so a stage runs at most (output tokens + prompt pieces)
  iterations, fewer the more requests share one (``SERVE_ITERATION`` each, an upper bound: the count the
  load sets lies between that and a full batch's); a chunked prompt's pieces (``inference.scheduler.prefill:
  chunked``, ⌈prompt / token_budget⌉ each) are costed at a new context each (``PIECE_SECONDS``).
* Each stage costs its decode attention anew per (batch, longest context) pair it meets
  (``CONTEXT_SECONDS``): a batch arriving together meets one a context of its longest output; a load at
  most batch × the contexts its requests span, and never more than its iterations.
* ``--trace``: every iteration's spans are built and written (``SPAN``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..model.load import Requests, requests_of
from ..model.serving import requests_fit
from ..sim.programs.builders.serving import default_token_budget
from ..sim.programs.mapping import Mapping
from .estimate import BASE_BYTES
from .machine import _size, about, refuse_work

if TYPE_CHECKING:
    from ..config.inference import InferenceExperimentSpec

# (seconds, bytes) per stage iteration under continuous batching: measured (2-core machine, load average
# 7) 10 µs, 190 B (LLaMA3-8B, 2 CS-3 stages, 8,192 Poisson requests at 2/s: 1.65 M iterations, 18.7 s of
# CPU, 0.38 GB) and 15 µs, 250 B (LLaMA-3.1-70B, 7 stages: 1.89 M iterations, 32.8 s, 0.53 GB); since the
# log's rows went from 88 to 60 bytes and its columns became views, 12 µs and 141 B (LLaMA3-8B on one
# CS-3, a 100,000-request trace at 4/s: 5.11 M iterations, 62-64 s of CPU, 0.93 GB; it was 14-15 µs, 285 B)
SERVE_ITERATION = {"fast": (15e-6, 150.0), "reference": (60e-6, 1040.0)}
# seconds per (stage × chunked prompt piece): each piece's pass is costed at a new context (measured 1.1 ms
# at token_budget 1 and 2 ms at 16, LLaMA 3.2 1B on a CS-3 with a 20,000-token prompt)
PIECE_SECONDS = 2e-3
# seconds per (stage × (batch, context) pair) whose decode attention is costed anew (measured 0.32 ms: 16
# requests together, 10,000 output tokens, LLaMA3-8B on 2 WSE-2 stages: 40,004 iterations in 12.7 s)
CONTEXT_SECONDS = 3e-4
# (seconds, bytes) per stage iteration with --trace: its spans built and written (LLaMA3-8B, 2,048
# Poisson requests: ~9 s of CPU and 0.8 GB more for a 154 MB trace)
SPAN = (22e-6, 2000.0)
# seconds per (decode token, expert, MoE layer) key of sampled routing's Gumbel draw (inference.moe.routing
# uniform or zipf): measured 42 ns (DeepSeek-V3's 256 experts, 20,000 tokens, 2-core machine under load)
ROUTING_DRAW_S = 45e-9


@dataclass(frozen=True)
class ServingEstimate:
    """What serving one mapping costs: its stage visits (stages × requests × output tokens; under
    continuous batching, at most stages × (output tokens + prompt pieces) stage iterations)."""

    stages: int
    batch: int
    output_len: int
    engine: str
    runs: int = 1  # candidates of a search, each on its own mapping (``visits`` their sum)
    visits: int = 0
    draws: int = 0  # sampled routing's keys: decode tokens × experts × MoE layers (0: balanced)
    # how the requests come (inference.load.arrival): "together", a batch of ``batch``; "poisson" or "trace",
    # ``batch`` requests of ``output_len`` tokens (their mean) under continuous batching
    arrival: str = "together"
    continuous: bool = False  # ``visits`` counts stage iterations (at most), not token visits
    pieces: int = 0  # stages × chunked prompt pieces, each costed at its own context
    held: int = 0  # the largest run's visits (its trace is what is held at once); 0: ``visits``
    contexts: int = 0  # stages × (batch, context) pairs whose attention is costed anew
    spans: bool = False  # --trace: every iteration's spans built and written

    @property
    def seconds(self) -> float:
        return (self._per_visit(0) * self.visits + PIECE_SECONDS * self.pieces
                + CONTEXT_SECONDS * self.contexts + ROUTING_DRAW_S * self.draws)

    @property
    def bytes(self) -> float:  # the largest run's trace: runs are one after another
        return BASE_BYTES + self._per_visit(1) * (self.held or self.visits)

    def _per_visit(self, i: int) -> float:
        """A stage iteration's seconds (``i`` 0) or bytes (1) on its engine, its spans' with --trace."""
        per = SERVE_ITERATION.get(self.engine, SERVE_ITERATION["reference"])[i]
        return per + (SPAN[i] if self.spans else 0.0)


def serving_estimate(spec: InferenceExperimentSpec, mapping: Mapping, *,
                     spans: bool = False) -> ServingEstimate:
    """The work of serving ``spec`` on ``mapping`` (its stages) by the executor it names, from the counts
    alone (see the module docstring); ``spans``: with a ``--trace`` written."""
    i, m, S, engine = spec.inference, spec.model, len(mapping.stages), spec.simulation.engine
    moe = m.experts * (m.layers - m.dense_layer_count) if i.moe.sampled and m.experts else 0
    load = _served(spec, mapping, requests_of(spec))
    draws = int(load.output.sum() - len(load)) * moe  # a key per decode token, expert and MoE layer
    mean = max(1, round(float(load.output.mean())) if len(load) else 0)  # the output_len a refusal names
    if not i.scheduler.continuous:  # an iteration per stage for each request's prompt and each decode token
        return ServingEstimate(S, len(load), mean, engine, visits=S * int(load.output.sum()),
                               arrival=i.load.arrival, draws=draws, spans=spans)
    given = i.scheduler.token_budget
    budget = default_token_budget(spec, mapping.grid[0]) if given == "auto" else int(given)
    if i.scheduler.prefill == "chunked":  # each prompt in pieces of at most the budget, each at a new context
        pieces = int(np.sum(-(-load.prompt.astype(np.int64) // budget)))
        new_contexts = pieces
    else:  # whole prompts, one pass each at most; a pass costed anew per prompt length
        pieces, new_contexts = len(load), len(np.unique(load.prompt))
    tokens = int(load.output.sum())
    if not len(load):
        tokens = contexts = 0
    elif i.load.arrival == "together":  # all decode at once: a stage's iterations, the longest output's
        tokens = int(load.output.max())
        contexts = tokens + len(np.unique(load.output))  # the batch shrinks as each output length ends
    else:  # a pair per iteration at most, and at most batch × the contexts the requests span
        span = int((load.prompt + load.output).max() - load.prompt.min())
        contexts = min(tokens + pieces, int(i.scheduler.batch) * span)
    return ServingEstimate(S, len(load), mean, engine, visits=S * (tokens + pieces), arrival=i.load.arrival,
                           draws=draws, continuous=True, pieces=S * new_contexts, spans=spans,
                           contexts=S * contexts)


def _served(spec: InferenceExperimentSpec, mapping: Mapping, load: Requests) -> Requests:
    """The requests whose KV cache fits every stage alone: the others are refused at admission and never
    served (``ServeBatches.fits_alone``), so cost nothing (a trace's one 10^7-token output is not a run)."""
    pairs, inverse = np.unique(np.stack([load.prompt, load.output], axis=1), axis=0, return_inverse=True)
    fits = np.array([all(requests_fit(spec.model, st.memory, len(st.layers), st.rows, st.cols,
                                      spec.inference.kv_layout, 1, int(p), int(o), int(p))
                         for st in mapping.stages) for p, o in pairs], dtype=bool)
    keep = fits[np.asarray(inverse).reshape(-1)]
    return load if keep.all() else Requests(load.arrival[keep], load.prompt[keep], load.output[keep])


def check_serving(e: ServingEstimate, *, what: str = "this serving run") -> None:
    """Raise the one-line ``ConfigError`` when ``e`` cannot finish on this machine
    (``machine.refuse_work``): the estimate, its counts, the limit, and what would fit (``_advice``)."""
    refuse_work(what, e.seconds, e.bytes, lambda: _describe(e), lambda _, fraction: _advice(e, fraction))


def _describe(e: ServingEstimate) -> str:
    """The estimate's seconds and bytes and the counts they follow."""
    counts = " × ".join(f"{n:,} {what}{'s' if n != 1 else ''}" for n, what in (
        (e.stages, "stage"), (e.batch, "request"), (e.output_len, "output token")))
    unit = "stage iterations at most" if e.continuous else "stage iterations"
    counts = (f"{e.visits:,} {unit} over {e.runs} candidate mappings, the largest {counts}"
              if e.runs > 1 else f"{counts} = {e.visits:,} {unit}")
    if e.pieces and e.runs == 1:
        counts += f", {e.pieces:,} prompt passes and {e.contexts:,} decode contexts costed"
    if e.spans:
        counts += ", with --trace"
    return f"{about(e.seconds)} and {_size(e.bytes)} ({counts}, on the {e.engine} engine)"


def _advice(e: ServingEstimate, fraction: float) -> str:
    """The override that scales the stage visits down by ``fraction`` (with a margin), in the mode's
    terms: a batch arriving together is batch × output_len tokens; a load under continuous batching is
    its requests' tokens, so fewer requests (a trace's first rows) or, for a synthetic load, shorter
    outputs (a smaller batch only caps how many are in flight: the same tokens are served)."""
    if PIECE_SECONDS * e.pieces > e.seconds / 2:  # mostly chunked prompt pieces, each costed anew
        return ("use a larger inference.scheduler.token_budget (fewer, longer prompt pieces) or "
                "inference.scheduler.prefill: prefill_first (whole prompts)")
    if e.arrival == "together":
        fit = max(1, int(e.output_len * fraction * 0.95))
        return (f"--set inference.load.output_len={fit} would fit (now {e.output_len:,}), or a smaller "
                "inference.scheduler.batch")
    fit = max(1, int(e.batch * fraction * 0.95))
    if e.arrival == "trace":
        return (f"--set inference.load.requests={fit} (the trace's first {fit:,} rows) would fit "
                f"(now {e.batch:,})")
    return (f"--set inference.load.requests={fit} would fit (now {e.batch:,}), or a shorter "
            "inference.load.output_len")


__all__ = ["CONTEXT_SECONDS", "ROUTING_DRAW_S", "SERVE_ITERATION", "ServingEstimate",
           "check_serving", "serving_estimate"]
