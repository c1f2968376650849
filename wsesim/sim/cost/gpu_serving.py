"""What a GPU pipeline stage's iterations cost (docs/model.md §13.7, which writes out every kernel of an
iteration): the scheduler's station on GPUs.

A stage is ``tp`` GPUs of one node holding consecutive layers, tensor-parallel as Megatron-LM splits a
layer (q/k/v and gate/up by columns, o_proj and down by rows, an all-reduce after attention and after the
MLP); an MoE layer's experts are split over the same GPUs, each GPU routing its ⌈M/tp⌉ of the iteration's
M tokens through all-to-alls and running its experts as one grouped GEMM at the balanced load (the M·k
routed slots over a = min(E, M·k) experts: one decode token reads k experts' weights, not E). Every kernel
is ``wsesim.kernels.gpu``'s, on M = the iteration's tokens, decode and prompt alike; a prompt piece's
FlashAttention is the kernel over its keys less the rows an earlier piece did; the decode tokens' is one
flash-decoding kernel at the batch's longest context (the scheduler says only the longest, as for the
wafer's ``BatchCosts``). A decode-only iteration replays one CUDA graph (one launch, as vLLM captures
decode batches); an iteration with prompt tokens launches every kernel. Times are in the GPU preset's
clock cycles, the unit the scheduler and the serving result read (seconds × ``clock``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ...kernels.cost import KernelCost
from ...kernels.gpu.attention import decode_attention, elementwise, prefill_attention
from ...kernels.gpu.collectives import collective
from ...kernels.gpu.device import Gpu, GpuKernelResult
from ...kernels.gpu.gemm import gemm, grouped
from ...model.shapes import FFN_MATRICES, LayerShapes
from ...model.vocabulary import StageOpKind
from ..programs.mapping import Mapping
from ..programs.program import Kernel

__all__ = ["GPU_DTYPES_BY_BYTES", "GpuStation", "Part", "gpu_stations", "gpu_token_budget", "stage_kernels"]

GPU_DTYPES_BY_BYTES = {1: "fp8", 2: "bf16", 4: "tf32"}
"""The GPU data type a model's ``bytes_per_value`` runs in."""

Kernels = tuple[Kernel, ...]

_EL, _MM, _AR, _TR = StageOpKind.ELEMENTWISE, StageOpKind.GEMM, StageOpKind.ALLREDUCE, StageOpKind.TRANSFER


class Part(NamedTuple):
    """One kernel of a stage's iteration: its name, its kind (for the result's breakdowns), its cost,
    whether it is attention's."""

    name: str
    kind: StageOpKind
    result: GpuKernelResult
    attention: bool = False


def kernel_cost(r: GpuKernelResult, clock: float) -> KernelCost:
    """A GPU kernel as the serving result reads a kernel: cycles, its arithmetic and HBM time as
    ``compute``, its link time as ``communication``, its launch as ``overhead``."""
    return KernelCost(r.seconds * clock, (r.compute + r.memory) * clock, r.communication * clock,
                      overhead=r.launch * clock)


class GpuStation:
    """One stage's iteration costs on ``tp`` GPUs (see the module's docstring), each figure computed once
    and kept, by the same keys as the wafer's ``BatchCosts``: both executors ask the same object."""

    def __init__(self, spec: Any, layers: Sequence[int], tp: int, first: bool, last: bool,
                 stages: int) -> None:
        m = self.m = spec.model
        self.gpu = Gpu.of(spec.hardware, GPU_DTYPES_BY_BYTES.get(m.bytes_per_value, "bf16"))
        self.clock, self.tp, self.first, self.last = spec.hardware.clock_hz, tp, first, last
        self.stages = stages
        self.layers = tuple(layers)
        self.moe_layers = [i for i in self.layers if not m.is_dense(i)]
        self.dense = len(self.layers) - len(self.moe_layers)
        self.shapes = LayerShapes(m)
        self.heads, self.kv_heads = m.heads // tp, max(1, m.kv_heads // tp)
        self.width = 1
        self._gemm: dict[tuple[int, int, int], GpuKernelResult] = {}
        self._rest: dict[tuple[int, bool, int], float] = {}
        self._flash: dict[int, GpuKernelResult] = {}
        self._decoding: dict[tuple[int, int], float] = {}
        self._experts: dict[int, tuple[float, float, float]] = {}

    # ------------------------------------------------------------------------------------- kernels
    def _mm(self, m: int, k: int, n: int) -> GpuKernelResult:
        key = (m, k, n)
        r = self._gemm.get(key)
        if r is None:
            r = self._gemm[key] = gemm(self.gpu, m, k, n)
        return r

    def _launched(self, r: GpuKernelResult, graphs: bool) -> GpuKernelResult:
        """``r`` without its launch when a CUDA graph replays it."""
        if not graphs or not r.launch:
            return r
        return replace(r, seconds=r.seconds - r.launch, launch=0.0)

    def _collective(self, kind: str, nbytes: float, graphs: bool) -> GpuKernelResult:
        return collective(self.gpu, kind, 1, self.tp, nbytes, graphs=graphs)

    def layer(self, dense: bool, rows: int, graphs: bool) -> list[Part]:
        """One layer's kernels but attention's on ``rows`` tokens, on one GPU of the group."""
        m, g, tp, b = self.m, self.gpu, self.tp, self.gpu.elem_bytes
        H = m.hidden_size
        q, k, v, o = self.shapes.qkvo_widths
        out = [Part("attn_norm", _EL, elementwise(g, rows * H, graphs=graphs)),
               Part("qkv", _MM, self._launched(self._mm(rows, H, (q + k + v) // tp), graphs)),
               Part("rope", _EL, elementwise(g, rows * (q + k) // tp, graphs=graphs)),
               Part("o_proj", _MM, self._launched(self._mm(rows, o // tp, H), graphs))]
        if tp > 1:
            out.append(Part("attn_allreduce", _AR, self._collective("allreduce", rows * H * b, graphs)))
        out += [Part("residual", _EL, elementwise(g, rows * H, reads=2, graphs=graphs)),
                Part("ffn_norm", _EL, elementwise(g, rows * H, graphs=graphs))]
        if dense:
            inner = m.ffn_intermediate // tp
            up = (FFN_MATRICES[m.ffn_activation] - 1) * inner
            out += [Part("gate_up", _MM, self._launched(self._mm(rows, H, up), graphs)),
                    Part("activation", _EL, elementwise(g, rows * inner, reads=up // inner, graphs=graphs)),
                    Part("down", _MM, self._launched(self._mm(rows, inner, H), graphs))]
            if tp > 1:
                out.append(Part("ffn_allreduce", _AR, self._collective("allreduce", rows * H * b, graphs)))
        else:
            out += self._moe(rows, graphs)
        return [*out, Part("residual", _EL, elementwise(g, rows * H, reads=2, graphs=graphs))]

    def _moe(self, rows: int, graphs: bool) -> list[Part]:
        """An MoE layer's router, dispatch, experts, combine and gather (see the module's docstring)."""
        m, g, tp, b = self.m, self.gpu, self.tp, self.gpu.elem_bytes
        H, I = m.hidden_size, m.expert_intermediate  # noqa: E741 (the config's name)
        own = -(-rows // tp)  # the tokens each GPU routes
        slots = rows * m.top_k
        active = min(m.experts, slots)  # the experts the batch reaches, spread evenly
        mine = -(-active // tp)  # of them on each GPU
        load = -(-slots // active)  # tokens an expert
        loads = [load] * mine
        out = [Part("router", _MM, self._launched(self._mm(own, H, m.experts), graphs))]
        if tp > 1:
            out.append(Part("dispatch", _TR, self._collective("alltoall", own * m.top_k * H * b, graphs)))
        out += [Part("expert_gate_up", _MM, grouped(g, loads, H, 2 * I, graphs=graphs)),
                Part("expert_activation", _EL, elementwise(g, mine * load * I, reads=2, graphs=graphs)),
                Part("expert_down", _MM, grouped(g, loads, I, H, graphs=graphs))]
        if tp > 1:
            out.append(Part("combine", _TR, self._collective("alltoall", own * m.top_k * H * b, graphs)))
        if m.shared_expert_intermediate:
            sh = m.shared_expert_intermediate
            out += [Part("shared_gate_up", _MM, self._launched(self._mm(own, H, 2 * sh), graphs)),
                    Part("shared_down", _MM, self._launched(self._mm(own, sh, H), graphs))]
        if tp > 1:
            out.append(Part("expert_gather", _AR, self._collective("allgather", rows * H * b, graphs)))
        return out

    def ends(self, rows: int, outputs: int, graphs: bool) -> list[Part]:
        """The first stage's embedding gather of ``rows`` tokens; the last stage's LM head on ``outputs``
        rows (its vocabulary split over the GPUs), the logits' all-gather and the sampling's read."""
        m, g, b = self.m, self.gpu, self.gpu.elem_bytes
        embed = Part("embedding", _EL, elementwise(g, rows * m.hidden_size, graphs=graphs))
        out = [embed] if self.first else []
        if self.last and outputs:
            V = m.vocab_size
            out.append(Part("lm_head", _MM, self._launched(self._mm(outputs, m.hidden_size, -(-V // self.tp)),
                                                           graphs)))
            if self.tp > 1:
                out.append(Part("logits_gather", _AR, self._collective("allgather", outputs * V * b, graphs)))
            out.append(Part("sample", _EL, elementwise(g, outputs * V, writes=0, graphs=graphs)))
        return out

    def attention(self, decodes: int, longest: int, pieces: Sequence[tuple[int, int, bool]],
                  graphs: bool) -> list[Part]:
        """One layer's attention: each prompt piece's FlashAttention, the decode tokens' flash-decoding."""
        g, d = self.gpu, self.shapes.qk_head_dim
        out = [Part("attention", _MM, self._piece(n, start, graphs), True) for n, start, _ in pieces]
        if decodes:
            out.append(Part("decode_attention", _MM, decode_attention(
                g, decodes, longest, d, self.heads, self.kv_heads, graphs=graphs), True))
        return out

    def _flash_at(self, seq: int) -> GpuKernelResult:
        r = self._flash.get(seq)
        if r is None:
            r = self._flash[seq] = prefill_attention(self.gpu, 1, seq, self.shapes.qk_head_dim, self.heads,
                                                     self.kv_heads, causal=True, graphs=True)
        return r

    def _piece(self, tokens: int, start: int, graphs: bool) -> GpuKernelResult:
        """A piece's FlashAttention: causal over ``start + tokens`` keys, less the rows before ``start``
        (their query tiles' work, which an earlier piece did), and its launch."""
        whole = self._flash_at(start + tokens)
        launch = self.gpu.launch(graphs)
        if not start:
            return replace(whole, seconds=whole.seconds + launch, launch=launch)
        before = self._flash_at(start)
        compute, memory = whole.compute - before.compute, max(0.0, whole.memory - before.memory)
        return replace(whole, seconds=launch + compute + memory, launch=launch, compute=compute,
                       memory=memory, flops=whole.flops - before.flops)

    def parts(self, decodes: int, longest: int,
              pieces: Sequence[tuple[int, int, bool]]) -> list[tuple[int | None, Part]]:
        """Every kernel of an iteration as (layer or None, part), in the order they run; a decode-only
        iteration's graph launch first."""
        graphs = not pieces
        rows = decodes + sum(p[0] for p in pieces)
        outputs = decodes + sum(1 for p in pieces if p[2])
        ends = self.ends(rows, outputs, graphs)
        out: list[tuple[int | None, Part]] = []
        if graphs:
            out.append((None, Part("graph_launch", _EL, elementwise(self.gpu, 0))))
        out += [(None, p) for p in ends if p.name == "embedding"]
        for i in self.layers:
            layer = self.layer(self.m.is_dense(i), rows, graphs)
            at = next(j for j, p in enumerate(layer) if p.name == "o_proj")
            attention = self.attention(decodes, longest, pieces, graphs)
            out += [(i, p) for p in layer[:at] + attention + layer[at:]]
        return out + [(None, p) for p in ends if p.name != "embedding"]

    # ---------------------------------------------------------------------------- what it costs
    def _rest_seconds(self, rows: int, graphs: bool, outputs: int) -> float:
        """Every kernel but attention's, the layers' by kind times their count, and the ends'."""
        key = (rows, graphs, outputs)
        s = self._rest.get(key)
        if s is None:
            s = sum(p.result.seconds for p in self.ends(rows, outputs, graphs))
            if self.dense:
                s += self.dense * sum(p.result.seconds for p in self.layer(True, rows, graphs))
            if self.moe_layers:
                s += len(self.moe_layers) * sum(p.result.seconds for p in self.layer(False, rows, graphs))
            if graphs:
                s += self.gpu.launch_s
            self._rest[key] = s
        return s

    def iteration(self, decodes: int, longest: int, pieces: list[tuple[int, int, bool]],
                  loads: Any = None) -> float:
        """Cycles of one iteration: ``decodes`` decode tokens (the longest at context ``longest``) and
        prompt pieces (tokens, start, ends its prompt), all through one pass of the stage's kernels."""
        if not pieces:
            key = (decodes, longest)
            c = self._decoding.get(key)
            if c is None:
                c = self._decoding[key] = self._cycles(decodes, longest, pieces) if decodes else 0.0
            return c
        return self._cycles(decodes, longest, pieces)

    def _cycles(self, decodes: int, longest: int, pieces: Sequence[tuple[int, int, bool]]) -> float:
        graphs = not pieces
        rows = decodes + sum(p[0] for p in pieces)
        outputs = decodes + sum(1 for p in pieces if p[2])
        attention = sum(p.result.seconds for p in self.attention(decodes, longest, pieces, graphs))
        return (self._rest_seconds(rows, graphs, outputs) + len(self.layers) * attention) * self.clock

    def experts(self, decodes: int, pieces: Sequence[tuple[int, int, bool]] = (),
                loads: Any = None) -> tuple[float, float, float]:
        """Cycles of an iteration's MoE layers' dispatch, experts and combine (the gather with it), each
        summed over the stage's MoE layers (0 on a dense stage). For the trace."""
        if not self.moe_layers:
            return (0.0, 0.0, 0.0)
        rows = decodes + sum(p[0] for p in pieces)
        key = rows if not pieces else -rows
        c = self._experts.get(key)
        if c is None:
            sums = [0.0, 0.0, 0.0]
            for p in self._moe(rows, not pieces):
                part = 0 if p.name == "dispatch" else 2 if p.name in ("combine", "expert_gather") else (
                    1 if p.name.startswith("expert_") else None)
                if part is not None:
                    sums[part] += p.result.seconds * len(self.moe_layers) * self.clock
            c = self._experts[key] = (sums[0], sums[1], sums[2])
        return c

    def handoff(self, values: int, prompt: bool = False) -> float:
        """Cycles to hand ``values`` to the next stage's node: each GPU of the group sends its 1/tp share
        over its own NIC (one network step's latency); nothing on one node."""
        if self.stages == 1 or not values:
            return 0.0
        g = self.gpu
        seconds = g.network_latency_s + values * g.elem_bytes / self.tp / g.network_bytes_per_s
        return seconds * self.clock


def station_costs(station: GpuStation, work: Any, prompt_len: int, context: int) -> Any:
    """A stage's ``costing.StageCosts`` on GPUs: one request's prefill of ``prompt_len`` tokens and its
    decode step at ``context``, kernel by kernel as ``work``'s labels name them, the hand-offs after
    each, and the station the scheduler asks (``batches``)."""
    # local: the cost pass's container, imported with the serving run that fills it
    from .costing import StageCosts

    clock = station.clock
    prefill = tuple(kernel_cost(p.result, clock) for _, p in station.parts(0, 0, [(prompt_len, 0, True)]))
    decode = tuple(kernel_cost(p.result, clock) for _, p in station.parts(1, context, []))
    assert len(prefill) == len(work.prefill) and len(decode) == len(work.decode)
    return StageCosts(prefill, decode, station.iteration(1, context, []),
                      station.handoff(work.handoff_prefill.values, True),
                      station.handoff(work.handoff_decode.values), batches=station)


def gpu_stations(spec: Any, mapping: Mapping) -> list[GpuStation]:
    """Each stage's station of a GPU mapping (``builders.gpu.gpu_mapping``)."""
    tp, n = mapping.grid[1], len(mapping.stages)
    return [GpuStation(spec, s.layers, tp, s.embedding, s.lm_head, n) for s in mapping.stages]


def stage_kernels(spec: Any, stations: Sequence[GpuStation]) -> list[tuple[Kernels, Kernels]]:
    """Each station's kernels as the program names them (``builders.gpu.gpu_program``): a prompt's prefill
    and one decode step at the longest context, for the result's breakdowns by kernel and kind."""
    inf = spec.inference
    context = inf.load.prompt_len + max(inf.load.output_len - 1, 1)

    def named(station: GpuStation, decodes: int, longest: int,
              pieces: list[tuple[int, int, bool]]) -> tuple[Kernel, ...]:
        return tuple(Kernel(p.kind, p.name, layer, (), None, p.attention)
                     for layer, p in station.parts(decodes, longest, pieces))

    return [(named(st, 0, 0, [(inf.load.prompt_len, 0, True)]), named(st, 1, context, [])) for st in stations]


def gpu_token_budget(spec: Any) -> int:
    """``inference.scheduler.token_budget`` on a GPU: as given, or under ``auto`` the tokens at which a GEMM's
    arithmetic takes as long as reading its weights (M = r / (2 W / b), the roofline's ridge), in whole
    64-row MMA tiles: below it one more prompt token costs next to nothing, above it its full arithmetic."""
    if spec.inference.scheduler.token_budget != "auto":
        return int(spec.inference.scheduler.token_budget)
    st = GpuStation(spec, (), 1, False, False, 1)
    ridge = st.gpu.sm_flops_per_s * st.gpu.sms * st.gpu.elem_bytes / (2 * st.gpu.hbm_bytes_per_s)
    return max(64, -(-int(ridge) // 64) * 64)
