"""Serving (docs/model.md §11): one decode layer's kernels derived by hand on a one-PE grid, the
pipeline's timeline by hand on both executors (the fast engine's loop, the reference's SimPy processes)
under the scheduler's ``none`` policy (one token or prompt an iteration), the two against each other,
and the mapping's SRAM verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.inference import load_inference_data
from wsesim.kernels.cost import KernelCost
from wsesim.model.serving import kv_bytes_per_token, stage_memory
from wsesim.sim.cost.costing import Costs, StageCosts, cost_serving
from wsesim.sim.executors import engine, reference
from wsesim.sim.programs.builders.serving import serving_program
from wsesim.sim.programs.mapping import map_stages
from wsesim.sim.programs.program import Program, ServeBatches, StageWork

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 8, "output_len": 3}, "grid": "1x1"}}
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
         "hardware.pe.sram": "1 MiB"}


def _spec(overrides: dict | None = None):
    return load_inference_data(TINY, overrides={**DENSE, **(overrides or {})}).spec


def test_one_decode_layer_on_one_pe_by_hand() -> None:
    """tiny8 in fp16: 4 FMAC lanes, 16 B read and 8 B written per cycle, so a vector instruction of L
    elements takes ceil(L / 4) cycles; instruction_issue and kernel_launch are 0; on one PE nothing is
    communicated (a row of one PE reduces nothing). A GEMV K × N on one PE is K instructions of N, an
    elementwise kernel of ``ops`` over V values is ``ops`` instructions of V. The dense tiny model:
    H = 64, q 64, k 32, v 32 wide, o 64, F = 96 (SwiGLU), 4 heads. At context T:

    attn_norm 2·⌈64/4⌉ = 32; qkv 64·⌈128/4⌉ = 2,048; rope 4·⌈96/4⌉ = 96; scores 64·⌈T/4⌉; softmax
    3·⌈4T/4⌉ = 3T; context T·⌈64/4⌉ = 16T; o_proj 64·16 = 1,024; residual 16; ffn_norm 32; gate_up
    64·48 = 3,072; activation 96; down 96·16 = 1,536; residual 16: 7,968 + 64·⌈T/4⌉ + 19T cycles:
    T = 9: 7,968 + 192 + 171 = 8,331; T = 10: 7,968 + 192 + 190 = 8,350; T = 100: 7,968 + 1,600 + 1,900 =
    11,468 (= 7,968 + 35T, as when every kernel was ⌈FMACs / 4⌉: the scores round per instruction now).
    """
    for T, by_hand in ((9, 8331), (10, 8350), (100, 11468)):  # the last decode step's context: prompt + output − 1
        spec = _spec({"inference.load.output_len": T - 7})
        work, = _serve(serving_program(spec, map_stages(spec))).stages
        cost, = cost_serving(serving_program(spec, map_stages(spec)), spec).stages
        layer = [c for op, c in zip(work.decode, cost.decode, strict=True) if op.layer == 0]
        assert sum(c.cycles for c in layer) == by_hand == 7968 + 64 * -(-T // 4) + 19 * T
        assert sum(c.communication for c in cost.decode) == 0
    names = [op.name for op in work.decode if op.layer == 0]
    assert names == ["attn_norm", "attn_norm_sum", "qkv", "rope", "scores", "softmax", "softmax_sums", "context",
                     "o_proj", "residual", "ffn_norm", "ffn_norm_sum", "gate_up", "activation", "down", "residual"]
    assert [c.cycles for c in cost.decode[-2:]] == [64 * 256 / 4, 0.0]  # the LM head's GEMV and its argmax


def _serve(program: Program) -> ServeBatches:
    op, = program.body
    assert isinstance(op, ServeBatches)
    return op


def test_the_program_of_a_one_stage_run_by_hand() -> None:
    """Prompt 8, output 3: the decode steps run at contexts 9 and 10; the one stage holds both layers
    and the LM head (64 instructions of ⌈256/4⌉ = 4,096 cycles), so a decode step is 2·(7,968 + 64·⌈T/4⌉
    + 19T) + 4,096 (the layer above): 2·8,331 + 4,096 = 20,758 and 2·8,350 + 4,096 = 20,796."""
    spec = _spec()
    mapping = map_stages(spec)
    assert mapping.feasible and len(mapping.stages) == 1 and mapping.stages[0].layers == (0, 1)
    work, = cost_serving(serving_program(spec, mapping), spec).stages
    assert work.decode_step == 2 * 8350 + 4096 == 20796
    assert sum(c.cycles for c in work.decode) == work.decode_step
    assert work.batches is not None and work.batches.iteration(1, 9, ()) == 2 * 8331 + 4096 == 20758
    assert work.handoff_decode == 0.0  # the token comes back to the same grid


class _Given:
    """A station whose work is given in cycles (no kernels): an iteration with a prompt ``prefill``, one
    with decode tokens alone ``decode``, and every hand-off after it ``handoff``."""

    def __init__(self, prefill: float, decode: float, handoff: float) -> None:
        self.prefill, self.decode, self.moved = prefill, decode, handoff

    def iteration(self, decodes: int, longest: int, pieces, loads=None) -> float:
        return self.prefill if pieces else self.decode

    def handoff(self, values: int, prompt: bool = False) -> float:
        return self.moved


def _program(prefill: tuple[float, float], decode: tuple[float, float], handoff: tuple[float, float],
             batch: int, output: int) -> tuple[Program, Costs]:
    """Two stages under ``batching: none`` whose work is given in cycles: prefill p_s, decode d_s, hand-off
    h_s (the last stage's hand-off is the new token back to the first). The executors read only the
    costs; the spec's tiny model sizes nothing (every request fits)."""
    spec = _spec()
    works = tuple(StageWork(map_stages(spec).stages[0], (), (), None, None)  # type: ignore[arg-type]
                  for _ in range(2))
    stages = tuple(StageCosts((KernelCost(prefill[s], prefill[s], 0.0),), (), decode[s], handoff[s], handoff[s],
                              _Given(prefill[s], decode[s], handoff[s])) for s in range(2))  # type: ignore[arg-type]
    op = ServeBatches(works, np.zeros(batch), np.full(batch, 8), np.full(batch, output), batch, "none", 8,
                      spec.model, "shift")
    return Program((op,)), Costs(stages=stages)


def _emitted(trace, batch: int, output: int) -> list[list[float]]:
    """Each request's output tokens' cycles (its first: the prefill's)."""
    return trace.batches.emitted.reshape(batch, output).tolist()


EXECUTORS = {"fast": engine.simulate, "reference": reference.simulate}


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_pipeline_timeline_by_hand(executor: str) -> None:
    """One request, prefill 100 then 50 cycles, decode 10 and 20, hand-offs 3 (stage 0 to 1) and 7 (the
    token back): token 0 leaves at 100 + 3 + 50 = 153; each further token 7 + 10 + 3 + 20 = 40 later."""
    simulate = EXECUTORS[executor]
    trace = simulate(None, *_program((100, 50), (10, 20), (3, 7), batch=1, output=3))
    assert _emitted(trace, 1, 3) == [[153, 193, 233]]
    assert trace.batches.busy.tolist() == [100 + 2 * 10, 50 + 2 * 20]
    assert trace.step_cycles == 233
    # Two requests: request 1 queues behind request 0 at stage 0 (its prefill runs 100 to 200), reaches
    # stage 1 at 203, free since 153: its token 0 leaves at 253. Request 0's token 1 reaches stage 0 at
    # 160 (153 + 7) and waits 40 cycles for request 1's prefill; it leaves stage 0 at 210, reaches stage
    # 1 at 213, waits there for request 1's prefill until 253 and leaves at 273.
    two = _emitted(simulate(None, *_program((100, 50), (10, 20), (3, 7), batch=2, output=3)), 2, 3)
    assert two[0][0] == 153 and two[1][0] == 253
    assert two[0][1] == 273


@pytest.mark.parametrize("batch,output", [(1, 4), (3, 5), (5, 2)])
@pytest.mark.parametrize("times", [((100, 50), (10, 20), (3, 7)), ((37.5, 80.25), (13.0, 9.5), (1.5, 0.25))])
def test_the_reference_executor_agrees(batch: int, output: int, times) -> None:
    program, costs = _program(*times, batch=batch, output=output)
    fast, ref = engine.simulate(None, program, costs), reference.simulate(None, program, costs)
    for name in ("emitted", "busy", "stage", "start", "end", "landed"):
        assert np.array_equal(getattr(fast.batches, name), getattr(ref.batches, name), equal_nan=True), name


def test_the_reference_executor_agrees_on_a_simulated_tiny_program() -> None:
    spec = _spec({"inference.scheduler.batch": 3, "inference.grid": "2x2", "inference.layers_per_stage": 1})
    mapping = map_stages(spec)
    assert len(mapping.stages) == 2
    program = serving_program(spec, mapping)
    costs = cost_serving(program, spec)
    assert np.array_equal(engine.simulate(None, program, costs).batches.emitted,
                          reference.simulate(None, program, costs).batches.emitted)


def test_kv_layouts_and_the_longest_output() -> None:
    """A concatenating layout fills the grid's last row with every decoded token, so it holds fewer."""
    spec = _spec({"inference.grid": "4x4"})
    m = spec.model
    per = kv_bytes_per_token(m)
    assert per == (32 + 32) * 2  # k and v: 2 kv heads x 16 wide, 2 bytes
    shift = stage_memory(m, 0.0, 2, 4, 4, 36864.0, 8, 3, 1, "shift")
    concat = stage_memory(m, 0.0, 2, 4, 4, 36864.0, 8, 3, 1, "concat")
    assert shift.kv_cache == pytest.approx(2 * per * 11 / 16)
    assert concat.kv_cache == pytest.approx(2 * per * (8 / 4 + 3) / 4)
    assert shift.max_output > concat.max_output > 0


def test_a_model_that_does_not_fit_says_why() -> None:
    spec = load_inference_data(TINY, overrides={**DENSE, "hardware.pe.sram": "48 KiB"}).spec
    mapping = map_stages(spec)
    assert not mapping.feasible and "usable" in mapping.reason


def test_meshgemm_prefill_reduces_every_q_k_step_along_the_rows() -> None:
    """With ``inference.gemm: meshgemm`` the prefill's Q·Kᵀ is followed by one row reduce per step of the
    block of partial scores, ⌈S/P⌉ × ⌈S/Q⌉ values (WaferLLM's ``matmul_T_reduce_add``); SUMMA's scores
    are a plain GEMM. On a 4 × 4 grid and an 8-token prompt: 2 × 2 = 4 values a step, each layer once.
    The 2 fp16 wavelets over a row of 4, root at each PE once (tiny8, no issue): root 0 or 3 at the end
    of a chain of 3: arrivals 1 + 12 + 5 = 18 and 19, added 19, 20; root 1 or 2 between chains of 1 and
    2: arrivals 6, 7 and 12, 13, added 7, 8, 13, 14: 20 + 14 + 14 + 20 = 68 cycles, all communication."""
    def kernels(gemm: str) -> list:
        spec = _spec({"inference.grid": "4x4", "inference.gemm": gemm})
        work, = serving_program(spec, map_stages(spec)).body[0].stages
        return [op for op in work.prefill if op.kind == "row_reduces"]

    assert kernels("summa") == []
    ops = kernels("meshgemm")
    assert [(op.name, op.layer, op.dims) for op in ops] == [("scores_reduce", 0, (4,)), ("scores_reduce", 1, (4,))]
    spec = _spec({"inference.grid": "4x4", "inference.gemm": "meshgemm"})
    work, = cost_serving(serving_program(spec, map_stages(spec)), spec).stages
    prog, = serving_program(spec, map_stages(spec)).body[0].stages
    costs = [c for op, c in zip(prog.prefill, work.prefill, strict=True) if op.kind == "row_reduces"]
    assert [(c.cycles, c.communication, c.overhead) for c in costs] == [(68.0, 68.0, 0.0)] * 2
