"""docs/architecture.md's two recipes followed: a new workload (a builder returning a ``Program`` of the
vocabulary's ops, costed by the cost pass, run by every executor of ``ENGINES``, and its steps one entry of
the one runner's ``COMPOSERS``) and a new executor (a
subclass of ``sim.executors.executor.Executor`` writing only its mechanism), each built here as a toy. If a recipe's
text changes, this file changes with it: the test is the recipe followed."""

from __future__ import annotations

from collections.abc import Generator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from wsesim.config.loader import load_experiment_data
from wsesim.config.tables import entry
from wsesim.experiments import runner
from wsesim.experiments.runs import Composer, Run
from wsesim.experiments.training import make_plan, random_streams
from wsesim.model.routing import route_tokens
from wsesim.model.shapes import LayerShapes
from wsesim.model.vocabulary import Copy, Gradient, OpKind, Pass, Phase, Tensor, Track
from wsesim.sim.cost.costing import Costs, cost_program
from wsesim.sim.executors.engines import ENGINES
from wsesim.sim.executors.executor import Executor
from wsesim.sim.programs.builders.training import training_program
from wsesim.sim.programs.chunks import ChunkPlan
from wsesim.sim.programs.cluster import io_rate
from wsesim.sim.programs.plan import Span, StepPlan, Trace
from wsesim.sim.programs.program import Drain, GradientOut, Op, OptimizerStep, Program, WaferOp, Weights

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 1, "activations": "store"},
        "simulation": {"granularity": "pe"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96}


def _plan(overrides: dict[str, Any] | None = None) -> StepPlan:
    spec = load_experiment_data(TINY, overrides={**DENSE, **(overrides or {})}).spec
    place_rng, route_rng = random_streams(spec.training.seed)
    t = spec.training
    tokens = route_tokens(spec.model, t, t.batch_per_tile * t.tiles * t.seq_len, route_rng)
    return make_plan(spec, t.batch_per_tile, tokens, place_rng, 1)[0]


# ------------------------------------------------------------------------------------ a new workload


def ffn_only_program(plan: StepPlan) -> Program:
    """A toy workload's builder (the recipe's step 1): a dense model's FFNs alone, trained — per layer
    forward its FFN weights and the FFN on the micro-batch's tokens, then per layer backward (last
    first) the backward copy's weights, the FFN backward and its gradient out; the step ends when the
    last gradient has left and MemoryX has applied them. Shapes only (``LayerShapes``), no cycles; the
    program carries the chunk plan its weight waits name: its own, of the tensors it streams."""
    s, m, t = LayerShapes(plan.model), plan.model, plan.training
    tokens = plan.global_batch * t.seq_len
    fwd_flops, fwd_bytes = tokens * s.ffn_flops(), s.ffn_params * m.bytes_per_value
    body: list[Op] = []
    for layer in range(m.layers):
        args = {"layer": layer, "pass": Pass.FWD, "tokens": tokens}
        body += [Weights((Copy.FWD, layer, Tensor.FFN), args),
                 WaferOp(OpKind.FFN, Pass.FWD, layer, fwd_flops, fwd_bytes, args=args)]
    for layer in reversed(range(m.layers)):
        args = {"layer": layer, "pass": Pass.BWD, "tokens": tokens}
        body += [Weights((Copy.BWD, layer, Tensor.FFN), args),
                 WaferOp(OpKind.FFN, Pass.BWD, layer, 2 * fwd_flops, 2 * fwd_bytes, args=args),
                 GradientOut(Gradient.FFN, s.ffn_params * 4.0, {"layer": layer, "pass": Pass.BWD})]
    # the weights it streams, in the order it first waits for them: each FFN's forward copy, then its
    # backward copy, last layer first (each under half of the weights' buffer, so one chunk each)
    names = [(Copy.FWD, layer, Tensor.FFN) for layer in range(m.layers)] + [
        (Copy.BWD, layer, Tensor.FFN) for layer in reversed(range(m.layers))]
    staging = plan.hw.runtime.staging_bytes * plan.hw.pes
    assert fwd_bytes <= staging / 4
    sizes = np.full(len(names), fwd_bytes)
    chunks = ChunkPlan(tuple(names), sizes, {key: (i, i) for i, key in enumerate(names)}, {},
                       recompute=False, rec_pass=Copy.BWD, staging_bytes=staging, per_micro_batch=len(names))
    return Program(tuple(body), 1, (Drain(OpKind.GRADIENT_DRAIN), OptimizerStep()), chunks)


def test_a_new_workload_is_a_builder_costed_once_and_run_by_every_executor() -> None:
    """tiny-moe made dense (2 layers, hidden 64, SwiGLU FFN of 96): an FFN has 3·64·96 = 18,432 weights,
    2·18,432 = 36,864 FLOPs a token forward; 2 sequences of 32 tokens make 64 tokens. The step executes
    2 layers × 64 tokens × 36,864 × (1 forward + 2 backward) = 14,155,776 FLOPs, whichever executor runs
    it, and every FFN span lasts the cycles the cost pass gave its op."""
    plan = _plan()
    program = ffn_only_program(plan)  # 1. the builder
    assert [op.kind for op in program.body] == [OpKind.WEIGHTS, OpKind.FFN] * 2 + [
        OpKind.WEIGHTS, OpKind.FFN, OpKind.GRADIENT] * 2
    costs = cost_program(program, plan)  # 2. the cost pass, once, before anything runs
    assert set(costs.wafer) == {op for op in program.body if isinstance(op, WaferOp)}
    traces = {name: entry(ENGINES, name, "simulation.engine")(plan, program, costs)  # 3. every executor
              for name in ENGINES}
    fast, ref = traces["fast"], traces["reference"]
    assert fast.executed_flops == ref.executed_flops == 2 * 64 * 36_864 * 3 == 14_155_776
    assert fast.step_cycles == ref.step_cycles > sum(c.cycles for c in costs.wafer.values())
    assert [(s.name, s.start, s.end) for s in fast.spans] == [(s.name, s.start, s.end) for s in ref.spans]
    ffn = [s for s in fast.spans if s.name == Phase.FFN]
    assert [s.end - s.start for s in ffn] == [costs.wafer[op].cycles for op in program.body
                                             if isinstance(op, WaferOp)]
    assert [s.name for s in fast.spans][-1] == Phase.OPTIMIZER_STEP


def _toy_steps(plan: StepPlan, feasible: bool, steps: list[str]) -> Composer:
    """The toy's steps for the one runner (the recipe's last step), each noting that it ran."""
    laid = SimpleNamespace(feasible=feasible, reason="" if feasible else "a toy that does not fit")

    def note(step: str, value: Any = None) -> Any:
        steps.append(step)
        return value

    return Composer(
        refuse=lambda spec, layout, options: note("refuse" if layout is None else "refuse laid out"),
        lay_out=lambda spec, options: note("lay out", laid),
        infeasible=lambda spec, layout, start: note("infeasible", Run(layout.reason)),
        build=lambda spec, layout, options: note("build", (plan, ffn_only_program(plan))),
        cost=lambda spec, plan, program: note("cost", cost_program(program, plan)),
        execute=lambda spec, plan, program, costs: note("execute", ENGINES["fast"](plan, program, costs)),
        measure=lambda spec, layout, plan, program, costs, trace, start: note(
            "measure", Run(trace.executed_flops, trace, program, costs, plan)))


@pytest.mark.parametrize("feasible", [True, False])
def test_a_new_workload_is_one_entry_of_the_one_runner(feasible: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy's steps as a ``runs.Composer``, one entry in ``runner.COMPOSERS`` under its spec's kind and
    its hardware's: ``runner.run`` takes them in its one order — refused before it is laid out and again
    once it is, built, costed, executed, measured — and its result is the executor's 14,155,776 FLOPs
    (as above); a layout that does not fit is a result with its reason, nothing built."""
    steps: list[str] = []
    monkeypatch.setitem(runner.COMPOSERS, ("toy", "hardware"), _toy_steps(_plan(), feasible, steps))
    run = runner.run(SimpleNamespace(kind="toy", hardware=SimpleNamespace(kind="hardware")))
    if feasible:
        assert steps == ["refuse", "lay out", "refuse laid out", "build", "cost", "execute", "measure"]
        assert run.result == run.trace.executed_flops == 14_155_776
    else:
        assert steps == ["refuse", "lay out", "infeasible"]
        assert (run.result, run.trace) == ("a toy that does not fit", None)


# ------------------------------------------------------------------------------------ a new executor


class RoomyExecutor(Executor):
    """A toy executor (the recipe's step 1): the links in closed form, for a step whose every weight
    chunk fits the staging buffer at once (so nothing waits for room) and whose ops take their weights
    once they are in (a compute model that is not pipelined): chunk i arrives when the inbound link has
    carried chunks 0…i back to back; gradients leave FIFO at the same rate. No experts, no cluster.
    The loop, the op-kind table, the fabric op, the optimizer step and the stall spans are the base's."""

    def __init__(self, plan: StepPlan | None, program: Program, costs: Costs) -> None:
        super().__init__(plan, program, costs)
        assert plan is not None and program.chunks is not None and not costs.pipelined
        assert plan.tree is None and not plan.model.experts, "a toy: one wafer, dense"
        chunks = program.chunks
        assert float(chunks.sizes.sum()) <= chunks.staging_bytes / 2, "a toy: every chunk fits at once"
        self.rate = io_rate(plan.hw, None)
        self.arrival = chunks.sizes.cumsum() / self.rate
        self.keys, self.link_free_at = chunks.keys, 0.0

    # 2. the mechanism, and nothing else
    def _micro_batch(self, i: int) -> None:
        assert i == 0, "a toy: one micro-batch"

    def _start_links(self) -> None:
        pass  # closed form: nothing runs beside the step

    def _link_records(self, tr: Trace) -> None:
        assert self.program.chunks is not None
        tr.io_bytes_in = float(self.program.chunks.sizes.sum())

    def _weights(self, op: Weights) -> Generator[Any, Any, None]:
        start, last = self.env.now, self.keys[op.key][1]
        if self.arrival[last] > start:
            yield self.env.timeout(float(self.arrival[last]) - start)
        self._since(start, Phase.WEIGHT_STALL, op.args)

    def _wafer(self, op: WaferOp) -> Generator[Any, Any, None]:
        cycles, start = self.costs.wafer[op].cycles, self.env.now
        yield self.env.timeout(op.runs * cycles)
        self.trace.spans.append(Span(Track.STEP, op.kind, start, self.env.now, dict(op.args)))
        self.trace.executed_flops += op.executed_flops

    def _gradient(self, op: GradientOut) -> Generator[Any, Any, None]:
        self.link_free_at = max(self.link_free_at, self.env.now) + op.nbytes / self.rate
        self.trace.gradients.append((op.gradient, dict(op.args)))
        yield from ()

    def _gradient_drain(self, op: Drain) -> Generator[Any, Any, None]:
        start = self.env.now
        if self.link_free_at > start:
            yield self.env.timeout(self.link_free_at - start)
        self._since(start, Phase.GRADIENT_DRAIN, op.args)

    def _experts(self, op: Any) -> Generator[Any, Any, None]:
        raise NotImplementedError("a toy: no experts")

    _reduce_drain = _experts


def roomy_simulate(plan: StepPlan | None, program: Program, costs: Costs) -> Trace:
    """The executor's function (the recipe's step 2): ``(plan, program, costs) -> Trace``."""
    return RoomyExecutor(plan, program, costs).run()


@pytest.mark.parametrize("build", ["builder", "toy"])
def test_a_new_executor_gives_the_fast_engines_step(build: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The toy executor on a dense step whose weights all fit the staging buffer: the training builder's
    own program and the toy workload's above. Registered in ``ENGINES`` (its function),
    it gives the fast engine's step cycles, spans of stalls and drains and executed FLOPs."""
    plan = _plan({"hardware.runtime.staging_buffer": "16 KiB"})
    program = training_program(plan) if build == "builder" else ffn_only_program(plan)
    costs = cost_program(program, plan)
    monkeypatch.setitem(ENGINES, "roomy", roomy_simulate)  # 3. registered by name
    roomy = entry(ENGINES, "roomy", "simulation.engine")(plan, program, costs)
    fast = entry(ENGINES, "fast", "simulation.engine")(plan, program, costs)
    assert roomy.step_cycles == fast.step_cycles > 0
    assert roomy.executed_flops == fast.executed_flops
    phases = (Phase.WEIGHT_STALL, Phase.GRADIENT_DRAIN, Phase.OPTIMIZER_STEP)
    assert {s.name for s in roomy.spans} >= set(phases)  # the step waits for weights and drains
    assert ([(s.name, s.start, s.end) for s in roomy.spans if s.name in phases]
            == [(s.name, s.start, s.end) for s in fast.spans if s.name in phases])
