"""The event engine: one training step of an MoE transformer in weight-streaming execution, as SimPy
processes and resources (docs/model.md §2, §3). Simulated time is in clock cycles.

* the inbound link (``links.WeightStream``, a process) fills the bounded staging buffer with weight
  chunks in order of first use, forward and again for backward, and waits while the buffer is full;
* the outbound link (``links.GradientLink``) carries weight gradients out, FIFO;
* ``_step`` (a process) runs the step: per layer the attention sub-block in G tiles on the whole wafer
  (its weights resident across the tiles), the router, the dispatch over the fabric, the experts, the
  combine; the LM head and loss per tile; then the backward pass in reverse, recomputing forward where
  the activation policy says so; it ends when the last gradient has left.
* the experts: each expert region runs its experts one after another, each op as soon as its weights
  have arrived and its region is free, and frees the weights after their last use. A region whose next
  chunk is already scheduled is laid out without events (the timeline is the same); a region that must
  wait for a chunk the stream has not yet scheduled becomes its own process and waits for it.

A hot expert straggles, a late chunk stalls only its expert, a full buffer stalls the stream: overlap,
stalls and contention emerge from these. The engine never prints or writes files; it returns a
``Trace`` and ``wsesim.analysis.results`` measures it afterwards.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from ..model.costs import op_cost
from ..model.shapes import BACKWARD_OPS, EXPERT_SHARE, FORWARD_OPS, LayerShapes
from .chunks import plan_chunks
from .links import GradientLink, WeightStream
from .plan import ExpertOps, StepPlan, Trace

__all__ = ["simulate"]


class _CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes."""

    def __init__(self) -> None:
        super().__init__()
        self.processed = 0

    def step(self) -> None:
        self.processed += 1
        super().step()


class _Engine:
    def __init__(self, plan: StepPlan) -> None:
        self.plan, hw, m = plan, plan.hw, plan.model
        self.env = _CountingEnvironment()
        self.trace = Trace()
        self.s = LayerShapes(m)
        self.b = m.bytes_per_value
        self.recompute = plan.training.activations == "recompute"
        self.chunks = chunks = plan_chunks(hw, m, self.recompute)
        self.rec_pass, self.keys, self.expert_chunks = chunks.rec_pass, chunks.keys, chunks.expert_chunks
        self.trace.restreamed_for_recompute = chunks.restreamed_for_recompute
        self.chunk_bytes = self.sizes = chunks.sizes
        self.copied_out = np.zeros(len(chunks), dtype=bool)  # whole-wafer chunks already freed
        staging = chunks.staging_bytes  # half for weights in, half for gradients out
        self.stream = WeightStream(self.env, chunks.names, chunks.sizes, staging / 2, hw.io_bytes_per_cycle)
        self.grads = GradientLink(staging / 2, hw.io_bytes_per_cycle)
        R = len(plan.expert_regions)
        members: list[list[int]] = [[] for _ in range(R)]
        for e, r in enumerate(plan.expert_region_of):
            members[r].append(e)
        K = max(len(x) for x in members)
        self.slots = np.full((K, R), -1, dtype=np.int64)  # slots[j, r]: the j-th expert run on region r
        for r, experts in enumerate(members):
            self.slots[: len(experts), r] = experts
        self._expert_costs()
        self._fabric_times: dict[tuple[int, bool], tuple[float, float]] = {}

    # --------------------------------------------------------------------------------- weight chunks
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
        self.op_bytes = {op: self.s.expert_op_bytes(op) for op in EXPERT_SHARE}

    def _op(self, name: str, flops: float, weight_bytes: float, args: dict[str, Any],
            repeat: int = 1, per: str = "") -> Generator[Any, Any, None]:
        """``repeat`` identical ops on the whole wafer, back to back (one span each)."""
        cost = op_cost(self.plan.hw, *self.plan.attention_shape, flops, weight_bytes)
        start, cycles = self.env.now, cost.cycles
        for i in range(repeat):
            span_args = {**args, **({per: i} if per else {}), "flops": flops, "weight_bytes": weight_bytes,
                         "bound": cost.bound}
            self.trace.spans.append(("step", name, start + i * cycles, start + (i + 1) * cycles, span_args))
        self.trace.executed_flops += repeat * flops
        yield self.env.timeout(repeat * cycles)

    def _attention(self, layer: int, pass_: str, backward: bool) -> Generator[Any, Any, None]:
        """G tiles of B sequences through the attention sub-block on the whole wafer. The weights stay
        resident, but each tile's op must feed them to the PEs again. Backward does 2× the forward work."""
        t, s = self.plan.training, self.s
        tokens = self.plan.batch_per_tile * t.seq_len
        factor = 2.0 if backward else 1.0
        flops = factor * tokens * (s.attention_proj_flops() + s.attention_core_flops(t.seq_len))
        yield from self._op("attention", flops, factor * s.attention_params * self.b,
                            {"layer": layer, "pass": pass_, "tokens": tokens}, repeat=self.plan.tiles, per="tile")

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

    def _experts(self, layer: int, pass_: str, chunk_pass: str, backward: bool) -> Generator[Any, Any, None]:
        """All expert regions in parallel; each runs its experts' ops in turn, each op when its weights
        have arrived (an op whose weights came in several pieces runs piece by piece). Laid out with array
        arithmetic while the needed chunks are scheduled; a region that needs a chunk the stream has not
        reached yet continues as a process that waits for it."""
        env, stream, start = self.env, self.stream, self.env.now
        ops = BACKWARD_OPS if backward else FORWARD_OPS
        last_use = pass_ != "recompute" or chunk_pass == "rec"  # backward copies serve recompute, then backward
        R = self.slots.shape[1]
        t = np.full(R, start)
        stopped = np.zeros(R, dtype=bool)  # regions continuing as processes
        resume: list[tuple[int, int, int, int]] = []  # (region, slot, op index, piece)
        grads: list[tuple[np.ndarray, float, int, int, np.ndarray]] = []  # (cycles, bytes, slot, op, regions)
        for j, experts in enumerate(self.slots):
            for k, op in enumerate(ops):
                chunks = self.expert_chunks[chunk_pass, layer, op]
                pieces = chunks.shape[0]
                for piece in range(pieces):
                    regions = np.flatnonzero((experts >= 0) & ~stopped)
                    if not len(regions):
                        continue
                    ex = experts[regions]
                    index = chunks[piece, ex]
                    arrival = stream.arrival[index]
                    unscheduled = np.isnan(arrival)
                    if unscheduled.any():
                        resume.extend((int(r), j, k, piece) for r in regions[unscheduled])
                        stopped[regions[unscheduled]] = True
                        regions, ex, index, arrival = (a[~unscheduled] for a in (regions, ex, index, arrival))
                    begin = np.maximum(t[regions], arrival)
                    end = begin + self.cost[op, backward][layer, ex] / pieces
                    self._record(op, pass_, layer, backward, ex, begin, end, begin - t[regions], pieces)
                    t[regions] = end
                    if last_use:
                        stream.free_at(end, self.chunk_bytes[index])
                    if backward and piece == pieces - 1:
                        grads.append((end, self.op_bytes[op], j, k, regions))
        ends = [t[~stopped].max(initial=start)]
        if resume:
            procs = [env.process(self._region(r, j, k, piece, float(t[r]), layer, pass_, chunk_pass, backward,
                                              last_use, grads)) for r, j, k, piece in resume]
            done = yield simpy.AllOf(env, procs)
            ends.extend(done.values())
        end = max(ends)
        if end > env.now:
            yield env.timeout(end - env.now)
        self.trace.spans.append(("step", "experts", start, env.now, {"layer": layer, "pass": pass_}))
        if backward:
            at = np.concatenate([g[0] for g in grads])
            nbytes, slot, op_index, region = (np.concatenate([np.broadcast_to(g[i], len(g[0])) for g in grads])
                                              for i in range(1, 5))
            # in order of hand-over; in one cycle by (slot, op, region), whether laid out or run as a process
            order = np.lexsort((region, op_index, slot, at))
            self.grads.send(at[order], nbytes[order])
            self.trace.gradients.append(("expert grads", {"layer": layer, "count": len(at)}))
            yield from self._gradient_room({"layer": layer, "pass": pass_})

    def _region(self, r: int, j0: int, k0: int, p0: int, t: float, layer: int, pass_: str, chunk_pass: str,
                backward: bool, last_use: bool,
                grads: list[tuple[np.ndarray, float, int, int, np.ndarray]]) -> Generator[Any, Any, float]:
        """One region's remaining ops from slot ``j0``, op ``k0``, piece ``p0``, as a process that waits
        for chunks the stream has not scheduled yet (the same timeline as ``_experts``' layout)."""
        env, stream = self.env, self.stream
        ops = BACKWARD_OPS if backward else FORWARD_OPS
        first = True
        for j in range(j0, self.slots.shape[0]):
            e = int(self.slots[j, r])
            if e < 0:
                break
            for k in range(k0 if j == j0 else 0, len(ops)):
                op = ops[k]
                chunks = self.expert_chunks[chunk_pass, layer, op]
                pieces = chunks.shape[0]
                for piece in range(p0 if first else 0, pieces):
                    first = False
                    i = int(chunks[piece, e])
                    if i >= stream.next and t > env.now:
                        yield env.timeout(t - env.now)
                    if i >= stream.next:  # (checked again: the stream may have got there meanwhile)
                        yield stream.wait(i)
                    free_at, begin = t, max(t, float(stream.arrival[i]))
                    t = begin + float(self.cost[op, backward][layer, e]) / pieces
                    self._record(op, pass_, layer, backward, np.array([e]), np.array([begin]), np.array([t]),
                                 np.array([begin - free_at]), pieces)
                    if last_use:
                        stream.free_at(np.array([t]), np.array([self.sizes[i]]))
                    if backward and piece == pieces - 1:
                        grads.append((np.array([t]), self.op_bytes[op], j, k, np.array([r])))
        return t

    def _record(self, op: str, pass_: str, layer: int, backward: bool, experts: np.ndarray, start: np.ndarray,
                end: np.ndarray, wait: np.ndarray, pieces: int) -> None:
        self.trace.expert_ops.append(ExpertOps(op, pass_, layer, backward, experts, start, end, wait,
                                               self.compute_bound[op, backward][layer, experts], pieces))
        self.trace.executed_flops += self.s.expert_op_flops(op, float(self.plan.tokens[layer, experts].sum()),
                                                            backward) / pieces

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
        s, t = self.s, self.plan.training
        tokens = self.plan.global_batch * t.seq_len
        args = {"layer": layer, "pass": pass_, "tokens": tokens}
        yield from self._wait((chunk_pass, layer, "router"), args)
        factor = 2.0 if backward else 1.0
        router_flops = factor * tokens * s.router_stage_flops()
        # the shared expert's weights feed the PEs with the router's (they were counted as FLOPs already)
        yield from self._op("router", router_flops, factor * s.router_stage_params * self.b, args)
        yield from self._fabric("combine" if backward else "dispatch", layer, pass_, reverse=False)
        yield from self._experts(layer, pass_, chunk_pass, backward)
        yield from self._fabric("dispatch" if backward else "combine", layer, pass_, reverse=True)

    def _forward(self, layer: int, pass_: str, chunk_pass: str) -> Generator[Any, Any, None]:
        yield from self._wait((chunk_pass, layer, "attention"), {"layer": layer, "pass": pass_})
        yield from self._attention(layer, pass_, backward=False)
        yield from self._moe(layer, pass_, chunk_pass, backward=False)

    def _backward(self, layer: int) -> Generator[Any, Any, None]:
        s, b = self.s, self.b
        args = {"layer": layer, "pass": "bwd"}
        yield from self._moe(layer, "bwd", "bwd", backward=True)
        yield from self._gradient("router grad", s.router_stage_params * b, args)
        yield from self._wait(("bwd", layer, "attention"), args)
        if self.recompute:  # one tile's attention internals fit at a time: recompute them per tile
            yield from self._attention(layer, "recompute", backward=False)
        yield from self._attention(layer, "bwd", backward=True)
        yield from self._gradient("attention grad", s.attention_params * b, args)

    def _lm_head(self) -> Generator[Any, Any, None]:
        """LM head and loss per tile, forward and backward together (its weights resident)."""
        s, t = self.s, self.plan.training
        weight_bytes = (s.lm_head_params or s.embedding_params) * self.b
        if s.lm_head_params:
            yield from self._wait(("lm_head",), {"pass": "fwd"})
        tokens = self.plan.batch_per_tile * t.seq_len
        yield from self._op("lm_head", 3 * tokens * s.lm_head_flops(), 3 * weight_bytes,
                            {"pass": "fwd+bwd", "tokens": tokens}, repeat=self.plan.tiles, per="tile")
        if s.lm_head_params:
            yield from self._gradient("lm_head grad", weight_bytes, {})

    def _step(self) -> Generator[Any, Any, None]:
        m, env = self.plan.model, self.env
        yield from self._wait(("embedding",), {"pass": "fwd"})
        for layer in range(m.layers):
            yield from self._forward(layer, "fwd", "fwd")
        yield from self._lm_head()
        for layer in reversed(range(m.layers)):
            if self.recompute:
                yield from self._forward(layer, "recompute", self.rec_pass)
            else:
                yield from self._wait(("bwd", layer, "router"), {"layer": layer, "pass": "bwd"})
            yield from self._backward(layer)
        yield from self._gradient("embedding grad", self.s.embedding_params * self.b, {})
        if self.grads.link_free_at > env.now:  # the step ends when the last gradient has left
            start = env.now
            yield env.timeout(self.grads.link_free_at - start)
            self.trace.spans.append(("step", "gradient_drain", start, env.now, {}))

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
