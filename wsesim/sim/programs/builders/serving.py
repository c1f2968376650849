"""Serving as a program (docs/model.md §11.2, which tabulates every kernel of a layer): each pipeline
stage's kernels for the prompt's prefill and for one decode step, as shapes on the stage's grid; the cost
pass (``costing``) simulates each on that grid with ``wsesim.kernels``.

A layer's decode is the chain of kernels a token's activations go through — norms with their row
allreduces, GEMVs, RoPE, attention as one wide head over the cached keys and values (as WaferLLM writes
it), the FFN or an MoE layer's router, trip to its experts' regions and back — and its prefill the same
layer on the whole prompt with GEMMs; the last stage ends with the LM head and an argmax. Every GEMM and
GEMV shape comes from the one layer description, ``model.shapes.layer_matmuls``, that the training step
reads too. Each kernel pays ``runtime.kernel_launch`` in the cost pass; under ``inference.software:
production`` the list is composed by ``builders.software``, each composed kernel paying
``runtime.fused_launch``.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from math import ceil, isqrt
from typing import TYPE_CHECKING

from ....kernels.cost import lanes_dtype
from ....kernels.machine import Machine
from ....model.load import Requests, requests_of
from ....model.serving import experts_per_grid, kv_pool_tokens
from ....model.shapes import LayerShapes, expert_op_matmuls, layer_matmuls
from ....model.vocabulary import StageOpKind
from ..mapping import Mapping, Stage
from ..program import Handoff, Kernel, PerToken, Program, ServeBatches, StageWork
from .software import compose

if TYPE_CHECKING:
    from ....config.inference import InferenceExperimentSpec

__all__ = ["serve_program", "serving_program"]

ELEMENTWISE, GEMV, ALLREDUCE, GEMM, TRANSFER = (StageOpKind.ELEMENTWISE, StageOpKind.GEMV,
                                                StageOpKind.ALLREDUCE, StageOpKind.GEMM, StageOpKind.TRANSFER)
CONTEXT = PerToken(1)
"""The decode step's context (keys and values cached), one per token."""


class _Layer:
    """The kernels of one layer on one stage's grid (docs/model.md §11.2)."""

    def __init__(self, spec: InferenceExperimentSpec, stage: Stage) -> None:
        self.m, self.rows, self.cols = spec.model, stage.rows, stage.cols
        self.grids = stage.grids
        self.gemm = spec.inference.gemm
        self.shapes = LayerShapes(self.m)

    def _gemv(self, name: str, layer: int | None, matmul: tuple, region: tuple[int, int] | None = None,
              attention: bool = False) -> Kernel:
        """y[1×N] = x[1×K]·W[K×N] of a layer's matmul (its M is the one token)."""
        return Kernel(GEMV, name, layer, matmul[1:], region, attention)

    def decode(self, layer: int) -> list[Kernel]:
        m, rows, cols, hid = self.m, self.rows, self.cols, self.m.hidden_size
        mm = layer_matmuls(self.shapes, 1, CONTEXT, self.m.is_dense(layer))
        q, k, _v, _o = self.shapes.qkvo_widths
        ops = [Kernel(ELEMENTWISE, "attn_norm", layer, (hid * rows, 2)),
               Kernel(ALLREDUCE, "attn_norm_sum", layer, (1,)),
               self._gemv("qkv", layer, mm["qkv"]),
               Kernel(ELEMENTWISE, "rope", layer, ((q + k) * cols, 4)),
               self._gemv("scores", layer, mm["scores"], attention=True),
               Kernel(ELEMENTWISE, "softmax", layer, (PerToken(m.heads * cols), 3), attention=True),
               Kernel(ALLREDUCE, "softmax_sums", layer, (2 * m.heads,), attention=True),
               self._gemv("context", layer, mm["context"], attention=True),
               self._gemv("o_proj", layer, mm["o_proj"]),
               Kernel(ELEMENTWISE, "residual", layer, (hid * cols, 1)),
               Kernel(ELEMENTWISE, "ffn_norm", layer, (hid * rows, 2)),
               Kernel(ALLREDUCE, "ffn_norm_sum", layer, (1,))]
        ops += self.ffn(layer, mm) if m.is_dense(layer) else self.moe(layer, mm)
        return [*ops, Kernel(ELEMENTWISE, "residual", layer, (hid * cols, 1))]

    def ffn(self, layer: int, mm: dict) -> list[Kernel]:
        return [self._gemv("gate_up", layer, mm["gate_up"]),
                Kernel(ELEMENTWISE, "activation", layer, (mm["down"][1] * self.cols, 4)),
                self._gemv("down", layer, mm["down"])]

    def moe(self, layer: int, mm: dict) -> list[Kernel]:
        """The router on the grid; the token to its top_k experts' regions and back (``TRANSFER`` of one
        token a decode vector, timed by the fabric model on the grid's placement of its experts,
        ``sim.cost.expert_dispatch``); their GEMVs run at once, one expert's time, each on a near-square
        region of its own; the shared expert's on the grid. With the experts spread over G grids (expert
        parallelism), each grid is cut into one
        region per expert it holds (⌈E/G⌉), and the token also travels to the further grids its experts
        are on and back (``GRID_TRIPS``: with balanced routing its k experts reach min(k, G) grids, the
        first one of them; sampled, the grids its drawn experts are on, ``sim.cost.moe_serving``)."""
        m, rows, cols, hid = self.m, self.rows, self.cols, self.m.hidden_size
        side = max(1, isqrt(rows * cols // experts_per_grid(m.experts, self.grids)))
        region = (min(side, rows), min(side, cols))
        gate_up, down = (expert_op_matmuls(self.shapes, op, 1, False)[0] for op in ("gate_up", "down"))
        ops = [self._gemv("router", layer, mm["router"]),
               Kernel(ALLREDUCE, "top_k", layer, (2 * m.top_k,)),
               Kernel(TRANSFER, "dispatch", layer, (1,)),
               self._gemv("expert_gate_up", layer, gate_up, region),
               Kernel(ELEMENTWISE, "expert_activation", layer, (m.expert_intermediate * region[1], 4),
                      region),
               self._gemv("expert_down", layer, down, region),
               Kernel(TRANSFER, "combine", layer, (1,))]
        if self.grids > 1:  # (values each way, further grids a balanced token reaches)
            reached = min(m.top_k, self.grids) - 1
            ops.append(Kernel(StageOpKind.GRID_TRIPS, "expert_grids", layer, (hid, reached)))
        if m.shared_expert_intermediate:
            ops += [self._gemv("shared_gate_up", layer, mm["shared_gate_up"]),
                    self._gemv("shared_down", layer, mm["shared_down"])]
        return ops

    def prefill(self, layer: int, tokens: int, context: int | None = None) -> list[Kernel]:
        """The layer on ``tokens`` prompt tokens attending to ``context`` tokens (default: themselves;
        more for a later chunk of a prompt, whose keys and values before it are cached)."""
        m, rows, hid = self.m, self.rows, self.m.hidden_size
        context = tokens if context is None else context
        mm = layer_matmuls(self.shapes, tokens, context, self.m.is_dense(layer))
        q, k, _v, _o = self.shapes.qkvo_widths
        per_row = ceil(tokens / rows)
        moe = not self.m.is_dense(layer)  # the prompt's tokens to their experts and back (``moe``)
        there, back = ([Kernel(TRANSFER, name, layer, (tokens,))] if moe else []
                       for name in ("dispatch", "combine"))
        return [Kernel(ELEMENTWISE, "attn_norm", layer, (tokens * hid, 2)),
                Kernel(ALLREDUCE, "attn_norm_sum", layer, (per_row,)),
                Kernel(GEMM, "qkv", layer, mm["qkv"]),
                Kernel(ELEMENTWISE, "rope", layer, (tokens * (q + k), 4)),
                Kernel(GEMM, "scores", layer, mm["scores"], attention=True),
                *self.scores_reduce(layer, tokens, context),
                Kernel(ELEMENTWISE, "softmax", layer, (m.heads * tokens * context, 3), attention=True),
                Kernel(ALLREDUCE, "softmax_sums", layer, (2 * m.heads * per_row,), attention=True),
                Kernel(GEMM, "context", layer, mm["context"], attention=True),
                Kernel(GEMM, "o_proj", layer, mm["o_proj"]),
                Kernel(ELEMENTWISE, "ffn_norm", layer, (tokens * hid, 3)),
                Kernel(ALLREDUCE, "ffn_norm_sum", layer, (per_row,)),
                *there,
                Kernel(GEMM, "gate_up", layer, mm["gate_up"]),
                Kernel(ELEMENTWISE, "activation", layer, (tokens * mm["down"][1], 4)),
                Kernel(GEMM, "down", layer, mm["down"]),
                *back,
                *self.prefill_trips(layer, tokens),
                Kernel(ELEMENTWISE, "residual", layer, (tokens * hid, 2))]

    def prefill_trips(self, layer: int, tokens: int) -> list[Kernel]:
        """With an MoE layer's experts over G grids, the prompt's tokens to the further grids and back:
        its k experts a token reach min(k, G) grids, spread evenly, so each further grid takes
        ⌈S·min(k, G)/G⌉ tokens' hidden vectors and sends as many back (``GRID_TRIPS`` over all G − 1)."""
        if self.grids == 1 or self.m.is_dense(layer):
            return []
        reach = -(-tokens * min(self.m.top_k, self.grids) // self.grids)
        values = reach * self.m.hidden_size
        return [Kernel(StageOpKind.GRID_TRIPS, "expert_grids", layer, (values, self.grids - 1))]

    def scores_reduce(self, layer: int, tokens: int, context: int) -> list[Kernel]:
        """WaferLLM's prefill Q·Kᵀ (``matmul_T``) splits the head dimension along each row, so every
        step's block of partial scores, ⌈S/P⌉ × ⌈S/Q⌉ per PE, is summed along the row before the next
        step: one reduce per step (``ROW_REDUCES``), with MeshGEMM only (the other algorithms'
        scores are a plain GEMM)."""
        if self.gemm != "meshgemm" or self.cols < 2:
            return []
        block = ceil(tokens / self.rows) * ceil(context / self.cols)
        return [Kernel(StageOpKind.ROW_REDUCES, "scores_reduce", layer, (block,), attention=True)]

    def lm_head(self) -> list[Kernel]:
        return [self._gemv("lm_head", None, layer_matmuls(self.shapes, 1, 1)["lm_head"]),
                Kernel(ALLREDUCE, "argmax", None, (2,))]


def default_token_budget(spec: InferenceExperimentSpec, rows: int) -> int:
    """``inference.scheduler.token_budget: auto`` on a grid of ``rows`` rows of PEs: the tokens at which a
    prompt GEMM's vector instructions spend as long on their lanes as on their issue. A GEMM's rows of tokens
    are spread over the grid's rows, so each PE's instruction walks ⌈M / rows⌉ tokens on ``lanes`` SIMD
    lanes after ``issue`` cycles to start it: below M = rows · lanes · issue the issue, not the
    arithmetic, sets its pace, and one more prompt in the iteration costs little (docs/model.md §11.7).
    At least rows · lanes (a machine whose issue is free)."""
    machine = Machine.of(spec.hardware, lanes_dtype(spec.model.bytes_per_value))
    return rows * machine.lanes * max(1, ceil(machine.issue))


def serving_program(spec: InferenceExperimentSpec, mapping: Mapping,
                    requests: Requests | None = None, members: bool = False) -> Program:
    """Every stage's kernels for the run's requests (default: the spec's, ``model.load.requests_of``), as
    one ``ServeBatches`` op over the mapping's stages: the scheduler batches them
    (``inference.scheduler.prefill``'s policy), or with ``batching: none`` takes one decode token or one whole
    prompt at a time."""
    inf, stages, works = spec.inference, mapping.stages, []
    software = inf.software
    for stage in stages:
        layer = _Layer(spec, stage)
        prefill = [op for i in stage.layers for op in layer.prefill(i, inf.load.prompt_len)]
        decode = [op for i in stage.layers for op in layer.decode(i)]
        head = tuple(layer.lm_head()) if stage.lm_head else ()
        prefill, decode = compose([*prefill, *head], software), compose([*decode, *head], software)
        head = compose(head, software)
        nxt = stages[(stage.index + 1) % len(stages)]
        last = stage.index == len(stages) - 1
        values = 1 if last else spec.model.hidden_size  # the last stage sends the new token back

        def prefill_runs(tokens: int, context: int, layer: _Layer = layer,
                         stage: Stage = stage) -> tuple[tuple[tuple[Kernel, ...], int], ...]:
            if software != "research":  # fusion crosses layers (a layer's first norm into the GEMM
                # before it): the stage's whole composed list, as one run
                return ((compose((op for i in stage.layers for op in layer.prefill(i, tokens, context)),
                                 software), 1),)
            # a layer's prefill kernels differ from another's only in its number and in whether it is
            # dense: each kind built once a piece (the shapes' arithmetic), runs of layers alike counted
            built: dict[bool, tuple[Kernel, ...]] = {}
            runs: list[list] = []  # [kernels, layers in a row, dense]
            for i in stage.layers:
                dense = layer.m.is_dense(i)
                if runs and runs[-1][2] == dense:
                    runs[-1][1] += 1
                else:
                    if dense not in built:
                        built[dense] = tuple(layer.prefill(i, tokens, context))
                    runs.append([built[dense], 1, dense])
            return tuple((like, n) for like, n, _ in runs)

        def prefill_of(tokens: int, context: int, stage: Stage = stage,
                       runs: Callable = prefill_runs) -> tuple[Kernel, ...]:
            if software != "research":
                return runs(tokens, context)[0][0]
            ops: list[Kernel] = []
            layers = iter(stage.layers)
            for like, n in runs(tokens, context):
                for i in islice(layers, n):  # each layer's own kernels, numbered from its kind's
                    ops += [k if k.layer == i else Kernel(k.kind, k.name, i, k.dims, k.region, k.attention)
                            for k in like]
            return tuple(ops)

        works.append(StageWork(stage, prefill, decode,
                               Handoff(stage, nxt, values if last else inf.load.prompt_len * values),
                               Handoff(stage, nxt, values), prefill_of, head, prefill_runs))
    if requests is None:
        requests = requests_of(spec)
    budget = (default_token_budget(spec, mapping.grid[0]) if inf.scheduler.token_budget == "auto"
              else inf.scheduler.token_budget)
    routing = (inf.moe.zipf_alpha, inf.load.seed) if inf.moe.sampled and spec.model.experts else None
    return serve_program(spec, works, requests, budget, inf.kv_layout, routing, members)


def serve_program(spec: InferenceExperimentSpec, works: list[StageWork], requests: Requests, budget: int,
                  layout: str, routing: tuple[float | None, int] | None = None,
                  members: bool = False) -> Program:
    """The one ``ServeBatches`` op over ``works``' stages (a wafer's or a GPU's, ``builders.gpu``): the
    requests, the scheduler's policy and ``budget``, and with ``inference.scheduler.kv_block`` the paged pool,
    the tightest stage's room at the cap and the longest prompt."""
    inf = spec.inference
    paged = None
    if inf.scheduler.kv_block is not None:
        longest = int(requests.prompt.max()) if len(requests.prompt) else inf.load.prompt_len
        cap = inf.scheduler.batch
        pool = min(kv_pool_tokens(spec.model, s.memory, len(s.layers), s.rows, s.cols, cap, longest)
                   for s in (w.stage for w in works))
        paged = (inf.scheduler.kv_block, pool // inf.scheduler.kv_block, inf.scheduler.preempt_by)
    policy = inf.scheduler.prefill if inf.scheduler.continuous else "none"
    return Program((ServeBatches(tuple(works), requests.arrival, requests.prompt, requests.output,
                                 inf.scheduler.batch,
                                 policy, budget, spec.model, layout, routing=routing,
                                 kv_block=paged, members=members),))
