"""Serving as a program (docs/model.md §11.2): each pipeline stage's kernels for the prompt's prefill
and for one decode step, each kernel simulated on the stage's grid by ``wsesim.kernels``.

Per layer, decode runs: RMSNorm (squares, then an allreduce of the sum along each row of PEs), the q/k/v
GEMV, RoPE, the scores GEMV over the cached keys, softmax (exponentials, an allreduce of each head's max
and sum), the context GEMV over the cached values, the output GEMV, the residual add; RMSNorm again and
the FFN's GEMVs with their activation (an MoE layer: the router GEMV and top-k, the token's trip over the
fabric to its top_k expert regions and back, each expert's GEMVs on its region, the shared expert's on
the grid), the residual add. Attention is one wide head (q·Kᵀ over all heads' widths at once), as
WaferLLM writes it. Prefill runs the same layer on the whole prompt with GEMMs. The last stage ends
with the LM head's GEMV and an argmax (an allreduce); each stage hands its activations to the next, and
the last hands the new token back to the first.

Kernels are chained by their data (one compiled program per stage): no launch overhead between them.
"""

from __future__ import annotations

from copy import copy
from dataclasses import dataclass
from functools import lru_cache
from math import ceil, isqrt

from ..config.inference import InferenceExperimentSpec
from ..config.specs import HardwareSpec
from ..kernels.machine import Machine
from ..kernels.registry import run_kernel
from ..model.shapes import LayerShapes
from ..model.vocabulary import OpKind, ServePhase, Where
from .mapping import Mapping, Stage
from .program import Op

__all__ = ["ServingProgram", "StageWork", "serving_program"]

E, V, A, M, H = OpKind.ELEMENTWISE, OpKind.GEMV, OpKind.ALLREDUCE, OpKind.GEMM, OpKind.HANDOFF


@lru_cache(maxsize=65536)
def _kernel(hw: HardwareSpec, kind: str, rows: int, cols: int, dtype: str, algorithm: str,
            shape: tuple[int, int, int], wavelets: int) -> tuple[float, float, bool, str]:
    r = run_kernel(hw, kind, rows, cols, dtype=dtype, algorithm=algorithm, shape=shape if kind in ("gemm", "gemv")
                   else None, wavelets=wavelets)
    return r.cycles, r.communication, r.feasible, r.reason


class _Grid:
    """The kernels of one grid of PEs, cached by what their cycles depend on (blocks per PE)."""

    def __init__(self, spec: InferenceExperimentSpec, rows: int, cols: int) -> None:
        inf = spec.inference
        self.hw, self.rows, self.cols = spec.hardware, rows, cols
        self.dtype = "fp32" if spec.model.dtype == "fp32" else "fp16"
        self.machine = Machine.of(self.hw, self.dtype)
        self.gemv_alg, self.gemm_alg, self.reduce_alg = inf.gemv, inf.gemm, inf.allreduce
        self.problems: list[str] = []

    def _run(self, kind: str, alg: str, shape: tuple[int, int, int], wavelets: int = 1) -> tuple[float, float]:
        cycles, comm, ok, reason = _kernel(self.hw, kind, self.rows, self.cols, self.dtype, alg, shape, wavelets)
        if not ok and reason not in self.problems:
            self.problems.append(reason)
        return cycles, comm

    def gemv(self, k: int, n: int) -> tuple[float, float]:
        """y[1×n] = x[1×k]·W[k×n]: its cycles depend only on each PE's block, so the shape is rounded up
        to whole blocks before the (cached) simulation."""
        kb, nb = ceil(k / self.cols), ceil(n / self.rows)
        return self._run("gemv", self.gemv_alg, (1, kb * self.cols, nb * self.rows))

    def gemm(self, m: int, k: int, n: int) -> tuple[float, float]:
        return self._run("gemm", self.gemm_alg, (m, k, n))

    def allreduce(self, elements: int) -> tuple[float, float]:
        """Every row of PEs reduces ``elements`` values to all its PEs (the rows work in parallel)."""
        wavelets = self.machine.wavelets(max(elements, 1))
        if self.cols < 2:
            return 0.0, 0.0
        return _kernel(self.hw, "allreduce", 1, self.cols, self.dtype, self.reduce_alg, (1, 1, 1), wavelets)[:2]

    def elementwise(self, elements: float, ops: int = 1) -> tuple[float, float]:
        """``ops`` SIMD operations on each of ``elements`` values spread over the grid's PEs."""
        return float(self.machine.compute(ceil(elements / (self.rows * self.cols)) * ops)), 0.0

    def region(self, rows: int, cols: int) -> _Grid:
        """The same kernels on a smaller rectangle (an expert's region of this grid)."""
        sub = copy(self)
        sub.rows, sub.cols = rows, cols
        return sub

    def transfer(self, elements: float, hops: int) -> tuple[float, float]:
        """``elements`` values, spread over the grid's rows, moved ``hops`` away along them in parallel."""
        wavelets = self.machine.wavelets(ceil(elements / self.rows))
        cycles = float(self.machine.transfer(wavelets, max(hops, 1)))
        return cycles, cycles


@dataclass(frozen=True)
class StageWork:
    """What one stage does: its prefill ops, one decode step's ops at the longest context, the decode
    step's cycles at every context the run reaches (index t − 1 for the t-th output token), and the
    hand-offs to the next stage (from the last: the new token back to the first)."""

    stage: Stage
    prefill: tuple[Op, ...]
    decode_ops: tuple[Op, ...]
    decode_cycles: tuple[float, ...]
    handoff_prefill: float
    handoff_decode: float

    @property
    def prefill_cycles(self) -> float:
        return sum(op.cycles for op in self.prefill)


@dataclass(frozen=True)
class ServingProgram:
    """Every stage's work, and the requests that flow through them."""

    stages: tuple[StageWork, ...]
    batch: int
    prompt_len: int
    output_len: int
    problems: tuple[str, ...] = ()


def _op(kind: OpKind, name: str, layer: int | None, stage: int, cost: tuple[float, float], flops: float = 0.0,
        phase: ServePhase = ServePhase.DECODE, where: Where = Where.STAGE) -> Op:
    return Op(kind, None, layer, where, flops=flops, name=name, stage=stage, cycles=cost[0], communication=cost[1],
              args={"phase": phase})


class _Layers:
    """The op lists of one layer on one grid (docs/model.md §11.2)."""

    def __init__(self, spec: InferenceExperimentSpec, grid: _Grid, stage: int) -> None:
        self.m, self.g, self.stage = spec.model, grid, stage
        self.s = LayerShapes(self.m)
        self.q, self.k, self.v, self.o = self.s.qkvo_widths

    def _ffn_width(self) -> tuple[int, int]:
        """A dense FFN's (up, intermediate) widths: SwiGLU's gate and up as one GEMM, GELU's up alone."""
        m = self.m
        up = (2 if m.ffn_activation == "swiglu" else 1) * m.ffn_intermediate
        return up, m.ffn_intermediate

    def decode(self, layer: int, context: int) -> list[Op]:
        m, g, st, hid = self.m, self.g, self.stage, self.m.hidden_size
        ops = [_op(E, "attn_norm", layer, st, g.elementwise(hid * g.rows, 2)),
               _op(A, "attn_norm_sum", layer, st, g.allreduce(1)),
               _op(V, "qkv", layer, st, g.gemv(hid, self.q + self.k + self.v), 2.0 * hid * (self.q + self.k + self.v)),
               _op(E, "rope", layer, st, g.elementwise((self.q + self.k) * g.cols, 4)),
               *self.attention(layer, context),
               _op(V, "o_proj", layer, st, g.gemv(self.o, hid), 2.0 * self.o * hid),
               _op(E, "residual", layer, st, g.elementwise(hid * g.cols)),
               _op(E, "ffn_norm", layer, st, g.elementwise(hid * g.rows, 2)),
               _op(A, "ffn_norm_sum", layer, st, g.allreduce(1))]
        ops += self.ffn(layer) if m.is_dense(layer) else self.moe(layer)
        return [*ops, _op(E, "residual", layer, st, g.elementwise(hid * g.cols))]

    def attention(self, layer: int, context: int) -> list[Op]:
        m, g, st = self.m, self.g, self.stage
        return [_op(V, "scores", layer, st, g.gemv(self.q, context), 2.0 * self.q * context),
                _op(E, "softmax", layer, st, g.elementwise(m.heads * context * g.cols, 3)),
                _op(A, "softmax_sums", layer, st, g.allreduce(2 * m.heads)),
                _op(V, "context", layer, st, g.gemv(context, self.o), 2.0 * context * self.o)]

    def ffn(self, layer: int) -> list[Op]:
        g, st, hid = self.g, self.stage, self.m.hidden_size
        up, f = self._ffn_width()
        return [_op(V, "gate_up", layer, st, g.gemv(hid, up), 2.0 * hid * up),
                _op(E, "activation", layer, st, g.elementwise(f * g.cols, 4)),
                _op(V, "down", layer, st, g.gemv(f, hid), 2.0 * f * hid)]

    def moe(self, layer: int) -> list[Op]:
        """The router on the grid; the token to its top_k experts' regions (the grid cut into one
        region per expert) and back; their GEMVs run at once, one expert's time; the shared expert's on
        the grid."""
        m, g, st, hid = self.m, self.g, self.stage, self.m.hidden_size
        side = max(1, isqrt(g.rows * g.cols // m.experts))
        region = g.region(min(side, g.rows), min(side, g.cols))
        inter, hops = m.expert_intermediate, (g.rows + g.cols) // 4  # a region's centre from the grid's, on average
        ops = [_op(V, "router", layer, st, g.gemv(hid, m.experts), 2.0 * hid * m.experts),
               _op(A, "top_k", layer, st, g.allreduce(2 * m.top_k)),
               _op(OpKind.DISPATCH, "dispatch", layer, st, g.transfer(hid, hops)),
               _op(V, "expert_gate_up", layer, st, region.gemv(hid, 2 * inter), 2.0 * m.top_k * hid * 2 * inter),
               _op(E, "expert_activation", layer, st, region.elementwise(inter * region.cols, 4)),
               _op(V, "expert_down", layer, st, region.gemv(inter, hid), 2.0 * m.top_k * inter * hid),
               _op(OpKind.COMBINE, "combine", layer, st, g.transfer(hid, hops))]
        if m.shared_expert_intermediate:
            sh = m.shared_expert_intermediate
            ops += [_op(V, "shared_gate_up", layer, st, g.gemv(hid, 2 * sh), 4.0 * hid * sh),
                    _op(V, "shared_down", layer, st, g.gemv(sh, hid), 2.0 * sh * hid)]
        return ops

    def prefill(self, layer: int, tokens: int) -> list[Op]:
        m, g, st, hid, P = self.m, self.g, self.stage, self.m.hidden_size, ServePhase.PREFILL
        qkv, up_f = self.q + self.k + self.v, self._ffn_width()
        up, f = up_f if m.is_dense(layer) else (2 * m.expert_intermediate * m.top_k, m.expert_intermediate * m.top_k)
        return [_op(E, "attn_norm", layer, st, g.elementwise(tokens * hid, 2), phase=P),
                _op(A, "attn_norm_sum", layer, st, g.allreduce(ceil(tokens / g.rows)), phase=P),
                _op(M, "qkv", layer, st, g.gemm(tokens, hid, qkv), 2.0 * tokens * hid * qkv, P),
                _op(E, "rope", layer, st, g.elementwise(tokens * (self.q + self.k), 4), phase=P),
                _op(M, "scores", layer, st, g.gemm(tokens, self.q, tokens), 2.0 * tokens * self.q * tokens, P),
                _op(E, "softmax", layer, st, g.elementwise(m.heads * tokens * tokens, 3), phase=P),
                _op(A, "softmax_sums", layer, st, g.allreduce(2 * m.heads * ceil(tokens / g.rows)), phase=P),
                _op(M, "context", layer, st, g.gemm(tokens, tokens, self.o), 2.0 * tokens * tokens * self.o, P),
                _op(M, "o_proj", layer, st, g.gemm(tokens, self.o, hid), 2.0 * tokens * self.o * hid, P),
                _op(E, "ffn_norm", layer, st, g.elementwise(tokens * hid, 3), phase=P),
                _op(A, "ffn_norm_sum", layer, st, g.allreduce(ceil(tokens / g.rows)), phase=P),
                _op(M, "gate_up", layer, st, g.gemm(tokens, hid, up), 2.0 * tokens * hid * up, P),
                _op(E, "activation", layer, st, g.elementwise(tokens * f, 4), phase=P),
                _op(M, "down", layer, st, g.gemm(tokens, f, hid), 2.0 * tokens * f * hid, P),
                _op(E, "residual", layer, st, g.elementwise(tokens * hid, 2), phase=P)]

    def lm_head(self, phase: ServePhase) -> list[Op]:
        g, st, hid, vocab = self.g, self.stage, self.m.hidden_size, self.m.vocab_size
        return [_op(V, "lm_head", None, st, g.gemv(hid, vocab), 2.0 * hid * vocab, phase),
                _op(A, "argmax", None, st, g.allreduce(2), phase=phase)]


def _hops(a: Stage, b: Stage) -> int:
    return abs(a.origin[0] - b.origin[0]) + abs(a.origin[1] - b.origin[1])


def _handoff(spec: InferenceExperimentSpec, grid: _Grid, a: Stage, b: Stage, elements: float) -> float:
    """Cycles to move ``elements`` activations from stage a's grid to stage b's: over the fabric on one
    wafer, over the wafers' I/O links and one interconnect node between wafers."""
    if a.wafer == b.wafer:
        return grid.transfer(elements, _hops(a, b))[0] if a.index != b.index else 0.0
    hw, ic = spec.hardware, spec.inference.interconnect
    latency = ic.latency_s * hw.clock_hz if ic is not None else 0.0
    return elements * spec.model.bytes_per_value / hw.io_bytes_per_cycle + latency


def serving_program(spec: InferenceExperimentSpec, mapping: Mapping) -> ServingProgram:
    """Every stage's kernels for the run's requests, simulated on its grid."""
    inf, works, problems = spec.inference, [], []
    stages = mapping.stages
    for stage in stages:
        grid = _Grid(spec, stage.rows, stage.cols)
        layers = _Layers(spec, grid, stage.index)
        prefill = [op for layer in stage.layers for op in layers.prefill(layer, inf.prompt_len)]
        longest = inf.prompt_len + max(inf.output_len - 1, 1)  # the last decode step's context
        decode = [op for layer in stage.layers for op in layers.decode(layer, longest)]
        if stage.lm_head:
            prefill += layers.lm_head(ServePhase.PREFILL)
            decode += layers.lm_head(ServePhase.DECODE)
        fixed = sum(op.cycles for op in decode) - len(stage.layers) * sum(
            op.cycles for op in layers.attention(stage.layers[0], longest))
        per_token = [fixed + len(stage.layers) * sum(op.cycles for op in layers.attention(stage.layers[0], ctx))
                     for ctx in range(inf.prompt_len + 1, inf.prompt_len + inf.output_len)]
        nxt = stages[(stage.index + 1) % len(stages)]
        last = stage.index == len(stages) - 1
        elements = 1 if last else spec.model.hidden_size  # the last stage sends the new token back
        works.append(StageWork(stage, tuple(prefill), tuple(decode), tuple(per_token),
                               _handoff(spec, grid, stage, nxt, elements if last else inf.prompt_len * elements),
                               _handoff(spec, grid, stage, nxt, elements)))
        problems += [p for p in grid.problems if p not in problems]
    return ServingProgram(tuple(works), inf.batch, inf.prompt_len, inf.output_len, tuple(problems))
