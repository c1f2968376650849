"""The training step as a program (``sim/programs/builders/training.py``): its order of work read directly as data, its
FLOPs against the model's, and both engines executing a program that no builder wrote."""

from __future__ import annotations

import pytest

from wsesim.config.loader import load_experiment_data
from wsesim.experiments.training import make_plan, random_streams
from wsesim.model.routing import route_tokens
from wsesim.model.shapes import LayerShapes
from wsesim.model.vocabulary import Copy, Gradient, OpKind, Pass, Phase, Tensor
from wsesim.sim.cost.costing import cost_program
from wsesim.sim.executors import engine, reference
from wsesim.sim.programs.builders.training import training_program
from wsesim.sim.programs.chunks import plan_chunks
from wsesim.sim.programs.program import Drain, GradientOut, Program, WaferOp, Weights

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2},
        "simulation": {"granularity": "pe"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96}

W, A, R, D, X, C, G = (OpKind.WEIGHTS, OpKind.ATTENTION, OpKind.ROUTER, OpKind.DISPATCH, OpKind.EXPERTS,
                       OpKind.COMBINE, OpKind.GRADIENT)


def _plan(overrides: dict | None = None, micro_batches: int = 1):
    spec = load_experiment_data(TINY, overrides=overrides or {}).spec
    place_rng, route_rng = random_streams(spec.training.seed)
    B, G_ = spec.training.batch_per_tile, spec.training.tiles
    tokens = route_tokens(spec.model, spec.training, B * G_ * spec.training.seq_len, route_rng)
    return make_plan(spec, B, tokens, place_rng, micro_batches)[0]


def test_the_moe_step_in_the_order_docs_model_3_3_gives() -> None:
    """tiny-moe has 2 MoE layers; recompute, attention recomputed twice, the layer fits half the staging
    buffer (so the recompute reads the backward copy). By hand, per docs/model.md §3.3:

    embedding weights;
    layer 0 fwd: attention weights, attention (G tiles), router weights, router, dispatch, experts, combine;
    layer 1 fwd: the same;
    LM head: its weights, its op per tile, its gradient (tiny-moe's head is untied);
    layer 1 bwd: recompute (attention weights of the bwd copy, attention, router weights, router, dispatch,
      experts, combine), then router weights (bwd), router, combine (reversed roles: dispatch of gradients
      runs the combine route), experts, dispatch, router gradient, attention weights, attention recompute,
      attention bwd, attention gradient;
    layer 0 bwd: the same; the embedding's gradient.
    """
    program = training_program(_plan())
    fwd = [W, A, W, R, D, X, C]
    bwd = [*fwd, W, R, C, X, D, G, W, A, A, G]
    assert list(program.kinds()) == [W, *fwd, *fwd, W, OpKind.LM_HEAD, G, *bwd, *bwd, G]
    assert [op.kind for op in program.tail] == [OpKind.GRADIENT_DRAIN, OpKind.OPTIMIZER_STEP]
    body = program.body
    assert body[0].key == (Tensor.EMBEDDING,)
    recompute = body[18:25]
    assert {op.args["pass"] for op in recompute} == {Pass.RECOMPUTE}
    assert recompute[0].key == (Copy.BWD, 1, Tensor.ATTENTION)  # the recompute reads the backward copy
    assert [op.gradient for op in body if op.kind == G] == [Gradient.LM_HEAD, Gradient.ROUTER, Gradient.ATTENTION,
                                                            Gradient.ROUTER, Gradient.ATTENTION, Gradient.EMBEDDING]
    assert {op.tiles for op in body if op.kind in (A, OpKind.LM_HEAD)} == {2}  # G = 2 tiles
    assert [op.reverse for op in body[:9] if op.kind in (D, C)] == [False, True]


def test_a_dense_layer_store_and_attention_once() -> None:
    """Dense, activations kept (no recompute): forward is attention weights, attention, FFN weights, FFN;
    backward waits for the FFN's weights first (its backward starts there; the FFN's own wait for them
    then finds them arrived), then FFN, its gradient, attention weights, attention bwd, its gradient."""
    program = training_program(_plan({**DENSE, "training.activations": "store"}))
    F = OpKind.FFN
    fwd, bwd = [W, A, W, F], [W, W, F, G, W, A, G]
    assert list(program.kinds()) == [W, *fwd, *fwd, W, OpKind.LM_HEAD, G, *bwd, *bwd, G]
    assert program.body[-8].key == program.body[-7].key == (Copy.BWD, 0, Tensor.FFN)  # layer 0: backward runs last to first
    # with recompute and attention kept once, the layer's recompute skips attention (backward still
    # recomputes each tile's internals)
    once = training_program(_plan({**DENSE, "training.attention_recompute": "once"}))
    assert [op.kind for op in once.body if op.args.get("pass") == Pass.RECOMPUTE] == [W, W, F, A] * 2


def test_in_place_the_copy_ops_replace_the_fabric() -> None:
    program = training_program(_plan({"simulation.moe_mapping": "in_place"}))
    kinds = program.kinds()
    assert OpKind.DISPATCH not in kinds and OpKind.COMBINE not in kinds
    assert list(kinds[:9]) == [W, W, A, W, R, OpKind.EXPAND, X, OpKind.WEIGHTED_SUM, W]
    expand = [op for op in program.body if op.kind == OpKind.EXPAND]
    assert [op.useful for op in expand[:2]] == [False, False]  # forward copies are datapath work, no arithmetic


@pytest.mark.parametrize("overrides", [{}, DENSE, {"model.top_k": 1, "training.tiles": 3}])
def test_the_programs_flops_are_the_models_flops_per_step(overrides: dict) -> None:
    """Without recomputation, with a kernel that skips the masked half and no copy ops, the program executes
    exactly the model's FLOPs per step: 3 × forward per token (``model_flops_per_token``) × tokens."""
    plan = _plan({**overrides, "training.activations": "store", "training.attention_kernel": "flash"},
                 micro_batches=3)
    program = training_program(plan)
    tokens = plan.micro_batches * plan.global_batch * plan.training.seq_len
    model = tokens * LayerShapes(plan.model).model_flops_per_token(plan.training.seq_len)
    assert program.micro_batches == 3
    assert program.executed_flops == pytest.approx(model, rel=1e-12)


def test_the_engines_count_the_flops_the_program_says() -> None:
    plan = _plan()
    program = training_program(plan)
    for simulate in (engine.simulate, reference.simulate):
        assert simulate(plan, program, cost_program(program, plan)).executed_flops == pytest.approx(program.executed_flops, rel=1e-12)


def test_both_engines_execute_a_program_no_builder_wrote() -> None:
    """A hand-written program: the embedding's weights, one attention op in 2 tiles, one gradient. Both
    engines give the same spans: the weight wait, then the two tiles back to back."""
    plan = _plan()
    s = LayerShapes(plan.model)
    program = Program((
        Weights((Tensor.EMBEDDING,), {"pass": Pass.FWD}),
        WaferOp(A, Pass.FWD, 0, flops=1e6, weight_bytes=4096.0, tiles=2, args={"layer": 0, "pass": Pass.FWD}),
        GradientOut(Gradient.ATTENTION, float(s.attention_params * 2)),
    ), tail=(Drain(OpKind.GRADIENT_DRAIN),), chunks=plan_chunks(plan.hw, plan.model, True))
    costs = cost_program(program, plan)
    fast, ref = engine.simulate(plan, program, costs), reference.simulate(plan, program, costs)
    names = [(span.name, span.args.get("tile")) for span in fast.spans]
    assert names[-3:-1] == [(Phase.ATTENTION, 0), (Phase.ATTENTION, 1)]
    assert [(s.name, s.start, s.end) for s in fast.spans] == [(s.name, s.start, s.end) for s in ref.spans]
    assert fast.step_cycles == ref.step_cycles > 0
    assert fast.executed_flops == ref.executed_flops == 2e6


def test_a_misspelt_name_fails_where_it_is_written() -> None:
    with pytest.raises(AttributeError):
        _ = Phase.EXPRETS  # type: ignore[attr-defined]
    assert Phase.EXPERTS == "experts" and f"{Pass.FWD_BWD}" == "fwd+bwd" and str(Copy.REC) == "rec"
    assert hash(Tensor.ATTENTION) == hash("attention")  # chunk keys look up the same with names or strings
