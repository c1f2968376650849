"""The cost pass (wsesim.sim.cost.costing): a training program priced once before it runs (every whole-wafer
op, each layer's dispatch and combine, the experts' ops and MemoryX's optimizer step), the compute model's
table entry deciding whether ops consume their weights as they arrive, and a serving program's stages
each given its ``StageCosts``."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest

from wsesim.config.inference import load_inference_data
from wsesim.config.loader import load_experiment_data
from wsesim.experiments.training import make_plan, random_streams
from wsesim.model.optimizer import optimizer_step_cycles
from wsesim.model.routing import route_tokens
from wsesim.sim.cost import costing
from wsesim.sim.cost.costing import COMPUTE_MODELS, StageCosts, cost_program, cost_serving
from wsesim.sim.programs.builders.serving import serving_program
from wsesim.sim.programs.builders.training import training_program
from wsesim.sim.programs.mapping import map_stages
from wsesim.sim.programs.plan import StepPlan
from wsesim.sim.programs.program import Transfer, WaferOp

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2},
        "simulation": {"granularity": "pe"}}
SERVE = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
         "inference": {"load": {"prompt_len": 8, "output_len": 3}, "grid": "1x1"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96}


def _plan(overrides: dict[str, Any] | None = None, micro_batches: int = 1) -> StepPlan:
    spec = load_experiment_data(TINY, overrides=overrides or {}).spec
    place_rng, route_rng = random_streams(spec.training.seed)
    t = spec.training
    tokens = route_tokens(spec.model, t, t.batch_per_tile * t.tiles * t.seq_len, route_rng)
    return make_plan(spec, t.batch_per_tile, tokens, place_rng, micro_batches)[0]


def test_a_training_program_is_priced_once_before_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """tiny-moe (2 MoE layers) in 2 micro-batches: the body runs twice, but each of its whole-wafer ops is
    priced once (the compute model asked once an op), each layer's dispatch and combine once (forward,
    recompute and backward share a (layer, direction)), the experts' ops by the MoE mapping, and MemoryX's
    optimizer step by its one formula."""
    plan = _plan(micro_batches=2)
    program = training_program(plan)
    asked: Counter[WaferOp] = Counter()
    model = COMPUTE_MODELS[plan.compute]

    def counted(hw: Any, rows: int, cols: int, op: WaferOp, bytes_per_value: int) -> Any:
        asked[op] += 1
        return model.wafer(hw, rows, cols, op, bytes_per_value)

    monkeypatch.setitem(COMPUTE_MODELS, plan.compute, dataclasses.replace(model, wafer=counted))
    costs = cost_program(program, plan)
    wafer_ops = [op for op in program.body if isinstance(op, WaferOp)]
    assert program.micro_batches == 2 and sum(asked.values()) == len(wafer_ops)
    assert set(costs.wafer) == set(wafer_ops) and all(c.cycles > 0 for c in costs.wafer.values())
    transfers = {(op.layer, op.reverse) for op in program.body if isinstance(op, Transfer)}
    assert set(costs.fabric) == transfers == {(0, False), (0, True), (1, False), (1, True)}
    assert all(c.cycles > 0 and c.nbytes > 0 for c in costs.fabric.values())
    assert costs.experts.cycles  # the MoE mapping's expert costs, there before the step runs
    assert costs.optimizer_cycles == optimizer_step_cycles(plan.hw, plan.model) > 0
    assert costs.stages == () and costs.problems == ()


def test_a_dense_program_has_no_fabric_and_no_expert_costs() -> None:
    plan = _plan(DENSE)
    costs = cost_program(training_program(plan), plan)
    assert costs.fabric == {} and costs.experts.cycles == {}
    assert {op.kind for op in costs.wafer} == {"attention", "ffn", "lm_head"}


@pytest.mark.parametrize(("compute", "pipelined"), [("constant", False), ("kernel", True)])
def test_the_compute_models_entry_decides_pipelining(compute: str, pipelined: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``Costs.pipelined`` is the table entry's ``ComputeModel.pipelined``, nothing else: the same plan
    under an entry changed to say the opposite is costed the opposite way, at the same cycles."""
    plan = _plan({"simulation.compute": compute})
    program = training_program(plan)
    costs = cost_program(program, plan)
    assert costs.pipelined is COMPUTE_MODELS[compute].pipelined is pipelined
    flipped = dataclasses.replace(COMPUTE_MODELS[compute], pipelined=not pipelined)
    monkeypatch.setitem(costing.COMPUTE_MODELS, compute, flipped)
    again = cost_program(program, plan)
    assert again.pipelined is not pipelined
    assert again.wafer == costs.wafer and again.optimizer_cycles == costs.optimizer_cycles


@pytest.mark.parametrize("output_len", [1, 3, 9])
def test_each_serving_stage_gets_its_stage_costs(output_len: int) -> None:
    """The dense tiny model on two 1×1 stages (a layer each): each stage a ``StageCosts`` with a cost per
    kernel of its work, its last decode step the sum of its decode kernels (costed at that step's context,
    prompt + output − 1; none with one output token), its prefill the sum of its prefill kernels."""
    spec = load_inference_data(SERVE, overrides={**DENSE, "hardware.pe.sram": "1 MiB",
                                                 "inference.load.output_len": output_len,
                                                 "inference.layers_per_stage": 1}).spec
    program = serving_program(spec, map_stages(spec))
    [op] = program.body
    costs = cost_serving(program, spec)
    assert len(costs.stages) == len(op.stages) == 2 and costs.problems == ()
    for work, stage in zip(op.stages, costs.stages, strict=True):
        assert isinstance(stage, StageCosts) and stage.batches is not None
        assert len(stage.prefill) == len(work.prefill) and len(stage.decode) == len(work.decode)
        assert stage.prefill_cycles == sum(c.cycles for c in stage.prefill) > 0
        if output_len == 1:
            assert stage.decode_step == 0.0
        else:
            assert stage.decode_step == pytest.approx(sum(c.cycles for c in stage.decode), rel=1e-12)
    assert costs.stations() == [s.batches for s in costs.stages]
