"""Serving's expert dispatch and combine through training's fabric model (docs/model.md §11.8,
``sim.cost.expert_dispatch``): a line of four experts derived by hand, balanced against sampled routing, the
prefill's tokens routed too, and the per-iteration figures both executors log alike."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.inference import load_inference_data
from wsesim.config.inference_load import MOVED
from wsesim.experiments.runner import run_inference
from wsesim.fabric.dispatch import dispatch_traffic
from wsesim.fabric.flow import FlowFabric
from wsesim.model.vocabulary import StageOpKind
from wsesim.sim.cost.costing import cost_serving
from wsesim.sim.cost.expert_dispatch import StageDispatch
from wsesim.sim.cost.moe_serving import Draw
from wsesim.sim.programs.builders.serving import serving_program
from wsesim.sim.programs.mapping import map_stages

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 16, "output_len": 5}, "grid": "1x4"}}
LOAD = {"arrival": "poisson", "rate": 200000, "requests": 24, "batch": 8, "output_len": 12}


def _spec(grid: str = "1x4", **inference):
    data = {**TINY, "inference": {**TINY["inference"], "grid": grid}}
    return load_inference_data(data, overrides={f"inference.{MOVED.get(k, k)}": v for k, v in inference.items()}).spec


@pytest.fixture(scope="module")
def line() -> StageDispatch:
    spec = _spec()
    return StageDispatch(spec.hardware, 1, 4, spec.model, 1)


def test_a_line_of_four_experts_by_hand(line: StageDispatch) -> None:
    """tiny-moe (H 64, bf16: 128 bytes a token; 4 experts, top-2) on a 1 × 4 grid of tiny8 (4 bytes a
    link a cycle, ramps of 2 cycles, 1 a hop): too few PEs for a coarser node, so one PE a node and an
    expert each (columns 0-3). T tokens spread evenly give each expert T·2/4 tokens, 64·T bytes, which
    every node sends a quarter of (16·T bytes) to each other node. The east link 1→2 carries the four
    routes 0→2, 0→3, 1→2, 1→3: 64·T bytes, 16·T cycles busy; its latency u_min + t* is 0 (the routes
    from 1 have no hop behind) + 2 (of those with the most behind, one hop, 0→3 has two to go). The
    phase: 16·T − 1 + 4 (both ramps) + 2 = 16·T + 5, above every other link (12·T busy on the ramps
    and the outer links, at most 3 hops of latency: 12·T + 6). Combine is the same loads reversed."""
    assert (line.mesh.block, line.mesh.injection_cycles, line.mesh.hop_cycles) == (1, 4.0, 1.0)
    assert [(r.row0, r.col0, r.rows, r.cols) for r in line.placement.regions] == [(0, c, 1, 1) for c in range(4)]
    for tokens in (1, 2, 8):
        assert line.balanced(tokens) == line.balanced(tokens, True) == 16 * tokens + 5
        flow = FlowFabric(line.mesh).simulate(dispatch_traffic(line.mesh, line.placement, np.full(4, 64.0 * tokens)))
        assert flow.cycles == 16 * tokens + 5  # the fabric model's own simulation of the same messages
    # every mesh link's bytes (3 + 4 + 3 routes each way, 16 bytes each) in 4-byte wavelets, one hop each
    assert line.wavelet_hops(1) == 2 * 10 * 16 / 4


def test_a_draw_reaching_one_expert_by_hand(line: StageDispatch) -> None:
    """Two tokens drawn to expert 3 alone: 256 bytes, 64 from each other node. Link 2→3 and the eject at
    3 carry the three routes, 192 bytes, 48 cycles; the link's latency is 0 (2→3 has no hop behind) + 1
    (0→3, two behind, has one to go), the eject's the nearest route's one hop: 48 − 1 + 4 + 1 = 52. An
    even draw is the balanced spread of as many tokens."""
    assert line.drawn((0, 0, 0, 2)) == 52.0
    assert line.drawn((1, 1, 1, 1)) == line.balanced(2) and line.drawn((4, 4, 4, 4), True) == line.balanced(8)


def test_sampled_dispatch_is_the_balanced_one_for_an_even_draw_and_moves_with_the_draw() -> None:
    """Under continuous batching an iteration's dispatch and combine kernels take the drawn tokens: an even
    draw costs what balanced routing does; a skewed one, as much as the model says (here more: the
    hot experts' links carry all the bytes), and the figures the trace shows add up to the kernels'."""
    spec = _spec(grid="4x8", **LOAD)
    from wsesim.model.load import requests_of

    stage = cost_serving(serving_program(spec, map_stages(spec), requests_of(spec)), spec).stages[0].batches
    even, hot = Draw((4, 4), (4, 4, 4, 4)), Draw((8, 8), (8, 8, 0, 0))
    assert stage.decode_sampled(8, even) == stage.decode(8)
    assert stage.experts(8, (), even) == stage.experts(8)
    there, _, back = stage.experts(8, (), hot)
    dispatch = stage.grid.experts
    launch = stage.experts(8)[0] / 2 - dispatch.balanced(8)  # two MoE layers, each one dispatch kernel
    assert there == pytest.approx(2 * (launch + dispatch.drawn((8, 8, 0, 0))))
    assert back == pytest.approx(2 * (launch + dispatch.drawn((8, 8, 0, 0), True)))
    assert stage.decode_sampled(8, hot) > stage.decode(8)


def test_the_prompt_is_routed_too_and_the_average_hops_are_gone() -> None:
    """Each MoE layer's prefill sends its prompt's tokens to their experts and back: a ``TRANSFER`` of
    S tokens each way, costed as S tokens spread evenly; a decode token's is one token (b in a batch).
    No dispatch kernel carries a hop count any more."""
    spec = _spec(grid="4x8")
    program = serving_program(spec, map_stages(spec))
    work, = program.body[0].stages
    moves = [op for op in work.prefill if op.kind == StageOpKind.TRANSFER]
    assert [(op.name, op.dims) for op in moves] == [("dispatch", (16,)), ("combine", (16,))] * 2
    assert {op.dims for op in work.decode if op.kind == StageOpKind.TRANSFER} == {(1,)}
    costs = cost_serving(program, spec)
    stage = costs.stages[0]
    grid_dispatch = StageDispatch(spec.hardware, 4, 8, spec.model, 1)
    prefill = [c.cycles - c.overhead for op, c in zip(work.prefill, stage.prefill, strict=True)
               if op.kind == StageOpKind.TRANSFER]
    assert prefill == [grid_dispatch.balanced(16), grid_dispatch.balanced(16, True)] * 2


def test_both_executors_log_the_same_expert_figures() -> None:
    """Balanced and sampled: every iteration's (dispatch, experts, combine) the same bit for bit on both
    executors, within the iteration, non-zero on this all-MoE stage; balanced decode iterations of as
    many tokens alike, sampled ones drawn."""
    for routing in ("balanced", "zipf:1.2"):
        spec = _spec(grid="4x8", routing=routing, **LOAD)
        fast, ref = (run_inference(spec.on(engine)).trace.batches for engine in ("fast", "reference"))
        assert np.array_equal(fast.experts, ref.experts) and fast.experts.shape == (len(fast.stage), 3)
        assert (fast.experts > 0).all()
        assert (fast.experts.sum(axis=1) <= fast.end - fast.start).all()
        decode = fast.prompt_tokens == 0
        figures = {(int(d), tuple(e)) for d, e in zip(fast.decodes[decode], fast.experts[decode], strict=True)}
        by_size = {d for d, _ in figures}
        assert (len(figures) == len(by_size)) == (routing == "balanced")
