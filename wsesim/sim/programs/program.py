"""A workload as data: the ordered ops of a program, which both executors run (docs/architecture.md).

A builder (``builders.training`` for a training step, ``builders.serving`` for serving requests) writes
the order of work once, as shapes: what each op computes, moves or waits for, never what it costs. The
cost pass (``costing.cost_program``) turns shapes into cycles under the run's compute model; the fast
engine (``engine.py``) and the plain-SimPy reference (``reference.py``) then execute the same program
with their own mechanism.

An op is one of a small tagged union of records, each carrying what its handler needs and no more; its
``kind`` (an ``OpKind``) picks the handler in each executor's table:

* ``Weights`` — wait for the streamed weights of one chunk key;
* ``WaferOp`` — arithmetic on the whole wafer (attention per tile, router, a dense FFN, the LM head, the
  in-place copies), as FLOPs, weight bytes and GEMM shapes;
* ``Transfer`` — a layer's routed tokens over the fabric to the experts or back;
* ``Experts`` — a layer's experts under the MoE mapping;
* ``GradientOut`` — a weight gradient handed to the outbound link;
* ``Drain`` — the end of the step: the last gradient out, or its sum through a cluster's tree;
* ``OptimizerStep`` — MemoryX's update of every weight;
* ``ServeBatches`` — requests through a pipeline of stages (``StageWork``: each stage's ``Kernel`` ops
  for a prefill and for one decode step, and its ``Handoff`` to the next stage), arriving over time or
  together, each stage running the iterations the scheduler forms (``sim.executors.scheduler``, docs/model.md
  §11.7): each an ``Iteration`` of its kernels at the iteration's sizes, and the ``Move`` after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from ...model.serving import kv_bytes_per_token, requests_fit
from ...model.shapes import Matmul
from ...model.speculative import expected_tokens, outputs
from ...model.vocabulary import Copy, Gradient, OpKind, Pass, StageOpKind

if TYPE_CHECKING:
    from ...config.specs import ModelSpec
    from .chunks import ChunkPlan
    from .mapping import Stage

__all__ = ["WAFER_OPS", "Drain", "Experts", "GradientOut", "Handoff", "Iteration", "Kernel", "Move",
           "Op", "OptimizerStep", "PerToken", "Program", "ServeBatches", "StageWork", "Transfer",
           "WaferOp", "Weights"]

ChunkKey = tuple[Any, ...]  # (copy, layer, tensor) or (tensor,): a key of the chunk plan

WAFER_OPS = frozenset({OpKind.ATTENTION, OpKind.ROUTER, OpKind.FFN, OpKind.LM_HEAD, OpKind.EXPAND,
                       OpKind.WEIGHTED_SUM})
"""Op kinds that run on the whole wafer as one timed op (per tile when ``WaferOp.tiles``)."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _args() -> Mapping[str, Any]:
    return _EMPTY


# Ops compare by identity (eq=False): the cost pass keys each op's cost by the op itself.
@dataclass(frozen=True, slots=True, eq=False)
class Weights:
    """Wait for the weights of chunk key ``key`` (a stall of the step while they come)."""

    kind: ClassVar[OpKind] = OpKind.WEIGHTS
    key: ChunkKey
    args: Mapping[str, Any] = field(default_factory=_args)


@dataclass(frozen=True, slots=True, eq=False)
class WaferOp:
    """``flops`` of arithmetic on the whole wafer feeding ``weight_bytes`` of weights, once, or ``tiles``
    times back to back (one span each). ``matmuls`` are its GEMMs (M, K, N), the same FLOPs as shapes;
    ``useful`` is False for datapath work that is no arithmetic (copies: timed, not counted as FLOPs)."""

    kind: OpKind
    pass_: Pass
    layer: int | None
    flops: float
    weight_bytes: float = 0.0
    matmuls: tuple[Matmul, ...] = ()
    tiles: int = 0
    useful: bool = True
    args: Mapping[str, Any] = field(default_factory=_args)

    @property
    def runs(self) -> int:
        """How many times the op runs back to back (its tiles, or once)."""
        return self.tiles or 1

    @property
    def executed_flops(self) -> float:
        """Arithmetic the op executes in all (0 for copies)."""
        return self.runs * self.flops if self.useful else 0.0


@dataclass(frozen=True, slots=True, eq=False)
class Transfer:
    """A layer's routed tokens over the fabric (``kind`` DISPATCH or COMBINE), ``nbytes`` in all;
    ``reverse``: from the experts back to the tokens."""

    kind: OpKind
    layer: int
    reverse: bool
    nbytes: float
    args: Mapping[str, Any] = field(default_factory=_args)


@dataclass(frozen=True, slots=True, eq=False)
class Experts:
    """A layer's experts under the MoE mapping, reading weight copy ``copy``; ``flops`` is the phase's
    arithmetic, summed over its experts."""

    kind: ClassVar[OpKind] = OpKind.EXPERTS
    pass_: Pass
    layer: int
    copy: Copy
    backward: bool
    flops: float
    args: Mapping[str, Any] = field(default_factory=_args)

    @property
    def executed_flops(self) -> float:
        return self.flops


@dataclass(frozen=True, slots=True, eq=False)
class GradientOut:
    """Hand ``nbytes`` of ``gradient`` to the outbound link."""

    kind: ClassVar[OpKind] = OpKind.GRADIENT
    gradient: Gradient
    nbytes: float
    args: Mapping[str, Any] = field(default_factory=_args)


@dataclass(frozen=True, slots=True, eq=False)
class Drain:
    """The step's end (``kind`` GRADIENT_DRAIN: the last gradient has left; REDUCE_DRAIN: its sum has
    come through a cluster's reduce tree)."""

    kind: OpKind
    args: Mapping[str, Any] = field(default_factory=_args)


@dataclass(frozen=True, slots=True, eq=False)
class OptimizerStep:
    """MemoryX updates every weight of the model before the next step's weights can stream."""

    kind: ClassVar[OpKind] = OpKind.OPTIMIZER_STEP
    args: Mapping[str, Any] = field(default_factory=_args)


@dataclass(frozen=True, slots=True)
class PerToken:
    """A size that grows with a decode step's context: ``scale`` values per token of context."""

    scale: int

    def at(self, context: int) -> int:
        return self.scale * context


Size = int | PerToken


@dataclass(frozen=True, slots=True, eq=False)
class Kernel:
    """One kernel of a stage's work, as shapes on the stage's grid (or on ``region``, an expert's
    rectangle of it). ``dims`` by kind: GEMM (M, K, N); GEMV (K, N); ALLREDUCE (values per row of PEs,);
    ELEMENTWISE (values, SIMD ops per value); DISPATCH/COMBINE (values, hops). A ``PerToken`` dim is
    the decode step's context; ``attention`` marks the ops of attention, each request's own (a decode
    step's are re-costed at every token's context; an iteration's prompts share every other kernel).
    Under the production stack (``builders.software``) a kernel may carry others: ``fused``, element-wise
    kernels run in its epilogue with no launch of their own; ``beside``, collectives run on microthreads
    while it runs."""

    kind: StageOpKind
    name: str
    layer: int | None
    dims: tuple[Size, ...]
    region: tuple[int, int] | None = None
    attention: bool = False
    fused: tuple[Kernel, ...] = ()
    beside: tuple[Kernel, ...] = ()

    def at(self, context: int) -> tuple[int, ...]:
        """The dims at a decode context (a prefill's have no ``PerToken``)."""
        return tuple(d.at(context) if isinstance(d, PerToken) else d for d in self.dims)


@dataclass(frozen=True, slots=True, eq=False)
class Handoff:
    """A stage's activations (``values``) to the stage ``target`` (from the last: the new token back to
    the first): over the fabric on one wafer, over the I/O links between wafers."""

    source: Stage
    target: Stage
    values: int


@dataclass(frozen=True, slots=True, eq=False)
class StageWork:
    """What one pipeline stage does for a request: its prompt's prefill, one decode step (its ops at
    a decode context; ``attention`` ops re-costed per token), and the hand-off after each.
    ``prefill_of(tokens, context)``: the prefill kernels of a piece of ``tokens`` prompt tokens whose
    attention reaches ``context`` tokens (a chunk, or a prompt of another length), its layers' only
    (the LM head is ``lm_head``, the decode step's last kernels on the last stage); ``prefill_runs`` the
    same kernels as runs (one layer's, how many layers in a row have the same), for their costs."""

    stage: Stage
    prefill: tuple[Kernel, ...]
    decode: tuple[Kernel, ...]
    handoff_prefill: Handoff
    handoff_decode: Handoff
    prefill_of: Callable[[int, int], tuple[Kernel, ...]] | None = None
    lm_head: tuple[Kernel, ...] = ()
    prefill_runs: Callable[[int, int], tuple[tuple[tuple[Kernel, ...], int], ...]] | None = None


@dataclass(frozen=True, slots=True, eq=False)
class ServeBatches:
    """Requests through ``stages``, scheduled iteration by iteration (docs/model.md §11.7): request r
    arrives at cycle ``arrival[r]`` (in order) with ``prompt[r]`` prompt tokens and ``output[r]`` output
    tokens. It is admitted, first come first served, when fewer than ``cap`` are in flight and its KV cache
    (prompt + output tokens, reserved whole) fits every stage beside theirs (``model.serving.
    requests_fit`` under ``layout``), and leaves when its last token does; one that fits no stage even
    alone is refused. Each stage, whenever it is idle and has work queued, runs one iteration: every
    decode token queued, as one batch, and prompt tokens by ``policy`` — ``prefill_first``: whole
    prompts queued, in order, while their tokens stay within ``budget`` (the first one always), instead
    of the decodes; ``chunked``: besides them, prompt tokens up to ``budget`` less the decodes, a prompt
    cut where the budget ends, its rest waiting for the next iteration (``take_pieces``); ``none``: one
    decode token or one whole prompt, the first to come (no batching at all). The prompt
    tokens of one iteration share its GEMMs (``BatchCosts.iteration``). With ``prefill_pool`` (split
    prefill, docs/model.md §11.10), prompts go through the prefill wafers' stages instead, stations after
    the decode stages: the last of them gives the first token and hands the prompt's KV cache to the
    first decode stage, where the request decodes. With ``speculative`` (K, α), a
    draft runs on wafers of its own as one more station after the last stage (docs/model.md §11.9): a
    request's first token goes to it (its prompt prefilled there, then K draft steps), every decode token
    after is a verify pass of K + 1 positions through the stages that yields ``model.speculative.accepted``
    tokens, then back to the draft for the next K. With ``kv_block`` (B tokens a block, a pool of N blocks,
    what preemption does) the cache is paged instead of reserved whole: admission takes ⌈prompt/B⌉ free
    blocks, a decode token at context c holds ⌈c/B⌉ when it enters the first stage, and when blocks run out
    there the latest-arrived of that iteration's decodes is preempted (``recompute`` or ``swap``)."""

    kind: ClassVar[OpKind] = OpKind.SERVE_BATCHES
    stages: tuple[StageWork, ...]
    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    cap: int
    policy: str
    budget: int
    model: ModelSpec
    layout: str
    args: Mapping[str, Any] = field(default_factory=_args)
    speculative: tuple[int, float] | None = None  # (K draft tokens, acceptance α)
    prefill_pool: int = 0  # split prefill: the prefill wafers' stages, stations after the decode stages
    routing: tuple[float | None, int] | None = None  # sampled routing: (its Zipf α or None, the seed)
    kv_block: tuple[int, int, str] | None = None  # paged: (tokens a block, blocks in the pool, preemption)
    members: bool = False  # log which requests each iteration carries (for a trace's spans)

    def swap_bytes(self, tokens: int) -> float:
        """The KV cache of ``tokens`` tokens on the wafer holding the most of the stages' layers: what its
        I/O carries to MemoryX or back when a request is swapped (each wafer moves its own at once)."""
        layers: dict[int, int] = {}
        for work in self.stages:
            layers[work.stage.wafer] = layers.get(work.stage.wafer, 0) + len(work.stage.layers)
        return tokens * kv_bytes_per_token(self.model) * max(layers.values())

    @property
    def requests(self) -> int:
        return len(self.arrival)

    def fits_alone(self, r: int) -> bool:
        """Whether request r's KV cache fits every stage with no other request (paged: its last decode's
        prompt + output − 1 tokens, in the pool's blocks); one that does not is refused."""
        p, o = int(self.prompt[r]), int(self.output[r])
        if self.kv_block is not None:
            return -(-(p + o - 1) // self.kv_block[0]) <= self.kv_block[1]
        return all(requests_fit(self.model, w.stage.memory, len(w.stage.layers), w.stage.rows, w.stage.cols,
                                self.layout, 1, p, o, p) for w in self.stages)

    @property
    def width(self) -> int:
        """Positions a decode token carries through the stages: K + 1 verified with a draft, else 1."""
        return self.speculative[0] + 1 if self.speculative else 1

    def stations(self) -> tuple[str, ...]:
        """The scheduler's stations by index: its stages, then the prefill pool's or the draft's."""
        return (*(f"stage {s}" for s in range(len(self.stages))),
                *(f"prefill {s}" for s in range(self.prefill_pool)),
                *(("draft",) if self.speculative else ()))

    @property
    def tokens_per_pass(self) -> float:
        """E, the tokens a decode pass yields on average (1 without a draft)."""
        return 1.0 if self.speculative is None else expected_tokens(*self.speculative)

    def outputs(self) -> np.ndarray:
        """Each request's outputs as the scheduler emits them (``model.speculative.outputs``): its tokens
        without a draft, its first token and verify passes with one."""
        if self.speculative is None:
            return self.output
        e = self.tokens_per_pass
        return np.array([outputs(int(o), e) for o in self.output.tolist()], dtype=np.int64)


class Iteration(NamedTuple):
    """One iteration of one station of a ``ServeBatches`` op, as the scheduler (``sim.executors.scheduler``)
    emits it: from cycle ``start``, ``cycles`` long, one pass of the station's kernels (``StageWork``) over
    ``decodes`` (the requests whose decode token, verify pass of K + 1 positions or draft round of K steps
    it carries), at their ``longest`` context, and the prompt ``pieces`` (request, first token, tokens)
    beside them, whose tokens share its GEMMs (``BatchCosts.iteration``); ``loads``, with sampled routing,
    each of its MoE layers' busiest expert's tokens and tokens reaching each further grid; ``index``,
    its row in the run's log."""

    station: int
    start: float
    cycles: float
    decodes: list[int]
    pieces: list[tuple[int, int, int]]
    longest: int
    loads: tuple[tuple[int, ...], ...] | None
    index: int


class Move(NamedTuple):
    """Work from one station to another, landing at cycle ``at`` (an executor lands an ``ordered`` move
    no earlier than the one before it on the ``source`` station's link): ``decodes`` (requests whose
    decode token, drafts or KV cache move) and prompt ``pieces``; ``index`` the log row of the iteration
    it follows (−1: none, a swap back in from MemoryX or first tokens to a draft)."""

    at: float
    to: int
    decodes: list[int]
    pieces: list
    source: int
    index: int
    ordered: bool


Op = Weights | WaferOp | Transfer | Experts | GradientOut | Drain | OptimizerStep | ServeBatches


@dataclass(frozen=True)
class Program:
    """``body`` runs once per micro-batch, ``micro_batches`` times back to back; ``tail`` once after.
    ``chunks`` is the weight-chunk plan the ``Weights`` ops and the experts refer to (None when no
    weights stream: serving, whose weights are resident)."""

    body: tuple[Op, ...]
    micro_batches: int = 1
    tail: tuple[Op, ...] = ()
    chunks: ChunkPlan | None = None

    def ops(self) -> Iterator[tuple[int, Op]]:
        """Every op in execution order with its micro-batch (the tail's as the last micro-batch's)."""
        for micro_batch in range(self.micro_batches):
            for op in self.body:
                yield micro_batch, op
        for op in self.tail:
            yield self.micro_batches - 1, op

    def distinct(self) -> Iterator[Op]:
        """Each op once (the body's, then the tail's): what the cost pass costs."""
        yield from self.body
        yield from self.tail

    @property
    def executed_flops(self) -> float:
        """The arithmetic of the whole program (recomputation included)."""
        return self.micro_batches * sum(op.executed_flops for op in self.body
                                        if isinstance(op, WaferOp | Experts))

    def kinds(self) -> tuple[OpKind, ...]:
        """The body's op kinds in order (one micro-batch)."""
        return tuple(op.kind for op in self.body)
