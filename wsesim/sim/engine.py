"""The event engine: one training step of an MoE transformer in weight-streaming execution, as SimPy
processes and resources (docs/model.md §2, §3). Simulated time is in clock cycles.

* the inbound link (``links.WeightStream``, a process) fills the bounded staging buffer with weight
  chunks in order of first use, forward and again for backward, and waits while the buffer is full;
* the outbound link (``links.GradientLink``) carries weight gradients out, FIFO;
* ``_step`` (a process) runs the step: per layer the attention sub-block in G tiles on the whole wafer
  (its weights resident across the tiles), then an MoE layer's router, dispatch over the fabric, experts
  and combine, or a dense layer's FFN on the whole wafer; the LM head and loss per tile; then the backward
  pass in reverse, recomputing forward where the activation policy says so. With gradient accumulation it
  does that once per micro-batch, back to back (every weight streams in again for each); it ends when the
  last gradient has left (and, in a cluster, when its sum has come through the reduce tree: ``cluster``).
* the experts: each expert region runs its experts one after another, each op as soon as its weights
  have arrived and its region is free, and frees the weights after their last use. A region whose next
  chunk is already scheduled is laid out without events (the timeline is the same); the regions that
  reach a chunk the stream has not scheduled continue together in one loop that waits for the earliest
  chunk any of them needs (``experts.py``). In place, the whole wafer runs every expert in turn.

A hot expert straggles, a late chunk stalls only its expert, a full buffer stalls the stream: overlap,
stalls and contention emerge from these. The engine never prints or writes files; it returns a
``Trace`` and ``wsesim.analysis.results`` measures it afterwards.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from ..config.specs import DTYPE_BYTES
from ..model.costs import op_cost
from ..model.optimizer import optimizer_step_cycles
from ..model.shapes import EXPERT_SHARE, LayerShapes, copy_op_flops, wafer_op
from .chunks import plan_chunks
from .cluster import io_rate
from .counting import CountingEnvironment
from .experts import in_place_phase, regions_phase
from .links import GradientLink, WeightStream
from .plan import StepPlan, Trace

__all__ = ["simulate"]


class _Engine:
    def __init__(self, plan: StepPlan) -> None:
        self.plan, hw, m = plan, plan.hw, plan.model
        self.env = CountingEnvironment()
        self.trace = Trace()
        self.s = LayerShapes(m)
        self.b = m.bytes_per_value
        self.g = DTYPE_BYTES[plan.training.weight_gradient_dtype]  # bytes per weight gradient value
        self.recompute = plan.training.activations == "recompute"
        self.chunks = chunks = plan_chunks(hw, m, self.recompute, plan.micro_batches)
        self.rec_pass, self.keys, self.expert_chunks = chunks.rec_pass, chunks.keys, chunks.expert_chunks
        self.trace.restreamed_for_recompute = chunks.restreamed_for_recompute
        self.chunk_bytes = self.sizes = chunks.sizes
        self.copied_out = np.zeros(len(chunks), dtype=bool)  # whole-wafer chunks already freed
        staging = chunks.staging_bytes  # half for weights in, half for gradients out
        rate, latency = io_rate(hw, plan.tree), (plan.tree.latency if plan.tree else 0.0)
        self.stream = WeightStream(self.env, chunks.names, chunks.sizes, staging / 2, rate, latency)
        self.grads = GradientLink(staging / 2, rate)
        R = len(plan.expert_regions)
        members: list[list[int]] = [[] for _ in range(R)]
        for e, r in enumerate(plan.expert_region_of):
            members[r].append(e)
        K = max((len(x) for x in members), default=0)
        self.slots = np.full((K, R), -1, dtype=np.int64)  # slots[j, r]: the j-th expert run on region r
        for r, experts in enumerate(members):
            self.slots[: len(experts), r] = experts
        self._expert_costs()
        self._fabric_times: dict[tuple[int, bool], tuple[float, float]] = {}

    # --------------------------------------------------------------------------------- weight chunks
    def _use_micro_batch(self, i: int) -> None:
        """Index micro-batch i's copy of every chunk: the first micro-batch's, ``i · per_micro_batch`` on."""
        c, off = self.chunks, i * self.chunks.per_micro_batch
        self.keys = {k: (a + off, b + off) for k, (a, b) in c.keys.items()} if off else c.keys
        self.expert_chunks = {k: v + off for k, v in c.expert_chunks.items()} if off else c.expert_chunks

    def _wait(self, key: tuple[Any, ...], args: dict[str, Any]) -> Generator[Any, Any, None]:
        """Wait (a stall of the step) for the weights of ``key``: whole-wafer weights (attention, router,
        LM head, embedding) are copied out of the staging buffer into their resident place as each piece
        arrives, so the buffer never has to hold all of them at once."""
        env, stream, start = self.env, self.stream, self.env.now
        first, last = self.keys[key]
        for i in range(first, last + 1):
            if i >= stream.next:
                yield stream.wait(i)
            arrival = float(stream.arrival[i])
            if arrival > env.now:
                yield env.timeout(arrival - env.now)
            if not self.copied_out[i]:  # a recompute and its backward wait for the same copy: free it once
                self.copied_out[i] = True
                stream.free(self.sizes[i])
        if env.now > start:
            self.trace.spans.append(("step", "weight_stall", start, env.now, dict(args)))

    # ---------------------------------------------------------------------------------- compute ops
    def _expert_costs(self) -> None:
        """Cycles of every expert op (the plan's, from the cost model): arrays [layer, expert]."""
        self.cost = self.plan.expert_costs.cycles
        self.compute_bound = self.plan.expert_costs.compute_bound  # else bound by the weight feed
        self.op_bytes = {op: self.s.expert_op_bytes(op, self.g) for op in EXPERT_SHARE}  # their gradients' bytes

    def _op(self, name: str, flops: float, weight_bytes: float, args: dict[str, Any],
            repeat: int = 1, per: str = "", useful: bool = True) -> Generator[Any, Any, None]:
        """``repeat`` identical ops on the whole wafer, back to back (one span each). ``flops`` not
        ``useful`` are datapath work that is no arithmetic (copies): timed, not counted as FLOPs."""
        cost = op_cost(self.plan.hw, *self.plan.attention_shape, flops, weight_bytes)
        start, cycles = self.env.now, cost.cycles
        for i in range(repeat):
            span_args = {**args, **({per: i} if per else {}), "flops": flops, "weight_bytes": weight_bytes,
                         "bound": cost.bound}
            self.trace.spans.append(("step", name, start + i * cycles, start + (i + 1) * cycles, span_args))
        if useful:
            self.trace.executed_flops += repeat * flops
        yield self.env.timeout(repeat * cycles)

    def _attention(self, layer: int, pass_: str, backward: bool) -> Generator[Any, Any, None]:
        """G tiles of B sequences through the attention sub-block on the whole wafer. The weights stay
        resident, but each tile's op must feed them to the PEs again. Backward does 2× the forward work."""
        tokens = self.plan.batch_per_tile * self.plan.training.seq_len
        flops, weight_bytes = self._wafer_op("attention", tokens, backward)
        yield from self._op("attention", flops, weight_bytes, {"layer": layer, "pass": pass_, "tokens": tokens},
                            repeat=self.plan.tiles, per="tile")

    def _wafer_op(self, name: str, tokens: int, backward: bool) -> tuple[float, float]:
        t = self.plan.training
        return wafer_op(self.s, name, tokens, t.seq_len, t.attention_kernel, backward)

    def _copies(self, name: str, layer: int, pass_: str, backward: bool) -> Generator[Any, Any, None]:
        """In place, on the whole wafer: ``expand`` makes each token's k copies, ``weighted_sum`` adds the
        k expert outputs weighted by their router probabilities (docs/model.md §3)."""
        flops, useful = copy_op_flops(self.s, self.plan.global_batch * self.plan.training.seq_len, name, backward)
        yield from self._op(name, flops, 0.0, {"layer": layer, "pass": pass_, "copies": self.plan.model.top_k},
                            useful=useful)

    def _fabric(self, name: str, layer: int, pass_: str, reverse: bool) -> Generator[Any, Any, None]:
        nbytes = self.plan.tokens[layer].astype(float) * self.plan.model.hidden_size * self.b
        key = (layer, reverse)  # forward, recompute and backward move the same bytes: time them once
        if key not in self._fabric_times:
            self._fabric_times[key] = self.plan.dispatch(nbytes, reverse)
        cycles, max_load = self._fabric_times[key]
        total = float(nbytes.sum())
        self.trace.max_link_load_bytes = max(self.trace.max_link_load_bytes, max_load)
        if reverse:
            self.trace.combined_bytes += total
        else:
            self.trace.dispatched_bytes += total
        start = self.env.now
        yield self.env.timeout(cycles)
        self.trace.spans.append(("step", name, start, self.env.now,
                                 {"layer": layer, "pass": pass_, "bytes": total, "max_link_load_bytes": max_load}))

    def _gradient_room(self, args: dict[str, Any], incoming: float = 0.0) -> Generator[Any, Any, None]:
        """Stall while the outbound buffer holds more gradients than fit (with ``incoming`` bytes more)."""
        ready = self.grads.room_at(self.env.now, incoming)
        if ready > self.env.now:
            start = self.env.now
            yield self.env.timeout(ready - start)
            self.trace.spans.append(("step", "gradient_stall", start, self.env.now, dict(args)))

    def _gradient(self, name: str, nbytes: float, args: dict[str, Any]) -> Generator[Any, Any, None]:
        """Hand one gradient to the outbound link, once its buffer has room for it."""
        yield from self._gradient_room(args, nbytes)
        self.grads.send(np.array([self.env.now]), np.array([nbytes]))
        self.trace.gradients.append((name, args))

    # ------------------------------------------------------------------------------------ the step
    def _moe(self, layer: int, pass_: str, chunk_pass: str, backward: bool) -> Generator[Any, Any, None]:
        tokens = self.plan.global_batch * self.plan.training.seq_len
        args = {"layer": layer, "pass": pass_, "tokens": tokens}
        yield from self._wait((chunk_pass, layer, "router"), args)
        # the shared expert's weights feed the PEs with the router's (they were counted as FLOPs already)
        yield from self._op("router", *self._wafer_op("router", tokens, backward), args)
        if self.plan.moe_mapping == "in_place":
            yield from self._copies("weighted_sum" if backward else "expand", layer, pass_, backward)
            yield from in_place_phase(self, layer, pass_, chunk_pass, backward)
            yield from self._copies("expand" if backward else "weighted_sum", layer, pass_, backward)
            return
        yield from self._fabric("combine" if backward else "dispatch", layer, pass_, reverse=False)
        yield from regions_phase(self, layer, pass_, chunk_pass, backward)
        yield from self._fabric("dispatch" if backward else "combine", layer, pass_, reverse=True)

    def _ffn(self, layer: int, pass_: str, chunk_pass: str, backward: bool) -> Generator[Any, Any, None]:
        """A dense layer's FFN on the whole wafer, on the G·B sequences of the micro-batch at once (like the
        experts, it sees the concatenated tiles), its weights streamed per layer like attention's."""
        tokens = self.plan.global_batch * self.plan.training.seq_len
        args = {"layer": layer, "pass": pass_, "tokens": tokens}
        yield from self._wait((chunk_pass, layer, "ffn"), args)
        yield from self._op("ffn", *self._wafer_op("ffn", tokens, backward), args)

    def _forward(self, layer: int, pass_: str, chunk_pass: str) -> Generator[Any, Any, None]:
        m = self.plan.model
        yield from self._wait((chunk_pass, layer, "attention"), {"layer": layer, "pass": pass_})
        # a recompute rebuilds the MoE/FFN input with attention unless its output was kept (once) or the
        # block is parallel (the FFN reads the layer's input)
        if pass_ != "recompute" or (self.plan.training.attention_recompute == "twice" and not m.parallel_block):
            yield from self._attention(layer, pass_, backward=False)
        if m.is_dense(layer):
            yield from self._ffn(layer, pass_, chunk_pass, backward=False)
        else:
            yield from self._moe(layer, pass_, chunk_pass, backward=False)

    def _backward(self, layer: int) -> Generator[Any, Any, None]:
        s, b = self.s, self.g
        args = {"layer": layer, "pass": "bwd"}
        if self.plan.model.is_dense(layer):
            yield from self._ffn(layer, "bwd", "bwd", backward=True)
            yield from self._gradient("ffn grad", s.ffn_params * b, args)
        else:
            yield from self._moe(layer, "bwd", "bwd", backward=True)
            yield from self._gradient("router grad", s.router_stage_params * b, args)
        yield from self._wait(("bwd", layer, "attention"), args)
        if self.recompute:  # one tile's attention internals fit at a time: recompute them per tile
            yield from self._attention(layer, "recompute", backward=False)
        yield from self._attention(layer, "bwd", backward=True)
        yield from self._gradient("attention grad", s.attention_params * b, args)

    def _lm_head(self) -> Generator[Any, Any, None]:
        """LM head and loss per tile, forward and backward together (its weights resident)."""
        s = self.s
        if s.lm_head_params:
            yield from self._wait(("lm_head",), {"pass": "fwd"})
        tokens = self.plan.batch_per_tile * self.plan.training.seq_len
        yield from self._op("lm_head", *self._wafer_op("lm_head", tokens, False),
                            {"pass": "fwd+bwd", "tokens": tokens}, repeat=self.plan.tiles, per="tile")
        if s.lm_head_params:
            yield from self._gradient("lm_head grad", s.lm_head_params * self.g, {})

    def _micro_batch(self) -> Generator[Any, Any, None]:
        """One forward and backward pass over the micro-batch; its gradients stream out as they come (the
        next micro-batch does not wait for them: MemoryX accumulates them, docs/model.md §2.4)."""
        m = self.plan.model
        yield from self._wait(("embedding",), {"pass": "fwd"})
        for layer in range(m.layers):
            yield from self._forward(layer, "fwd", "fwd")
        yield from self._lm_head()
        for layer in reversed(range(m.layers)):
            if self.recompute:
                yield from self._forward(layer, "recompute", self.rec_pass)
            else:
                first = "ffn" if m.is_dense(layer) else "router"
                yield from self._wait(("bwd", layer, first), {"layer": layer, "pass": "bwd"})
            yield from self._backward(layer)
        yield from self._gradient("embedding grad", self.s.embedding_params * self.g, {})

    def _step(self) -> Generator[Any, Any, None]:
        env, tree = self.env, self.plan.tree
        for i in range(self.plan.micro_batches):
            self._use_micro_batch(i)
            yield from self._micro_batch()
        if self.grads.link_free_at > env.now:  # the step ends when the last gradient has left
            start = env.now
            yield env.timeout(self.grads.link_free_at - start)
            self.trace.spans.append(("step", "gradient_drain", start, env.now, {}))
        if tree is not None and self.grads.link_free_at + tree.latency > env.now:  # ... and its sum has arrived
            start = env.now
            yield env.timeout(self.grads.link_free_at + tree.latency - start)
            self.trace.spans.append(("step", "reduce_drain", start, env.now, {"levels": tree.depth}))
        start, cycles = env.now, optimizer_step_cycles(self.plan.hw, self.plan.model)  # MemoryX updates the weights
        yield env.timeout(cycles)  # before the next step's first chunk can leave (docs/model.md §2.5)
        self.trace.spans.append(("step", "optimizer_step", start, env.now, {"cycles": cycles}))

    def run(self) -> Trace:
        env = self.env
        env.process(self.stream.process())
        done = env.process(self._step())
        env.run(until=done)
        tr = self.trace
        tr.step_cycles, tr.events = float(env.now), env.processed
        tr.io_bytes_in, tr.io_bytes_out = self.stream.bytes_in, self.grads.bytes_out
        tr.io_in = self.stream.schedule()
        tr.staging_held_at_end = self.stream.held_after_all_frees()
        tr.gradient_batches = self.grads.batches
        return tr


def simulate(plan: StepPlan) -> Trace:
    """Simulate one training step; returns the trace (spans in cycles) and counters."""
    return _Engine(plan).run()
