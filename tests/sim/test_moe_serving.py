"""MoE serving at scale (docs/model.md §11.8): one layer's experts over several grids (expert
parallelism) with the trips between them derived by hand on tiny8, each decode token's experts sampled
(uniform's expected load, determinism), and nothing changed when neither is asked for."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.inference import load_inference, load_inference_data
from wsesim.config.inference_load import MOVED
from wsesim.config.loader import load_model
from wsesim.experiments.runner import run_inference
from wsesim.model.load import requests_of
from wsesim.model.routing import sample_layer
from wsesim.model.serving import experts_per_grid, layer_weight_bytes
from wsesim.sim.cost.costing import cost_serving
from wsesim.sim.cost.moe_serving import Draw
from wsesim.sim.executors import engine, reference
from wsesim.sim.programs.builders.serving import serving_program
from wsesim.sim.programs.mapping import map_stages

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 16, "output_len": 5}, "grid": "4x8"}}


def _spec(**inference):
    return load_inference_data(TINY, overrides={f"inference.{MOVED.get(k, k)}": v for k, v in inference.items()}).spec


def _by_name(spec, name: str, phase: str = "decode") -> list[float]:
    program = serving_program(spec, map_stages(spec))
    costs = cost_serving(program, spec)
    work, = program.body[0].stages
    return [c.cycles for op, c in zip(getattr(work, phase), getattr(costs.stages[0], phase), strict=True)
            if op.name == name]


def test_two_grids_on_one_wafer_by_hand() -> None:
    """tiny-moe (H 64, 2 MoE layers of 4 experts, top-2, bf16) on tiny8's 8 × 8 mesh at 4 × 8 PEs a
    grid: two grids, at (0, 0) and (4, 0). ``expert_grids: 2`` makes one stage of both: the first holds
    the attention and experts 0-1 of each layer, the second experts 2-3 (⌈4/2⌉ = 2 a grid), so each
    grid is cut into 2 regions of ⌊√(32/2)⌋ = 4 on a side (one grid: ⌊√(32/4)⌋ = 2).

    A token's trip to the second grid: H = 64 values spread over the grid's 4 rows, 16 a row, 8
    wavelets of two bf16 values, over the 4 hops between the origins: B + 2·T_R + d·t_h + T_OP =
    8 + 2·2 + 4 + 1 = 17 cycles each way (``Machine.transfer``, the hand-off's move), 34 there and back.
    Balanced, a token's k = 2 experts reach min(2, 2) = 2 grids, the second one of them: 34 cycles a
    layer. Sampled, a token reaches the second grid unless both its experts are 0 and 1: with uniform
    routing that is 1 − 1/C(4, 2) = 5/6 of the tokens, so the kernels' mean is 34 · (share reaching it).

    The prefill's 16 tokens, their k = 2 experts each over min(2, 2) = 2 grids evenly: the second grid
    takes ⌈16 · 2/2⌉ = 16 tokens' vectors, 1,024 values, 256 a row, 128 wavelets: 128 + 5 + 4 = 137
    cycles each way, 274 a layer."""
    spec = _spec(expert_grids=2)
    mapping = map_stages(spec)
    stage, = mapping.stages
    assert (mapping.expert_grids, mapping.grids_used, stage.grids) == (2, 2, 1 + 1)
    assert stage.expert_grids == ((0, (4, 0)),)
    work, = serving_program(spec, mapping).body[0].stages
    assert {op.region for op in work.decode if op.name == "expert_gate_up"} == {(4, 4)}
    assert _by_name(spec, "expert_grids") == [34.0, 34.0]
    assert _by_name(spec, "expert_grids", "prefill") == [274.0, 274.0]
    # the second grid holds half the experts: the first grid's weights are 2 experts short per layer
    m = spec.model
    expert = 3 * 64 * 32 * 2
    assert layer_weight_bytes(m, 0, 1) - layer_weight_bytes(m, 0, 2) == 2 * expert
    # sampled, one request alone goes through the scheduler too: its iterations draw its experts and the
    # run reports how the draws used the grids: a (token, layer) pair has an expert on a grid unless both
    # of its 2 are on the other, 1 − 1/C(4, 2) = 5/6 of the time under uniform routing (39 · 2 pairs)
    r = run_inference(_spec(expert_grids=2, routing="uniform", output_len=40)).result
    use = r.per_stage[0]["expert_grid_use"]
    assert all(0.7 < u < 0.95 for u in use) and 1 < sum(use) < 2


def test_two_grids_across_wafers_by_hand() -> None:
    """At 8 × 8 PEs a grid (the whole tiny8 wafer), two grids are two wafers: the trip goes over the
    I/O links and one SwarmX node: 64 values · 2 B / 4 B a cycle + 2 µs · 1 GHz = 32 + 2,000 = 2,032
    cycles each way, 4,064 there and back, once a layer for a balanced token (the hand-off's formula);
    the prefill's 16 tokens: 1,024 values, 2,048 B / 4 + 2,000 = 2,512 each way, 5,024 a layer."""
    spec = load_inference_data({**TINY, "inference": {**TINY["inference"], "grid": "8x8",
                                                      "interconnect": "swarmx"}},
                               overrides={"inference.moe.expert_grids": 2}).spec
    mapping = map_stages(spec)
    assert mapping.systems == 2 and mapping.stages[0].expert_grids == ((1, (0, 0)),)
    assert _by_name(spec, "expert_grids") == [4064.0, 4064.0]
    assert _by_name(spec, "expert_grids", "prefill") == [5024.0, 5024.0]
    no_link = load_inference_data({**TINY, "inference": {**TINY["inference"], "grid": "8x8"}},
                                  overrides={"inference.moe.expert_grids": 2}).spec
    assert "set inference.interconnect" in map_stages(no_link).reason


def test_uniform_sampling_has_the_expected_load() -> None:
    """Uniform: every token's k experts are distinct, and expert e is among them with probability k/E,
    so over N tokens each expert's count is a binomial of mean N·k/E and variance N·(k/E)(1 − k/E):
    here N = 40,000, k/E = 2/4, mean 20,000 and σ = 100; every count within 5σ, and all sum to N·k."""
    rng = np.random.default_rng(7)
    picks = sample_layer(4, 2, None, 40_000, rng)
    assert all(len(set(row)) == 2 for row in picks[:1000])
    counts = np.bincount(picks.ravel(), minlength=4)
    assert counts.sum() == 80_000 and np.all(np.abs(counts - 20_000) < 500)
    # a skew concentrates the draws: the busiest expert's count grows with alpha
    busiest = [np.bincount(sample_layer(64, 4, alpha, 4_000, np.random.default_rng(1)).ravel()).max()
               for alpha in (None, 0.5, 1.2, 3.0)]
    assert busiest == sorted(busiest) and busiest[-1] > 2 * busiest[0]


def test_imbalance_and_tpot() -> None:
    """Without batching (``batching: none``) each iteration carries one token. One grid: each expert has
    a region of its own and a token's k experts run at once, so which experts it draws changes only its
    dispatch and combine (the fabric's paths to those regions), never its experts' kernels: iteration by
    iteration the expert figures match balanced routing's, and so does everything outside the dispatch
    and combine. Over two grids a balanced token reaches both (the most a token can), so a sampled one is
    never slower; the busier expert (skew) shows in ``expert_load`` and in the grids' use."""
    base = run_inference(_spec(batch=2, batching="none")).trace.batches
    for routing in ("uniform", "zipf:1.2", "zipf:3"):
        log = run_inference(_spec(batch=2, routing=routing, batching="none")).trace.batches
        assert np.array_equal(log.experts[:, 1], base.experts[:, 1])
        rest = [(b.end - b.start) - b.experts[:, 0] - b.experts[:, 2] for b in (log, base)]
        assert np.allclose(rest[0], rest[1], rtol=0, atol=1e-6)
    two = run_inference(_spec(batch=2, expert_grids=2, batching="none")).result
    loads = []
    for routing in ("uniform", "zipf:3"):
        r = run_inference(_spec(batch=2, expert_grids=2, routing=routing, output_len=40,
                                batching="none")).result
        assert r.tpot_s <= two.tpot_s
        stage, = r.per_stage
        assert 1 <= sum(stage["expert_grid_use"]) <= 2
        loads.append(stage["expert_load"])
    assert loads[1] > loads[0] >= 1


def test_sampled_serving_is_deterministic_and_the_executors_agree() -> None:
    spec = _spec(batch=3, expert_grids=2, routing="zipf:1.2", seed=5)
    a, b = run_inference(spec).result.to_dict(), run_inference(spec).result.to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b
    program = serving_program(spec, map_stages(spec))
    costs = cost_serving(program, spec)
    fast, ref = engine.simulate(None, program, costs), reference.simulate(None, program, costs)
    assert np.array_equal(fast.batches.emitted, ref.batches.emitted)
    other = _spec(batch=3, expert_grids=2, routing="zipf:1.2", seed=6)
    assert run_inference(other).result.tpot_s != a["tpot_s"]


@pytest.mark.parametrize("model", ["tiny-moe", "llama3-8b-dense-tiny"])
def test_nothing_asked_changes_nothing(model: str) -> None:
    """Balanced routing and one grid a layer are the defaults: a result with them said explicitly is
    the default's, byte for byte, with no ``moe`` block (a dense model too; sampled routing on it is
    refused: test_expert_keys_the_model_cannot_use_are_one_line)."""
    overrides = {} if model == "tiny-moe" else {"model.experts": 0, "model.top_k": 0,
                                                "model.expert_intermediate": 0, "model.ffn_intermediate": 96}
    plain = load_inference_data(TINY, overrides=overrides).spec
    said = load_inference_data(TINY, overrides={**overrides, "inference.moe.routing": "balanced",
                                                "inference.moe.expert_grids": 1}).spec
    a, b = run_inference(plain).result.to_dict(), run_inference(said).result.to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b and "moe" not in a and "grids" not in a["per_stage"][0]


def test_deepseek_v3_is_served_with_expert_parallelism() -> None:
    """DeepSeek-V3 (3 dense layers, then 58 of 256 experts) on CS-3s: one layer per wafer at one grid a
    layer; with ``expert_grids: auto`` the search spreads each MoE stage's experts over more grids and
    needs fewer wafers."""
    one = map_stages(load_inference(hardware="wse3", model="deepseek-v3").spec)
    auto = map_stages(load_inference(hardware="wse3", model="deepseek-v3",
                                     overrides={"inference.moe.expert_grids": "auto"}).spec)
    assert one.feasible and auto.feasible and auto.expert_grids > 1
    assert auto.systems < one.systems
    assert auto.stages[0].layers == (0, 1, 2) and auto.stages[0].grids == 1  # the dense layers on one grid
    assert all(s.grids == auto.expert_grids for s in auto.stages[1:])


def test_bad_routing_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r'inference.moe.routing: expected "balanced", "uniform" or "zipf'):
        load_inference(overrides={"inference.moe.routing": "zipf:-1"})
    assert experts_per_grid(256, 3) == 86 and experts_per_grid(4, 1) == 4
    assert load_model("deepseek-v3").dense_layers == 3


@pytest.mark.parametrize(("overrides", "line"), [
    ({"inference.moe.expert_grids": 5},
     "--set: inference.moe.expert_grids: expected expert_grids at most the model's 4 experts (a grid beyond them "
     "would hold none), got 5"),
    ({**{f"model.{k}": 0 for k in ("experts", "top_k", "expert_intermediate")}, "model.ffn_intermediate": 96,
      "inference.moe.expert_grids": 2},
     "--set: inference.moe.expert_grids: expected expert_grids: 1 or auto with a dense model (tiny-moe has no experts"),
    ({**{f"model.{k}": 0 for k in ("experts", "top_k", "expert_intermediate")}, "model.ffn_intermediate": 96,
      "inference.moe.routing": "uniform"},
     "--set: inference.moe.routing: expected routing: balanced with a dense model (tiny-moe has no experts to route)"),
])
def test_expert_keys_the_model_cannot_use_are_one_line(overrides: dict, line: str) -> None:
    """Issue 40: 5 grids for 4 experts (one grid empty) was served; expert_grids and sampled routing on a
    dense model were ignored. Each is refused at its key; 4 grids of 4 experts, and auto on a dense model,
    are not."""
    with pytest.raises(ConfigError) as e:
        load_inference_data(TINY, overrides=overrides)
    assert str(e.value).startswith(line) and "\n" not in str(e.value)
    assert _spec(expert_grids=4).inference.moe.expert_grids == 4
    dense = {**{f"model.{k}": 0 for k in ("experts", "top_k", "expert_intermediate")}, "model.ffn_intermediate": 96}
    assert load_inference_data(TINY, overrides={**dense, "inference.moe.expert_grids": "auto"}).spec.model.experts == 0


def test_the_work_estimate_counts_the_draws() -> None:
    """Sampled routing draws one key per (decode token, expert, MoE layer): batch 3 × 4 decode tokens
    × 4 experts × 2 layers = 96 keys, none when balanced."""
    from wsesim.experiments.inference import serving_estimate
    from wsesim.experiments.serving_estimate import ROUTING_DRAW_S

    spec = _spec(batch=3, routing="uniform")
    e = serving_estimate(spec, map_stages(spec))
    assert e.draws == 96 and serving_estimate(_spec(batch=3), map_stages(spec)).draws == 0
    assert e.seconds == pytest.approx(serving_estimate(_spec(batch=3), map_stages(spec)).seconds
                                      + 96 * ROUTING_DRAW_S)


def test_continuous_batches_pay_the_trips() -> None:
    """Under continuous batching a batch of b decode tokens sends b vectors to the further grid: for
    b = 2 on the 4 × 8 grids, 128 values, 32 a row, 16 wavelets: 16 + 5 + 4 = 25 cycles each way, 50 a
    layer (b = 1: 34, as in the pipeline)."""
    spec = _spec(expert_grids=2, arrival="poisson", rate=1000, requests=4)
    program = serving_program(spec, map_stages(spec), requests_of(spec))
    cost, = cost_serving(program, spec).stages
    trips = [op for op in program.body[0].stages[0].decode if op.name == "expert_grids"]
    assert [cost.batches._kernel(op, op.dims, b) for op in trips for b in (1, 2)] == [34.0, 50.0] * 2
    assert run_inference(spec).result.feasible


SAMPLED_LOAD = {"arrival": "poisson", "rate": 2e5, "requests": 24, "batch": 8, "output_len": 12}


def test_sampled_routing_under_load_is_drawn_per_iteration_on_both_executors() -> None:
    """Each decode iteration's tokens draw their experts then, stage by stage from one generator each:
    both executors log the same iterations bit for bit, and the same seed the same run."""
    spec = _spec(routing="zipf:1.2", **SAMPLED_LOAD)
    fast, ref = (run_inference(spec.on(engine)) for engine in ("fast", "reference"))
    a, b = fast.trace.batches, ref.trace.batches
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        assert (x == y if isinstance(x, tuple | int) else np.array_equal(x, y, equal_nan=True)), name
    assert fast.result.batching == "continuous"
    again = run_inference(spec).result.to_dict() | {"wall_s": 0}
    assert again == fast.result.to_dict() | {"wall_s": 0}


def test_a_sampled_batch_waits_for_its_busiest_expert() -> None:
    """An expert is its own region and a layer's experts run at once, so a batch's expert kernels take the
    busiest expert's tokens: never fewer than balanced routing's ⌈b·k/E⌉, so sampled TPOT is never below
    balanced's (the same arrivals: the routing draws come from a stream of their own), and a skew of
    Zipf α = 3 concentrates the draws on a hot expert, slower still than uniform."""
    tpot = {r: run_inference(_spec(routing=r, **SAMPLED_LOAD)).result.tpot_s
            for r in ("balanced", "uniform", "zipf:3")}
    assert tpot["balanced"] <= tpot["uniform"] < tpot["zipf:3"]
    stage = cost_serving(*(lambda s: (serving_program(s, map_stages(s), requests_of(s)), s))(
        _spec(**SAMPLED_LOAD))).stages[0].batches
    even = Draw((4, 4), (4, 4, 4, 4))  # 8 tokens · 2 of 4 experts: 4 each, balanced
    assert stage.decode_sampled(8, even) == stage.decode(8)
    assert stage.decode_sampled(8, Draw((8, 4), (8, 8, 0, 0))) > stage.decode(8)
