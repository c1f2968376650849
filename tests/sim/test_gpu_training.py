"""Training on a GPU node (docs/model.md §13.8): a dense layer's forward FFN by hand (tile waves at the
tensor cores' rate, the activation at HBM bandwidth), the HBM check's parts by hand and its refusal, the
result's figures from the step, and ``wsesim run --hardware h100`` on the command line."""

from __future__ import annotations

import json
from math import ceil

import pytest

from wsesim.cli.main import main
from wsesim.experiments.api import load_experiment
from wsesim.experiments.gpu_training import _plan, gpu_batch
from wsesim.experiments.runner import run_experiment
from wsesim.kernels.gpu.device import Gpu
from wsesim.model.gpu_memory import ADAM_BYTES, gpu_memory, split_params
from wsesim.model.shapes import LayerShapes
from wsesim.model.vocabulary import OpKind, Pass
from wsesim.sim.cost.gpu_training import cost_gpu_step
from wsesim.sim.programs.builders.training import micro_batch_ops

# one dense layer whose FFN GEMMs run whole waves of 128 x 256 tiles on H100's 132 SMs: T = 33 x 1,024 =
# 33,792 tokens = 264 row tiles, H = F = 4,096 (SwiGLU: gate and up as one GEMM of N = 8,192)
WAVES = {"model.hidden_size": 4096, "model.ffn_intermediate": 4096, "model.layers": 1,
         "model.heads": 32, "model.kv_heads": 8, "model.head_dim": 128, "training.seq_len": 1024,
         "training.batch_per_tile": 33, "training.activations": "store"}


def _spec(model: str = "llama3-8b", hardware: str = "h100", **over):
    return load_experiment(model=model, hardware=hardware, overrides=over).spec


def test_a_dense_layers_forward_ffn_is_its_tile_waves_by_hand() -> None:
    spec = _spec(**WAVES)
    B, tokens, _ = gpu_batch(spec)
    ops = micro_batch_ops(_plan(spec, B, tokens))
    ffn = [op for op in ops if getattr(op, "kind", None) == OpKind.FFN and op.pass_ == Pass.FWD]
    gpu = Gpu.of(spec.hardware, "bf16")
    step = cost_gpu_step(spec, gpu, B, tokens, tuple(ffn))
    # a tile's 2 x 128 x 256 x K FLOPs at one SM's 4,096 FLOP/clock x 1.83 GHz x 0.828 (tensor_efficiency);
    # gate_up: 264 x 32 = 8,448 tiles = 64 waves, down: 264 x 16 = 4,224 tiles = 32 waves, both K = 4,096,
    # compute-bound (each wave's panels well under its arithmetic at 3.35 TB/s)
    tile = 2 * 128 * 256 * 4096 / (4096 * 1.83e9 * 0.828)
    # SwiGLU's product: 33,792 x 4,096 values, gate and up read, the product written, 2 bytes each
    activation = 33792 * 4096 * 3 * 2 / 3.35e12
    assert step.parts["ffn"] == pytest.approx(96 * tile + activation, rel=1e-12)
    assert step.flops == pytest.approx(2 * 33792 * 4096 * (8192 + 4096), rel=1e-12)


def test_the_hbm_parts_by_hand_and_a_model_too_large_is_refused_with_its_bytes() -> None:
    spec = _spec("qwen3-30b-a3b", **{"training.batch_per_tile": 1})
    m, t = spec.model, spec.training
    dense, mine = split_params(m, 8)
    s = LayerShapes(m)
    assert mine == s.moe_layers * 16 * s.expert_params  # 128 experts over 8 GPUs
    mem = gpu_memory(spec.hardware, m, t, 1)
    assert mem.parts["weights"] == mem.parts["gradients"] == (dense + mine) * 2
    assert mem.parts["optimizer"] == (ceil(dense / 8) + mine) * ADAM_BYTES  # the experts' state not sharded
    assert mem.parts["logits"] == 4096 * m.vocab_size * 4
    r = run_experiment(_spec("llama3.1-70b"))
    assert not r.feasible and "HBM: " in r.infeasible_reason and "> 80.0 GB" in r.infeasible_reason


def test_a_step_on_a_node_is_its_gpus_tokens_over_its_parts() -> None:
    spec = _spec("tiny-moe", **{"training.seq_len": 256, "training.batch_per_tile": 2, "training.tiles": 2})
    r = run_experiment(spec)
    assert r.feasible and r.global_batch == 8 * 2 * 2 and r.tokens_per_step == 8 * 2 * 2 * 256
    assert r.step_time_s == pytest.approx(sum(r.gpu["seconds_by_part"].values()), rel=1e-12)
    assert r.throughput_tokens_per_s == pytest.approx(r.tokens_per_step / r.step_time_s, rel=1e-12)
    peak = Gpu.of(spec.hardware, "bf16").peak_flops_per_s
    assert r.mfu == pytest.approx(r.model_flops_per_step / (r.step_time_s * 8 * peak), rel=1e-12)
    assert 0 < r.mfu < 1 and r.gpu["experts_per_gpu"] == 1 and r.gpu["seconds_by_part"]["dispatch"] > 0
    # eight GPUs at TDP for the step, the node's floor beside them
    hw = spec.hardware
    assert r.energy_per_step_j == pytest.approx((8 * hw.power.gpu_watts + hw.power.node_floor_watts)
                                                * r.step_time_s, rel=1e-12)
    # the same experiment, tiled once: the same tokens in one tile of twice the sequences
    one = run_experiment(_spec("tiny-moe", **{"training.seq_len": 256, "training.batch_per_tile": 4}))
    assert one.tokens_per_step == r.tokens_per_step and one.step_time_s != r.step_time_s


def test_wsesim_run_on_a_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--hardware", "h100", "--model", "tiny-moe", "--set", "training.seq_len=256", "--set",
                 "training.batch_per_tile=2",
                 "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["feasible"] and r["gpu"]["gpus"] == 8 and r["hardware"] == "h100"
    assert main(["run", "--hardware", "h100", "--model", "tiny-moe", "--set", "training.seq_len=256", "--set",
                 "training.batch_per_tile=2"]) == 0
    out = capsys.readouterr().out
    assert "8 GPUs, data parallel, expert parallel (1 expert a GPU)" in out  # tiny-moe: 4 experts, 8 GPUs
    assert "HBM per GPU" in out and "peak SRAM" not in out
