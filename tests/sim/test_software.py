"""The two software stacks (docs/model.md §11.11): launches counted by hand from what is fused, the
composed kernels' names, the production stack never slower than the research code on any kernel it
touches, the overlap formulas by hand, and the stack named in the result."""

from __future__ import annotations

import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.inference import load_inference_data
from wsesim.model.vocabulary import StageOpKind
from wsesim.sim.cost.costing import cost_serving
from wsesim.sim.cost.software import asynchronous_io, reduce_beside_compute
from wsesim.sim.programs.builders.serving import serving_program
from wsesim.sim.programs.builders.software import fuse, launches
from wsesim.sim.programs.mapping import map_stages
from wsesim.sim.programs.program import Kernel, ServeBatches

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 8, "output_len": 3}, "grid": "1x1"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
         "hardware.pe.sram": "1 MiB"}


def _spec(software: str = "research", **overrides: object):
    return load_inference_data(TINY, overrides={**DENSE, "inference.software": software, **overrides}).spec


def _work(spec):
    op, = serving_program(spec, map_stages(spec)).body
    assert isinstance(op, ServeBatches)
    work, = op.stages
    return work


def test_launches_of_a_stage_by_hand() -> None:
    """The dense tiny model, both layers and the LM head on one stage. Research: a decode layer is 16
    kernels (attn_norm, its sum, qkv, rope, scores, softmax, its sums, context, o_proj, residual, ffn_norm,
    its sum, gate_up, activation, down, residual), so 2·16 + 2 (lm_head, argmax) = 34; a prefill layer
    15 (one residual), 2·15 + 2 = 32. Production: the stage's first attn_norm alone (nothing before it
    to fuse into); then a layer is its 6 GEMVs, each carrying what follows it (rope; softmax; o_proj's
    residual and ffn_norm; activation; down's residual and the next layer's attn_norm) and the allreduce
    before it beside it; the argmax follows the LM head (it reads it) and is not beside anything:
    1 + 2·6 + 2 = 15, for prefill and decode alike."""
    research, production = _work(_spec()), _work(_spec("production"))
    assert (launches(research.decode), launches(research.prefill)) == (34, 32)
    assert (launches(production.decode), launches(production.prefill)) == (15, 15)
    assert [op.name for op in production.decode] == [
        "attn_norm",
        *(["qkv+rope|attn_norm_sum", "scores+softmax", "context|softmax_sums", "o_proj+residual+ffn_norm",
           "gate_up+activation|ffn_norm_sum", "down+residual+attn_norm"] * 2)[:-1],
        "down+residual", "lm_head", "argmax"]
    assert launches(production.lm_head) == 2 and production.prefill_of is not None
    assert launches(production.prefill_of(4, 8)) == 13  # a chunk's layers, without the LM head


def test_meshgemm_prefill_keeps_the_softmax_after_its_row_reduces() -> None:
    """On a 2 × 2 grid MeshGEMM's Q·Kᵀ ends each step in a row reduce (``scores_reduce``), so the softmax
    follows a reduce, not a GEMM, and keeps its launch: 8 a layer (qkv, scores, scores_reduce, softmax,
    context, o_proj, gate_up, down) + the first attn_norm + the LM head's 2 = 19 (research 2·16 + 2)."""
    grid = {"inference.grid": "2x2", "inference.gemm": "meshgemm"}
    assert launches(_work(_spec(**grid)).prefill) == 34
    assert launches(_work(_spec("production", **grid)).prefill) == 19


def test_fuse_by_hand() -> None:
    """An element-wise kernel with nothing before it stays; one after a GEMV joins it; an allreduce before
    a transfer stays where it is; one before a GEMV goes beside it; a region's kernel never fuses into the
    grid's."""
    e, ar, gemv, move = (StageOpKind.ELEMENTWISE, StageOpKind.ALLREDUCE, StageOpKind.GEMV,
                         StageOpKind.TRANSFER)
    ops = [Kernel(e, "a", 0, (1, 1)), Kernel(ar, "s", 0, (1,)), Kernel(gemv, "g", 0, (4, 4)),
           Kernel(e, "b", 0, (1, 1)), Kernel(ar, "t", 0, (1,)), Kernel(move, "m", 0, (1, 1)),
           Kernel(gemv, "r", 0, (4, 4), region=(1, 1)), Kernel(e, "c", 0, (1, 1))]
    fused = fuse(ops)
    assert [op.name for op in fused] == ["a", "g+b|s", "t", "m", "r", "c"]
    assert fused[1].fused == (ops[3],) and fused[1].beside == (ops[1],)
    assert launches(fused) == 6


def _research_parts(research: list, production: list) -> list[list]:
    """The research kernels each production kernel carries, in order (beside ones before their host,
    fused ones after it, as the builder writes them)."""
    out, i = [], 0
    for op in production:
        n = 1 + len(op.fused) + len(op.beside)
        out.append(research[i:i + n])
        i += n
    assert i == len(research)
    return out


@pytest.mark.parametrize("grid", ["1x1", "2x2", "4x4"])
def test_production_is_never_slower_on_any_kernel(grid: str) -> None:
    """With an issue and launches to pay and rows to reduce along, each production kernel (decode and
    prefill) costs at most the research kernels it carries, and the fused ones strictly less."""
    hw = {"inference.grid": grid, "hardware.pe.instruction_issue": "7 cycles",
          "hardware.runtime.kernel_launch": "360 cycles", "hardware.runtime.fused_launch": "200 cycles"}
    r_spec, p_spec = _spec(**hw), _spec("production", **hw)
    r_work, p_work = _work(r_spec), _work(p_spec)
    r_cost, = cost_serving(serving_program(r_spec, map_stages(r_spec)), r_spec).stages
    p_cost, = cost_serving(serving_program(p_spec, map_stages(p_spec)), p_spec).stages
    for r_costs, p_ops, p_costs in ((r_cost.decode, p_work.decode, p_cost.decode),
                                    (r_cost.prefill, p_work.prefill, p_cost.prefill)):
        parts = _research_parts(list(r_costs), list(p_ops))
        for op, c, mine in zip(p_ops, p_costs, parts, strict=True):
            assert c.cycles <= sum(x.cycles for x in mine), op.name
            if op.fused or op.beside:
                assert c.cycles < sum(x.cycles for x in mine), op.name
            assert c.fmacs == sum(x.fmacs for x in mine)  # the same work, its energy unchanged
    assert p_cost.decode_step < r_cost.decode_step
    assert len(p_work.decode) < len(r_work.decode)


def test_with_nothing_to_hide_or_launch_the_stacks_agree() -> None:
    """tiny8 issues and launches for free, and on one PE nothing is reduced: production is the research
    code's 2·8,350 + 4,096 = 20,796 cycles to the cycle (tests/sim/test_serving.py derives it)."""
    research, = cost_serving(serving_program(_spec(), map_stages(_spec())), _spec()).stages
    spec = _spec("production")
    production, = cost_serving(serving_program(spec, map_stages(spec)), spec).stages
    assert production.decode_step == research.decode_step == 20796
    assert production.batches.iteration(1, 9, ()) == research.batches.iteration(1, 9, ()) == 20758


def test_the_overlaps_by_hand() -> None:
    """reduce beside compute: max(stream, reduce) + stream / chunks, never above the two in turn;
    asynchronous I/O: latency + max(0, transfer − hidden), never above the hand-off."""
    assert reduce_beside_compute(100, 1000, 4) == 1025
    assert reduce_beside_compute(1000, 100, 4) == 1100  # 1,000 + 250 > 1,100 in turn
    assert reduce_beside_compute(100, 0, 8) == 100
    assert asynchronous_io(1000, 200, 500) == 500
    assert asynchronous_io(1000, 200, 2000) == 200
    assert asynchronous_io(1000, 0, 0) == 1000


def test_the_result_names_its_stack() -> None:
    from wsesim.cli.infer import format_serving
    from wsesim.experiments.runner import run_inference

    for software, count in (("research", 34), ("production", 15)):
        r = run_inference(_spec(software)).result
        assert (r.software, r.decode_launches) == (software, count)
        assert r.to_dict()["software"] == software
        assert f"software: {software}, {count} kernels launched a decode token" in format_serving(r)


def test_bad_stack_and_a_dearer_fused_launch_are_refused() -> None:
    with pytest.raises(ConfigError, match="software"):
        _spec("fast")
    with pytest.raises(ConfigError, match="expected at most runtime.kernel_launch"):
        _spec(**{"hardware.runtime.fused_launch": "10 cycles"})  # tiny8's kernel_launch is 0
