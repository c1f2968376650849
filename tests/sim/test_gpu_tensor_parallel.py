"""Tensor parallelism in a GPU node's training step (docs/model.md §13.8, ``training.tensor_parallel``): one
GPU's GEMM shapes under Megatron-LM's split, the group's all-reduces counted, one GPU's HBM by hand, a dense
70B that only fits a node split eight ways, and a group size the node or the model cannot take refused."""

from __future__ import annotations

from math import ceil

import pytest

import wsesim.sim.cost.gpu_training as cost
from wsesim.cli.main import main
from wsesim.experiments.api import load_experiment
from wsesim.experiments.gpu_training import _plan, gpu_batch
from wsesim.experiments.runner import run_experiment
from wsesim.model.gpu_memory import ADAM_BYTES, gpu_memory
from wsesim.model.vocabulary import OpKind, Pass
from wsesim.sim.programs.builders.training import micro_batch_ops

# llama3-8b: H = 4,096, 32 heads of 128 (q and o 4,096 wide), 8 KV heads (k and v 1,024 each),
# F = 14,336 (SwiGLU), V = 128,256, untied. Two layers, S = 256, B = 1: T = 256 tokens a group.
SMALL = {"model.layers": 2, "training.seq_len": 256, "training.batch_per_tile": 1}


def _spec(model: str = "llama3-8b", hardware: str = "h100", **over):
    return load_experiment(model=model, hardware=hardware, overrides=over).spec


def _local_params(layers: int) -> int:
    """llama3-8b's parameters on one GPU of a group of 2: per layer q/k/v/o over 16 heads and 4 KV heads
    (4,096 x (2,048 + 512 + 512 + 2,048)), gate, up and down over F/2 = 7,168 (3 x 4,096 x 7,168), the
    two norms and the QK-norm weights whole (2 x 4,096 + 2 x 128, as ``LayerShapes`` counts a layer's);
    the embedding's and the LM head's 64,128 rows of 4,096: 743,457,280 (of 1,486,897,664)."""
    return layers * (4096 * 5120 + 3 * 4096 * 7168 + 2 * 4096 + 2 * 128) + 2 * 64128 * 4096


def test_one_gpus_gemms_are_megatrons_halves_at_tp_2() -> None:
    spec = _spec(**SMALL, **{"training.tensor_parallel": 2})
    B, tokens, _ = gpu_batch(spec)
    ops = micro_batch_ops(_plan(spec, B, tokens))
    first = {op.kind: op for op in ops if getattr(op, "pass_", None) == Pass.FWD and op.layer == 0}
    # column-parallel q/k/v: N = 3,072 of 6,144; row-parallel o_proj: K = 2,048 of 4,096 (M = B·S = 256)
    assert first[OpKind.ATTENTION].matmuls[:2] == ((256, 4096, 3072), (256, 2048, 4096))
    # column-parallel gate and up: N = 2 x 7,168 of 2 x 14,336; row-parallel down: K = 7,168 of 14,336
    assert first[OpKind.FFN].matmuls == ((256, 4096, 14336), (256, 7168, 4096))
    bwd = next(op for op in ops if op.kind == OpKind.FFN and op.pass_ == Pass.BWD and op.layer == 0)
    # each one's input gradient (M, N, K) and weight gradient (K, M, N) of the halves
    assert bwd.matmuls == ((256, 14336, 4096), (4096, 256, 14336), (256, 4096, 7168), (7168, 256, 4096))


@pytest.mark.parametrize(("activations", "recompute", "per_layer"), [
    ("store", "twice", 4),  # Megatron's f and g: after attention and after the FFN, forward and backward
    ("recompute", "twice", 5),  # and the recomputed attention that rebuilds the FFN's input
    ("recompute", "once", 4),  # its output kept: the recompute only rebuilds attention's internals
])
def test_the_group_sums_its_activations_four_times_a_layer(monkeypatch: pytest.MonkeyPatch, activations: str,
                                                          recompute: str, per_layer: int) -> None:
    calls: list[tuple[str, int, float]] = []
    real = cost.collective

    def record(gpu, kind, nodes, gpus, nbytes, *args, **kwargs):
        calls.append((kind, gpus, nbytes))
        return real(gpu, kind, nodes, gpus, nbytes, *args, **kwargs)

    monkeypatch.setattr(cost, "collective", record)
    r = run_experiment(_spec(**SMALL, **{"training.tensor_parallel": 2, "training.activations": activations,
                                         "training.attention_recompute": recompute}))
    assert r.feasible
    # T·H values of 2 bytes over the 2 GPUs of a group: 256 x 4,096 x 2 = 2,097,152 bytes
    assert calls.count(("allreduce", 2, 256 * 4096 * 2)) == per_layer * 2
    # the gradients over the 8 / 2 = 4 data-parallel groups: one GPU's share, 2 bytes a parameter
    assert calls.count(("allreduce", 4, _local_params(2) * 2)) == 1
    assert len(calls) == per_layer * 2 + 1  # a dense model: no all-to-all
    assert r.gpu["tensor_parallel"] == 2 and r.gpu["data_parallel"] == 4
    assert r.tokens_per_step == 4 * 256 and r.global_batch == 4  # four groups' tokens, not eight GPUs'
    assert r.gpu["seconds_by_part"]["tensor_allreduce"] > 0


def test_tp_1_has_no_group_all_reduce(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = cost.collective
    monkeypatch.setattr(cost, "collective", lambda gpu, kind, nodes, gpus, nbytes, *a, **k: calls.append(gpus)
                        or real(gpu, kind, nodes, gpus, nbytes, *a, **k))
    r = run_experiment(_spec(**SMALL))
    assert calls == [8] and "tensor_allreduce" not in r.gpu["seconds_by_part"]
    assert r.tokens_per_step == 8 * 256


def test_one_gpus_hbm_at_tp_2_by_hand() -> None:
    spec = _spec(**SMALL, **{"training.tensor_parallel": 2})
    mem = gpu_memory(spec.hardware, spec.model, spec.training, 1)
    local = _local_params(2)
    assert mem.parts["weights"] == mem.parts["gradients"] == local * 2
    assert mem.parts["optimizer"] == ceil(local / 4) * ADAM_BYTES  # sharded over the 4 groups
    # recompute: each layer's input (H = 4,096, whole on every GPU of the group) and one layer's set:
    # two norm inputs 2 x 4,096, q 2,048, k 512, v 512, the attention output 2,048, the FFN input 4,096,
    # gate, up and their product 3 x 7,168; 256 tokens at 2 bytes
    assert mem.parts["activations"] == 256 * (2 * 4096 + 2 * 4096 + 2048 + 512 + 512 + 2048 + 4096
                                               + 3 * 7168) * 2
    assert mem.parts["logits"] == 256 * 64128 * 4  # vocabulary-parallel: V / 2 rows a GPU
    full = gpu_memory(spec.hardware, spec.model, _spec(**SMALL).training, 1)
    assert mem.total < full.total


def test_a_dense_70b_trains_on_a_node_only_split_eight_ways() -> None:
    over = {"training.seq_len": 4096}
    alone = run_experiment(_spec("llama3.1-70b", "b200", **over))
    assert not alone.feasible and "HBM" in alone.infeasible_reason
    split = run_experiment(_spec("llama3.1-70b", "b200", **over, **{"training.tensor_parallel": 8}))
    assert split.feasible and split.batch_per_tile >= 1 and split.throughput_tokens_per_s > 0
    assert split.gpu["data_parallel"] == 1 and split.tokens_per_step == split.batch_per_tile * 4096
    assert split.gpu["hbm_bytes_per_gpu"] <= split.gpu["hbm_capacity_bytes"]
    # on 8 x H100 even tp = 8 holds 1/8 of ~70.6 x 10⁹ parameters at 2 + 2 + 12 bytes, > 80 GB: a node
    # is too small for the model's training state, whatever the split (pipeline over nodes is not modelled)
    h100 = run_experiment(_spec("llama3.1-70b", **over, **{"training.tensor_parallel": 8}))
    assert not h100.feasible and "HBM" in h100.infeasible_reason


@pytest.mark.parametrize(("sets", "expected"), [
    (["training.tensor_parallel=3"], "training.tensor_parallel: expected a divisor of the node's 8 GPUs, got 3"),
    (["training.tensor_parallel=8", "model.heads=12", "model.kv_heads=4"],
     "training.tensor_parallel: expected a tensor-parallel size dividing the model's 12 attention heads, got 8"),
    (["training.tensor_parallel=2", "model.heads=24", "model.kv_heads=3"],
     "training.tensor_parallel: expected a tensor-parallel size that divides the model's 3 KV heads"),
])
def test_a_group_the_node_or_model_cannot_take_is_refused_in_one_line(
        capsys: pytest.CaptureFixture[str], sets: list[str], expected: str) -> None:
    args = ["run", "--hardware", "h100", "--model", "llama3-8b"]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err and "Traceback" not in err


def test_an_moe_models_experts_stay_over_all_gpus_and_route_the_groups_tokens(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int, float]] = []
    real = cost.collective
    monkeypatch.setattr(cost, "collective", lambda gpu, kind, nodes, gpus, nbytes, *a, **k: calls.append(
        (kind, gpus, nbytes)) or real(gpu, kind, nodes, gpus, nbytes, *a, **k))
    spec = _spec("tiny-moe", **{"training.seq_len": 256, "training.batch_per_tile": 2,
                                "training.tensor_parallel": 2, "training.activations": "store"})
    _, tokens, _ = gpu_batch(spec)
    # 8 / 2 = 4 groups of T = 2 x 256 = 512 distinct tokens, 2 copies each, on every one of the 2 layers
    assert tokens.sum(axis=1).tolist() == [4 * 512 * 2] * 2
    r = run_experiment(spec)
    assert r.feasible and r.gpu["expert_parallel"] == 8 and r.gpu["experts_per_gpu"] == 1
    # each GPU sends its 1/8 of a layer's 4,096 routed copies of H = 64 values at 2 bytes, there and back,
    # forward and backward: 4 all-to-alls a layer
    assert calls.count(("alltoall", 8, 4096 / 8 * 64 * 2)) == 4 * 2
    assert calls.count(("allreduce", 2, 512 * 64 * 2)) == 4 * 2  # the group's T·H, 4 a layer


@pytest.mark.parametrize(("model", "hardware", "tp", "feasible"), [
    ("llama3-8b", "h100", 1, True),  # fits alone: no group
    ("llama3.1-70b", "b200", 8, True),  # 1, 2 and 4 do not fit (397, 254 and 183 GB a GPU at B = 1)
    ("llama3.1-70b", "h100", 8, False),  # none fits: the largest allowed, with its reason
])
def test_auto_is_the_smallest_group_that_fits(model: str, hardware: str, tp: int, feasible: bool) -> None:
    r = run_experiment(_spec(model, hardware, **{"training.seq_len": 4096, "training.tensor_parallel": "auto"}))
    assert r.gpu["tensor_parallel"] == tp and r.feasible == feasible
