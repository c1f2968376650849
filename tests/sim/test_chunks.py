"""The weight-chunk plan (wsesim.sim.programs.chunks): what each chunk is, in the order of first use, whole or in
equal pieces; the experts' chunks one expert after another, indexed by ``expert_chunks``."""

from __future__ import annotations

import pytest

from wsesim.config.loader import load_experiment_data
from wsesim.model.shapes import BACKWARD_OPS, FORWARD_OPS, LayerShapes
from wsesim.sim.programs.chunks import plan_chunks

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 32, "batch_per_tile": 2, "tiles": 2}, "simulation": {"granularity": "pe"}}


@pytest.mark.parametrize(("overrides", "recompute"), [
    ({}, True),
    ({"training.activations": "store"}, False),
    ({"hardware.runtime.staging_buffer": "256 B", "model.experts": 5}, True),   # tensors in pieces; re-streamed
    ({"hardware.runtime.staging_buffer": "1 KiB", "model.experts": 3}, True),
])
def test_every_experts_tensor_is_where_expert_chunks_says(overrides: dict, recompute: bool) -> None:
    spec = load_experiment_data(TINY, overrides=overrides).spec
    plan = plan_chunks(spec.hardware, spec.model, recompute)
    shapes, experts = LayerShapes(spec.model), spec.model.experts
    seen = set()
    for (pass_, layer, op), index in plan.expert_chunks.items():
        assert index.shape[1] == experts
        for e in range(experts):
            chunks = index[:, e].tolist()
            assert chunks == list(range(chunks[0], chunks[0] + len(chunks)))  # an op's pieces are consecutive
            assert {plan.names[i] for i in chunks} == {(pass_, layer, op, e)}
            assert sum(plan.sizes[i] for i in chunks) == pytest.approx(shapes.expert_op_bytes(op), rel=1e-12)
            assert len({plan.sizes[i] for i in chunks}) == 1  # equal pieces
            seen.update(chunks)
    expert_chunk_ids = {i for i, name in enumerate(plan.names) if len(name) == 4}
    assert seen == expert_chunk_ids
    # keys index the whole-wafer tensors, and only those
    assert all(len(key) < 4 for key in plan.keys)
    for key, (first, last) in plan.keys.items():
        assert {plan.names[i] for i in range(first, last + 1)} == {key}
    assert len(expert_chunk_ids) + sum(last - first + 1 for first, last in plan.keys.values()) == len(plan)


def test_experts_follow_one_another_in_the_order_of_their_ops() -> None:
    """In a layer, expert 0's ops (gate_up, down forward; down, gate_up backward), then expert 1's, ..."""
    spec = load_experiment_data(TINY, overrides={"model.experts": 3}).spec
    plan = plan_chunks(spec.hardware, spec.model, False)
    for pass_, ops in (("fwd", FORWARD_OPS), ("bwd", BACKWARD_OPS)):
        names = [n for n in plan.names if len(n) == 4 and n[0] == pass_ and n[1] == 0]
        assert names == [(pass_, 0, op, e) for e in range(3) for op in ops]
