#!/usr/bin/env python3
"""Build ``docs/validation.md``: every anchor wsesim is checked against, the published figure beside
wsesim's, the residual, and whether the figure set a parameter or is a prediction.

    python scripts/validation.py            # rewrite docs/validation.md
    python scripts/validation.py --check    # exit 1 if the file differs from what the code gives now

Each anchor computes wsesim's figure from the shipped presets with no per-point tuning; a test
(tests/test_validation.py) runs ``--check`` so that the table's wsesim column never drifts from the code.
Anchors are data (``ANCHORS``): a new one is a row with a function that returns wsesim's figure.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import yaml
from _energy_anchors import energy_anchors  # (beside this script)
from _gpu_anchors import gpu_anchors  # (beside this script)
from _serving_anchors import serving_anchors  # (beside this script)

from wsesim.config.loader import load_experiment, load_hardware
from wsesim.experiments.runner import run_experiment
from wsesim.experiments.tune import tune
from wsesim.fabric import FlowFabric, PacketFabric, row_multicast, single_message
from wsesim.fabric.mesh import Mesh
from wsesim.kernels import run_kernel
from wsesim.model.attention_tiling import AttentionTiling

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "validation.md"
CASES = ROOT / "tests" / "data" / "mlsysim_cases.yaml"

PARAMETER, PREDICTION, CHECK = "set a parameter", "prediction", "exact check"


@dataclass(frozen=True)
class Anchor:
    group: str
    what: str
    published: str  # as published, with its unit
    value: float | None  # the published figure as a number in ``unit`` (None: qualitative)
    unit: str
    source: str
    use: str  # PARAMETER, PREDICTION or CHECK
    wsesim: Callable[[], float]
    digits: int = 3
    note: str = ""
    kernel: Callable[[], float] | None = None  # the same figure under simulation.compute: kernel (a row of its own)


# ------------------------------------------------------------------------------------------ BTA


@cache
def _bta(experts: int, top_k: int, compute: str = "constant") -> tuple[float, float]:
    """(G=1, tuned) tokens/s of the shipped experiment (Qwen3-30B-A3B on WSE-2, its default mapping)."""
    loaded = load_experiment(overrides={"model.experts": experts, "model.top_k": top_k,
                                        "simulation.compute": compute})
    return run_experiment(loaded.spec).throughput_tokens_per_s, tune(loaded).best.throughput_tokens_per_s


def _speedup(experts: int, top_k: int, compute: str = "constant") -> float:
    g1, tuned = _bta(experts, top_k, compute)
    return tuned / g1


def _tuned_spread(compute: str = "constant") -> float:
    """Largest deviation of the tuned throughput from its mean over 8–128 experts (top_k 8), in %."""
    tuned = [_bta(e, 8, compute)[1] for e in (8, 16, 32, 64, 128)]
    mean = sum(tuned) / len(tuned)
    return 100 * max(abs(t - mean) for t in tuned) / mean


def _g1_drop(compute: str = "constant") -> float:
    """G=1 throughput at 128 experts over 8 experts (top_k 8)."""
    return _bta(128, 8, compute)[0] / _bta(8, 8, compute)[0]


BTA = "Batch Tiling on Attention (Soboleva et al., SC Workshops '25), Figs. 2–3"

# ------------------------------------------------------------------------------------ hardware


def _total(name: str, key: str, scale: float) -> Callable[[], float]:
    return lambda: load_hardware(name).totals()[key] / scale


# ------------------------------------------------------------------------------------- mlsysim


def _mlsysim(case: int, name: str) -> Callable[[], float]:
    def value() -> float:
        c = yaml.safe_load(CASES.read_text(encoding="utf-8"))["cases"][case]
        inputs = dict(c["inputs"])
        bpv = inputs.pop("bytes_per_value")
        a = AttentionTiling(**inputs, bytes_per_value=f"{bpv['value']} {bpv['unit']}")
        return a.mlsysim_units()[name][0]

    return value


def _mlsysim_anchors() -> list[Anchor]:
    cases = yaml.safe_load(CASES.read_text(encoding="utf-8"))["cases"]
    out = []
    for i, c in enumerate(cases):
        for name in ("score_matrix", "stored_ratio"):
            published, unit = c["outputs"][name]["value"], c["outputs"][name]["unit"]
            label = ", ".join(f"{k} {v}" for k, v in c["inputs"].items() if k in ("seq_len", "tile", "heads"))
            out.append(Anchor("mlsysim attention tiling", f"{name} ({label})", f"{published:g} {unit}",
                              float(published), unit, "mlsysim 0.3.0, AttentionTilingScenario", CHECK,
                              _mlsysim(i, name), digits=6))
    return out


# -------------------------------------------------------------------------------------- fabric


def _lone_message(mode: str) -> Callable[[], float]:
    """A lone 10-wavelet message over 5 hops on WSE-2: 2·T_R + 5·t_h + (10 − 1) = 4 + 5 + 9 = 18 cycles."""
    def value() -> float:
        mesh = Mesh.from_hardware(load_hardware("wse2"), "pe", shape=(8, 8))
        fabric = FlowFabric(mesh) if mode == "flow" else PacketFabric(mesh)
        return fabric.simulate(single_message(mesh, hops=5, wavelets=10)).cycles

    return value


def _multicast_gap() -> float:
    """The gap between successive PEs of a row multicast (the simprint tutorial shows 2: 1156, 1158, 1160;
    the one hop of the model, Luczynski et al.'s, gives 1)."""
    mesh = Mesh.from_hardware(load_hardware("wse2"), "pe", shape=(8, 8))
    result = PacketFabric(mesh).simulate(row_multicast(mesh, hops=3, wavelets=1))
    times = next(iter(result.multicast_arrivals.values()))
    return times[1] - times[0]


# ----------------------------------------------------------------------------------- dense models


def _samples_per_s(hardware: str, model: str, seq_len: int, global_batch: int,
                   systems: int = 1, compute: str = "constant") -> Callable[[], float]:
    """Sequences per second of ``model`` on ``systems`` systems (behind SwarmX if more than one) at the
    published global batch, with the shipped experiment's defaults otherwise (recompute, standard
    attention, G = 1, B and the micro-batches sized by the memory model: the fewest micro-batches that fit
    each system's share)."""
    def value() -> float:
        overrides: dict[str, object] = {"training.seq_len": seq_len, "training.global_batch": global_batch,
                                        "simulation.compute": compute}
        if systems > 1:
            overrides.update({"cluster.systems": systems, "cluster.interconnect": "swarmx"})
        r = run_experiment(load_experiment(hardware=hardware, model=model, overrides=overrides).spec)
        return r.cluster_throughput_tokens_per_s / r.seq_len

    if compute == "constant":  # the same run under the kernel model, for the row beside it
        value.kernel = _samples_per_s(hardware, model, seq_len, global_batch, systems, "kernel")  # type: ignore[attr-defined]
    return value


# Every run log below is a page in an Argonne (ALCF) GitHub repository, pinned to the commit read: the page
# changes between releases (commands, systems, logs), so an unpinned link may no longer show the figure.
_ALCF = "ALCF AI Testbed run log"
_UG = f"{_ALCF}: argonne-lcf/user-guides, docs/ai-testbed/cerebras/example-programs.md"
_SC23 = f"{_ALCF}: argonne-lcf/AIaccelerators-SC23-tutorial, Cerebras/gpt-j.md @ 3d4372c (2023-11-10)"
_R171 = f"{_UG} @ 80b46ac (2023-04-03; log of 2023-03-16)"
_R180 = f"{_UG} @ ba54796 (2023-05-17)"
_R203 = f"{_UG} @ a8a674d (2023-11-29)"
_R290 = f"{_UG} @ 01e8966 (2026-02; logs of 2025-10)"
_LLAMA = (f"{_ALCF}: argonne-lcf/ai-science-training-series, 07_AITestbeds/Cerebras/llama2-7b.md @ a2732c1 "
          "(log of 2024-03-21); Model Zoo params_llama_7b.yaml")
_DENSE = "dense models on CS-2/CS-3"
_OLD = "prediction; older software release, shown not fitted"
_S_GPTJ = "S = 2,048 assumed (Model Zoo default; the log does not state it)"
_S_LLAMA2 = "S not stated in the log (Model Zoo params_llama2_7b.yaml: 4,096)"

# ------------------------------------------------------------------------------------- clusters

# A trillion-parameter model: Sandia's shape is not published. Kimi K2's is (Moonshot AI, model card and
# config.json): DeepSeek-V3's layer with 384 routed experts, 64 MLA heads, 61 layers of which the first is
# dense (FFN 18,432), a 163,840-token vocabulary; 1.03 T parameters as wsesim counts them. (A dense shape,
# Megatron-LM's 1 T of 128 layers of 25,600, does not fit one CS-3 in wsesim's memory model: 62 KB per PE
# at B = 1.) S = 2,048 assumed; B = 4 is what fits.
_K2 = {"model.layers": 61, "model.dense_layers": 1, "model.ffn_intermediate": 18432, "model.experts": 384,
       "model.heads": 64, "model.kv_heads": 64, "model.vocab_size": 163840, "training.seq_len": 2048}
_SANDIA = ("Cerebras press release \"Cerebras Demonstrates Trillion Parameter Model Training on a Single CS-3 "
           "System\" (NeurIPS 2024, 2024-12-10) and its press coverage (15.3× on 16 CS-3s)")


@cache
def _k2(systems: int, global_batch: int | None):
    overrides: dict[str, object] = dict(_K2)
    if global_batch:
        overrides["training.global_batch"] = global_batch
    if systems > 1:
        overrides.update({"cluster.systems": systems, "cluster.interconnect": "swarmx"})
    spec = load_experiment(hardware="wse3", model="deepseek-v3", overrides=overrides).spec
    return run_experiment(spec)


def _k2_tokens_per_s(systems: int, global_batch: int | None) -> float:
    return _k2(systems, global_batch).cluster_throughput_tokens_per_s


def _boundary_share() -> float:
    """What a step on 16 systems pays beyond one system's step, each system's batch fixed (the SwarmX tree:
    weights broadcast, gradients reduced), as a share of that step, %; 15.3× on 16 implies 16 / 15.3 − 1."""
    return 100 * (_k2(16, None).step_time_s / _k2(1, None).step_time_s - 1)


def _sandia(fixed_global_batch: bool) -> float:
    """16 CS-3s over one. At a fixed global batch of 64 sequences (one micro-batch of 4 per system at 16,
    16 back to back on one system) MemoryX's optimizer step, the same at any N, does not shrink with N;
    with each system's batch fixed (4 sequences) every step pays it once whatever N."""
    if fixed_global_batch:
        return _k2_tokens_per_s(16, 64) / _k2_tokens_per_s(1, 64)
    return _k2_tokens_per_s(16, None) / _k2_tokens_per_s(1, None)


# ----------------------------------------------------------------------------------------- kernels


def _kernel(kind: str, grid: tuple[int, int], algorithm: str, *, dtype: str = "fp16",
            shape: tuple[int, int, int] | None = None, wavelets: int = 1, figure: str = "cycles") -> Callable[[], float]:
    """One kernel on WSE-2, read as cycles, TFLOP/s (at the preset's 850 MHz) or % of the grid's peak."""
    def value() -> float:
        r = run_kernel(load_hardware("wse2"), kind, *grid, dtype=dtype, algorithm=algorithm, shape=shape,
                       wavelets=wavelets)
        return {"cycles": r.cycles, "tflops": r.flops_per_s / 1e12, "efficiency": 100 * r.efficiency,
                "network": r.cycles - r.overhead, "time_share": 100 * (r.compute + r.overhead) / r.cycles}[figure]

    return value


def _ratio(kind: str, grid: tuple[int, int], slow: str, fast: str, shape: tuple[int, int, int]) -> Callable[[], float]:
    """How many times faster ``fast`` runs than ``slow``, on WSE-2."""
    return lambda: _kernel(kind, grid, slow, shape=shape)() / _kernel(kind, grid, fast, shape=shape)()


def _weak_scaling() -> float:
    """FLOP per cycle per PE of 33,000³ on 750 × 750 over that of 3,300³ on 75 × 75 (the same 44 × 44
    blocks per PE): weak-scaling efficiency."""
    big = run_kernel(load_hardware("wse2"), "gemm", 750, 750, dtype="fp32", algorithm="summa", shape=(33000,) * 3)
    small = run_kernel(load_hardware("wse2"), "gemm", 75, 75, dtype="fp32", algorithm="summa", shape=(3300,) * 3)
    return big.efficiency / small.efficiency


_KERNELS = "kernels on WSE-2"
_LUCZ = "Near-Optimal Wafer-Scale Reduce (Luczynski et al., HPDC '24): their cost model"
_WLLM = "WaferLLM (He et al., OSDI '25)"
_MIYA = "Miyajima et al., GEMM on a CS-2 (IPSJ JIP 2026; SC24 workshop), abstract"
_GRID = "420 × 420 PEs assumed (not stated; WaferLLM's decode runs on 420² grids)"
_CONTRAST = "4,096³ fp16 assumed (a LLaMA3-8B prefill projection, as their 720² prefill; size not stated)"

# -------------------------------------------------------------------------------------- anchors

ANCHORS: list[Anchor] = [
    Anchor("BTA", "G=1 throughput at 128 experts over 8 experts (top_k 8)", "falls (Fig. 2)", None, "×", BTA,
           PREDICTION, _g1_drop, note="falls, as published", kernel=lambda: _g1_drop("kernel")),
    Anchor("BTA", "tuned-G throughput, largest deviation from its mean over 8–128 experts (top_k 8)",
           "\"nearly flat\" (Fig. 2)", None, "%", BTA, PREDICTION, _tuned_spread, kernel=lambda: _tuned_spread("kernel")),
    Anchor("BTA", "tuned / G=1 at 8 experts, top_k 8", "~1×", 1.0, "×", BTA, PREDICTION, lambda: _speedup(8, 8),
           kernel=lambda: _speedup(8, 8, "kernel")),
    Anchor("BTA", "tuned / G=1 at 128 experts, top_k 8", "~2× (\"up to 53 % slower\")", 2.0, "×", BTA,
           PARAMETER, lambda: _speedup(128, 8),
           note="gemm_efficiency (45 %) was chosen within its sourced range with this point in view",
           kernel=lambda: _speedup(128, 8, "kernel")),
    Anchor("BTA", "tuned / G=1 at 128 experts, top_k 1", "5–7× (\"up to 86 % slower\")", 6.0, "×", BTA, PREDICTION,
           lambda: _speedup(128, 1), kernel=lambda: _speedup(128, 1, "kernel")),
    Anchor("WSE-2 totals", "on-wafer SRAM", "40 GB", 40.0, "GB", "Cerebras CS-2 product page", PREDICTION,
           _total("wse2", "sram_total_bytes", 1e9), note="745,500 usable PEs vs ~850,000 cores counted"),
    Anchor("WSE-2 totals", "memory bandwidth", "20 PB/s", 20.0, "PB/s", "Cerebras CS-2 product page", PREDICTION,
           _total("wse2", "sram_bandwidth_bytes_per_s", 1e15), note="850 MHz and 745,500 PEs vs ~1 GHz, 850k"),
    Anchor("WSE-2 totals", "fabric bandwidth", "220 Pb/s", 220.0, "Pb/s", "Cerebras CS-2 product page", PREDICTION,
           _total("wse2", "fabric_bandwidth_bits_per_s", 1e15), note="as above"),
    Anchor("WSE-2 totals", "I/O per direction", "1.2 Tb/s", 150.0, "GB/s", "Cerebras glossary (MemoryX, SwarmX)",
           PARAMETER, _total("wse2", "io_bandwidth_bytes_per_s", 1e9)),
    Anchor("WSE-3 totals", "on-wafer SRAM", "44 GB", 44.0, "GB", "Cerebras CS-3 product page", PREDICTION,
           _total("wse3", "sram_total_bytes", 1e9)),
    Anchor("WSE-3 totals", "memory bandwidth", "21 PB/s", 21.0, "PB/s", "Cerebras CS-3 product page", PREDICTION,
           _total("wse3", "sram_bandwidth_bytes_per_s", 1e15), note="clock unpublished: WSE-2's 850 MHz"),
    Anchor("WSE-3 totals", "fabric bandwidth", "214 Pb/s", 214.0, "Pb/s", "Cerebras CS-3 product page", PREDICTION,
           _total("wse3", "fabric_bandwidth_bits_per_s", 1e15)),
    Anchor("WSE-3 totals", "I/O per direction", "30 % more than the CS-2's 1.2 Tb/s", 195.0, "GB/s",
           "Cerebras training docs, concepts page \"Cerebras Wafer-Scale Cluster\" (CS-3 section)", PARAMETER,
           _total("wse3", "io_bandwidth_bytes_per_s", 1e9), note="1.3 × 150 GB/s; spec sheets still list 1.2 Tb/s"),
    Anchor("fabric", "lone message, 10 wavelets over 5 hops (flow)", "18 cycles", 18.0, "cycles",
           "2·T_R + 5 hops · t_h + 9 (Luczynski et al.'s T_R = 2, t_h = 1)", CHECK, _lone_message("flow")),
    Anchor("fabric", "lone message, 10 wavelets over 5 hops (packet)", "18 cycles", 18.0, "cycles",
           "2·T_R + 5 hops · t_h + 9 (Luczynski et al.'s T_R = 2, t_h = 1)", CHECK, _lone_message("packet")),
    Anchor("fabric", "row multicast, gap between successive PEs", "2 cycles", 2.0, "cycles",
           "Cerebras SDK simprint tutorial (1156, 1158, 1160)", PREDICTION, _multicast_gap,
           note="one hop for every model: Luczynski et al.'s measured 1 cycle, not this 2 (see below)"),
    Anchor(_KERNELS, "chain reduce, 512 PEs in a row, 1 wavelet", "3,067 cycles", 3067.0, "cycles", _LUCZ, CHECK,
           _kernel("reduce", (512, 1), "chain", dtype="fp32", figure="network"), digits=6,
           note="B + 6(P − 1), the network their model times (the one instruction's issue, 7, apart); "
                "T_R = 2 and 1 cycle a hop come from the same paper, so this checks the mechanism"),
    Anchor(_KERNELS, "K-tree allreduce, one row of 420 PEs, 1 wavelet", "~546 cycles", 546.0, "cycles",
           f"{_WLLM}: its comm_pe.csl two_tree_allreduce (roots centred), as the issue's arithmetic reads it",
           PREDICTION, _kernel("allreduce", (1, 420), "ktree", figure="network"), digits=6,
           note="groups of 21 to their middle PE, then the 20 roots to the line's middle, then both ways"),
    Anchor(_KERNELS, "GEMV fp16 [1,16K] × [16K,16K], MeshGEMV", "1.2 µs = 1,320 cycles", 1320.0, "cycles",
           f"{_WLLM}, Table 6 (cycles at their 1.1 GHz)", PARAMETER,
           _kernel("gemv", (420, 420), "meshgemv", shape=(1, 16384, 16384)), digits=6,
           note=f"pe.instruction_issue (7 cycles) set on this point; {_GRID}"),
    Anchor(_KERNELS, "GEMV fp16 [1,32K] × [32K,32K], MeshGEMV", "2.03 µs = 2,233 cycles", 2233.0, "cycles",
           f"{_WLLM}, Table 6 (cycles at their 1.1 GHz)", PREDICTION,
           _kernel("gemv", (420, 420), "meshgemv", shape=(1, 32768, 32768)), digits=6, note=_GRID),
    Anchor(_KERNELS, "MeshGEMV over the vendor's pipelined GEMV, 16K", "~4.6× (≥ 3×)", 4.6, "×",
           f"{_WLLM}, §7.3 (2K–16K)", PREDICTION,
           _ratio("gemv", (420, 420), "pipeline", "meshgemv", (1, 16384, 16384)), note=_GRID),
    Anchor(_KERNELS, "MeshGEMM over SUMMA, 2K³ fp16 on 720 × 720 PEs", "2–3× (1.5–5×)", 2.5, "×",
           f"{_WLLM}, §7", PREDICTION, _ratio("gemm", (720, 720), "summa", "meshgemm", (2048,) * 3)),
    Anchor(_KERNELS, "MeshGEMM computational efficiency (time computing) on 720 × 720 PEs", "> 70 %", None, "%",
           f"{_WLLM}, Fig. 9 (share of time computing)", PREDICTION,
           _kernel("gemm", (720, 720), "meshgemm", shape=(4096,) * 3, figure="time_share"), note=_CONTRAST),
    Anchor(_KERNELS, "MeshGEMM, % of peak on 720 × 720 PEs", "> 70 %", None, "%", _WLLM, PREDICTION,
           _kernel("gemm", (720, 720), "meshgemm", shape=(4096,) * 3, figure="efficiency"),
           note=_CONTRAST + "; their figure is a time share (the row above), not a share of peak"),
    Anchor(_KERNELS, "SUMMA, % of peak on 720 × 720 PEs", "< 50 %", None, "%", _WLLM, PREDICTION,
           _kernel("gemm", (720, 720), "summa", shape=(4096,) * 3, figure="efficiency"), note=_CONTRAST),
    Anchor(_KERNELS, "Cannon, % of peak on 720 × 720 PEs", "< 50 %", None, "%", _WLLM, PREDICTION,
           _kernel("gemm", (720, 720), "cannon", shape=(4096,) * 3, figure="efficiency"), note=_CONTRAST),
    Anchor(_KERNELS, "GEMM fp32 33,000³ on 750 × 750 PEs (SUMMA)", "349.0 TFLOP/s", 349.0, "TFLOP/s", _MIYA,
           PREDICTION, _kernel("gemm", (750, 750), "summa", dtype="fp32", shape=(33000,) * 3, figure="tflops"),
           note="0.73 FLOP/cycle/PE published; 1 fp32 FMAC a cycle (the SDK: @fmacs has no SIMD mode): see below"),
    Anchor(_KERNELS, "GEMM fp32 weak scaling, 75² → 750² PEs at 44 × 44 blocks", "1.00", 1.0, "×", _MIYA, PREDICTION,
           _weak_scaling, digits=4),
    *_mlsysim_anchors(),
    Anchor(_DENSE, "GPT-J 6B, 1 CS-2, global batch 66 (Model Zoo R1.9.2)", "19.80 samples/s", 19.80,
           "samples/s", _SC23, PREDICTION, _samples_per_s("wse2", "gpt-j-6b", 2048, 66),
           note=f"no --num_csx (1 system); batch 66 = 13,200 samples / 200 steps; {_S_GPTJ}"),
    Anchor(_DENSE, "GPT-J 6B, 2 CS-2 (cluster), global batch 120 (R2.0.3)", "43.67 samples/s", 43.67,
           "samples/s", _R203, PREDICTION, _samples_per_s("wse2", "gpt-j-6b", 2048, 120, systems=2),
           note=f"--num_csx=2, \"uses 2 CS2s\"; batch 120 = 24,000 samples / 200 steps (60 per system); "
                f"{_S_GPTJ}; the first multi-system anchor"),
    Anchor(_DENSE, "GPT-J 6B, 2 CS-2 (cluster), global batch 130 (R1.8.0)", "33.98 samples/s", 33.98,
           "samples/s", _R180, _OLD, _samples_per_s("wse2", "gpt-j-6b", 2048, 130, systems=2),
           note=f"--num_csx=2; batch 130 = 65,000 samples / 500 steps; {_S_GPTJ}; the same two CS-2s run 1.29× "
                "faster on R2.0.3: software maturity, which no hardware model sees"),
    Anchor(_DENSE, "GPT-J 6B, 2 CS-2 (cluster), global batch 130 (R1.7.1)", "27.53 samples/s", 27.53,
           "samples/s", _R171, _OLD, _samples_per_s("wse2", "gpt-j-6b", 2048, 130, systems=2),
           note=f"--num_csx=2; batch 130 = 130,000 samples / 1,000 steps; {_S_GPTJ}; software maturity, as above"),
    Anchor(_DENSE, "GPT-J 6B, 1 CS-3, global batch 120 (R2.9.0)", "44.75 samples/s", 44.75, "samples/s", _R290,
           PREDICTION, _samples_per_s("wse3", "gpt-j-6b", 2048, 120),
           note=f"--num_csx=1, \"uses 1 CS3\"; batch 120 = 24,000 samples / 200 steps; {_S_GPTJ}"),
    Anchor(_DENSE, "LLaMA-7B, 1 CS-2, global batch 99", "20.45 samples/s", 20.45, "samples/s", _LLAMA, PREDICTION,
           _samples_per_s("wse2", "llama-7b", 2048, 99),
           note="\"Preparing to execute using 1 CSX\"; batch 99 as compiled (\"per-box batch size 99\"); S = 2,048 "
                "from the Model Zoo config the page copies; the log runs 99 without accumulation \"with 9 lanes\", "
                "wsesim's SRAM holds 9 (11 micro-batches): docs/model.md §2.4"),
    Anchor(_DENSE, "Llama-2-7B, 1 CS-3, global batch 1,024 (R2.9.0), at S = 2,048", "31.99 samples/s", 31.99,
           "samples/s", f"{_R290}; Model Zoo params_llama2_7b.yaml", PREDICTION,
           _samples_per_s("wse3", "llama2-7b", 2048, 1024),
           note=f"--num_csx=1; batch 1,024 = 204,800 samples / 200 steps; {_S_LLAMA2}: one of two readings"),
    Anchor(_DENSE, "Llama-2-7B, 1 CS-3, global batch 1,024 (R2.9.0), at S = 4,096", "31.99 samples/s", 31.99,
           "samples/s", f"{_R290}; Model Zoo params_llama2_7b.yaml", PREDICTION,
           _samples_per_s("wse3", "llama2-7b", 4096, 1024),
           note=f"as above; {_S_LLAMA2}: the other reading"),
    Anchor("clusters", "trillion-parameter model, 1 → 16 CS-3, global batch fixed at 64 × 2,048", "15.3×", 15.3,
           "×", _SANDIA, PREDICTION, lambda: _sandia(True),
           note="model, S and batch assumed (Kimi K2's shape; the smallest batch that fills 16 wafers once): a "
                "lower bound on the speedup in this reading; see Reading the cluster rows"),
    Anchor("clusters", "trillion-parameter model, 1 → 16 CS-3, each system's batch fixed at 4 × 2,048", "15.3×", 15.3,
           "×", _SANDIA, PREDICTION, lambda: _sandia(False),
           note="as above, the other reading (weak scaling): every step pays the update once whatever N, so "
                "only the tree costs anything: an upper bound"),
    Anchor("clusters", "the same, each system's batch fixed: what a step on 16 pays beyond one system's step",
           "4.6 % (16 / 15.3 − 1)", 100 * (16 / 15.3 - 1), "%", _SANDIA, PREDICTION, _boundary_share, digits=2,
           note="the cluster's boundary: in wsesim only the SwarmX tree's latency; see Reading the cluster rows"),
]
"""Every anchor; ``docs/validation.md`` is rendered from them."""
ANCHORS = [replace(a, kernel=getattr(a.wsesim, "kernel", None)) if a.kernel is None else a for a in ANCHORS]
ANCHORS += serving_anchors(Anchor, PREDICTION, PARAMETER)
ANCHORS += energy_anchors(Anchor, PREDICTION)
ANCHORS += gpu_anchors(Anchor, PREDICTION, PARAMETER)


def _fmt(x: float, digits: int) -> str:
    return f"{x:,.{digits}g}" if abs(x) < 1e6 else f"{x:,.0f}"


def render() -> str:
    lines = [
        "# Validation: what wsesim is checked against",
        "",
        "Every figure below is computed by `scripts/validation.py` from the shipped presets, with no",
        "per-point tuning; `tests/test_validation.py` fails if this file and the code disagree. *Use* says",
        "whether a figure was used to set a global parameter (so agreeing with it is no evidence), is a",
        "prediction, or is an exact check of a mechanism. Residual = wsesim / published − 1 where the",
        "published figure is a number.",
        "",
    ]
    group = None
    for a in ANCHORS:
        if a.group != group:
            group = a.group
            lines += [f"## {group}", "", "| what | published | wsesim | residual | use | source | note |",
                      "|---|---:|---:|---:|---|---|---|"]
        ours = a.wsesim()
        residual = f"{100 * (ours / a.value - 1):+.1f} %" if a.value else "—"
        lines.append(f"| {a.what} | {a.published} | {_fmt(ours, a.digits)} {a.unit} | {residual} | {a.use} | "
                     f"{a.source} | {a.note} |")
        if a.kernel is not None:  # the same figure under simulation.compute: kernel (docs/model.md §4.1)
            k = a.kernel()
            residual = f"{100 * (k / a.value - 1):+.1f} %" if a.value else "—"
            lines.append(f"| ↳ the same, `compute: kernel` | {a.published} | {_fmt(k, a.digits)} {a.unit} | {residual} "
                         f"| {PREDICTION} | {a.source} | weight-streaming GEMMs simulated on the wafer instead of 45 % of peak |")
        nxt = ANCHORS.index(a) + 1
        if nxt == len(ANCHORS) or ANCHORS[nxt].group != group:
            lines.append("")
    return "\n".join(lines).rstrip() + "\n" + _APPENDIX


_APPENDIX = """
## Reading the `compute: kernel` rows

`simulation.compute: kernel` (docs/model.md §4.1) prices every op of the training step by its GEMMs,
each the machine's weight-streaming GEMM (§10.7) simulated on the PEs that run it, instead of its FLOPs
at the calibrated 45 % of peak. The GEMM issues as the SDK defines a PE's instructions (§10.1): each
output's weight row triggers one task whose FMAC is ONE DSD operation over the arriving weights and the
PE's tokens (a fabric-input descriptor), beside the add of the arriving partial sums and the send of its
own, all on microthreads; the FMAC is `@fmachs` (16-bit products into fp32 accumulators, as
`pe.partial_sum_width` says mixed-precision training accumulates) at the SDK's SIMD width for it, 2 a
cycle on WSE-2 and 4 on WSE-3. Nothing was fitted: every rate is the SDK's table, the issue the one
calibrated on WaferLLM's GEMV.

It is still not the default: three of the six current-release rows miss ±15 %. GPT-J on one CS-2 comes
within −12 %, on a CS-3 −5 %, Llama-2-7B on a CS-3 at S = 2,048 −7 %; GPT-J on two CS-2s −18.5 %,
LLaMA-7B on a CS-2 −33 % and Llama-2-7B at S = 4,096 −55 %. Before (one AXPY instruction per arriving
weight, and WSE-3's ports at 16 B) the same rows were −8, −36, −55, −15, −39 and −79 %: the CS-3 rows
moved most, because both of what held them back were facts the SDK gives (one issue per operation; 8
lanes that the ports feed). The CS-2 rows moved down a little: one issue per weight row no longer
costs anything (the 28 cycles of a task's issues hide behind its ~78 cycles of datapath), but the FMAC
into fp32 accumulators runs 2 a cycle, not 4.

Where each miss comes from, by what the rows show:

* **the CS-2 rows' mixed-precision FMAC.** With fp32 partial sums the FMAC is `@fmachs`, half
  `@fmach`'s width on WSE-2: a LLaMA-7B micro-batch of 9 sequences leaves 25 tokens a PE row, 13
  cycles per weight, plus 13 for the partial sums' add, for a weight row of 5 values: 78 cycles where
  the FLOPs at 4 a cycle would take 26. Had the PE accumulated in 16 bit (`pe.partial_sum_width: 16
  bit`), the FMAC would be `@fmach` at 4; no source says which the compiler uses, and the key keeps
  its reasoning. LLaMA-7B is also −14 % under the constant model: its micro-batching (docs/model.md
  §2.4), not the GEMM, carries part of that miss;
* **Llama-2-7B at S = 4,096** misses under both models (−42 % constant): with the standard attention's
  S × S matrices wsesim's memory model holds 2 sequences a pass (Reading the dense rows below);
* **attention at small tiles** (BTA): a tile of one 4,096-token sequence leaves 6 tokens a PE row, so
  the tuner stops at G = 5 tiles of B = 2 at every point of the sweep;
* not **the weight stream**: an op consumes its weights as they arrive, the slower of the two setting
  the pace (docs/model.md §4.1), and the dense rows stall for weights under 1 % of their steps.

BTA under this model: tuned / G=1 2.30× at 128 experts and top_k 8 (the paper's ~2×), 2.63× at top_k 1
(against 5–7×). G=1 at 128 experts is 11,379–11,383 tokens/s whatever top_k: its step is the 128
experts' weights streaming in, which top_k does not shrink; the tuned G (5 × B = 2) gains on the
experts' arithmetic only. The contrast appears when the active parameters are held constant (expert
size × 8/k: 5.49× at top_k 1; `python scripts/bta_conditions.py --top-k --compute kernel`), not with
the shipped expert size.

Miyajima et al.'s fp32 GEMM (33,000³ on 750² PEs): the SDK gives `@fmacs` no SIMD mode, so fp32 is one
FMAC a cycle on both wafers — the rate wsesim already used on WSE-2, now with its source. SUMMA stays at
825 TFLOP/s (1.73 FLOP/cycle/PE) against their 349 (0.73), +136 %; the weight-streaming GEMM gives 945.
The missing ~2.4× is not the datapath. The vendor's own fp32 SUMMA (csl-examples `gemm-collectives_2d`)
waits for each step's broadcasts before its FMACs and runs a scalar load and two descriptor updates
beside each 44-value `@fmacs`; if Miyajima et al.'s code is of that form (their paper's code was not
read), that is what the model's SUMMA (double-buffered, one issue per instruction) does not charge
(§10.8). Charged as that code writes it (each step's broadcasts, then its 1,936 `@fmacs` of 44 one after
another, each with its issue), a step on 750² is ~85,200 cycles of FMACs, ~13,600 of issue and ~4,700 of
broadcast: 1.65 FLOP/cycle/PE, still +126 %. Two independent fp32 codes on WSE-2 sustain what Miyajima et
al. measure: Jacquelin et al.'s 25-point stencil (SC22, arXiv 2204.03775: 503 TFLOP/s on a CS-2, fp32 as we
read the paper, medium confidence) is 0.79 FLOP/cycle/PE on the 745,500 PEs at 850 MHz. Both would fit an
`@fmacs` that sustains ~0.4 FMAC a cycle rather than 1, but no source gives that rate, so the SDK's is kept
and the miss stays a measured fact the model does not explain.

## Reading the serving rows

WaferLLM times one transformer layer's decode on one grid and multiplies by the layers; its code
converts cycles at 1.1 GHz, so wsesim's cycles are converted at the same clock (a comparison of cycles).
Two global keys carry what no source gives (docs/model.md §10.1, §11.2): `pe.instruction_issue`, set on
the MeshGEMV 16K row, and `runtime.kernel_launch`, set on the LLaMA3-8B decode row. Before them the
decode rows came out 26–30 % fast only because two errors cancelled: the allreduces were rooted at PE 0
(about twice the hops of WaferLLM's centred K-tree) and nothing was charged for the instruction stream
or the calls between kernels. With the K-tree, the issue and the launch, LLaMA2-13B decode, a
prediction, lands within 3 %, and wsesim's own pipeline (3 stages on 2 wafers, the LM head, the
hand-offs) within 2 % of the per-layer figure. A decode step on 420² is now about half instruction
issue and kernel launches, a third communication, a tenth arithmetic (`wsesim infer` prints the split).

Prefill, which no key was set on, moved from +103 % (SUMMA) and +661 % (MeshGEMM) to +32 % (SUMMA),
−13 % (MeshGEMM) for LLaMA3-8B and −17 % for LLaMA2-13B. Two mechanisms of WaferLLM's prefill code
did it: a 4,096-token prompt on 720² PEs leaves 6 tokens per PE, so every FMAC instruction of the block
products is 6 values long (2 cycles on 4 lanes, 7 to issue), the reason their prefill runs at about a
tenth of peak; and its Q·Kᵀ splits the head dimension along each row, so each of the 720 MeshGEMM steps
ends in a row reduce of the step's 6 × 6 partial scores (`matmul_T_reduce_add`), its root moving along
the folded ring. Softmax over the prompt remains one elementwise op per layer.

LLaMA-3.1-70B fits four CS-3s once WSE-3's runtime reserve is at most 14.9 % of SRAM (20 layers of 16-bit
weights per wafer, the LM head and a 4K context's KV cache); the preset's 12.5 % is set by that fact and
WSE-2 keeps its calibrated 25 % (the BTA rows rest on it). With `grid: auto` the mapping fills whole
wafers (one 755 × 1,170 stage each) and serves one user at about 520 tokens/s, against the 450 Cerebras
reported at launch — a prediction of a figure whose batch, prompt and clock are not published;
`wsesim infer --search` finds 12 stages of 755 × 390 on the same four wafers at about 770, since a
decode step is paced by wavelets crossing a stage's rows, which smaller grids shorten.

**Two software stacks** (`inference.software`, docs/model.md §11.11). Every row above is the research
code, WaferLLM's: a layer is 16 kernels launched one after another (1,282 launches a token for the 70B),
each norm's and the softmax's allreduce before the GEMV that reads it, a GEMV's reduce after its FMACs.
Cerebras' October 2024 release rewrote "MatMul, reduce/broadcast, element wise ops, and activations",
made wafer I/O asynchronous and added speculative decoding, taking the 70B from ~450 to ~2,100 tokens/s
per user. The production stack models the first two as mechanisms, each sourced: element-wise kernels
fused into the GEMV feeding them (6 launches a layer, counted from the fused list: 486 a token); the
allreduces that only scale the next GEMV (RMSNorm's 1/rms, the softmax's max and sum, as Flash-Decoding's
split-K softmax) run beside it on microthreads, the pair the longer of the two; each GEMV's row reduce
begun on its first output chunk while the PE computes the rest (S. Lie's description of the weight-
streaming GEMM, microthreads overlapping a row's reduction with the next FMACs); a hand-off's bytes leave
the wafer beside the stage's last kernel. One key, `runtime.fused_launch`, the cost of starting a fused
kernel, is set on the October point with its speculative part assumed (LLaMA 3.2 1B drafting on a fifth
CS-3, K = 4, α = 0.8; Cerebras publishes none of it): 200 cycles against the research code's 360. Without
the draft the production stack gives 1,012 tokens/s: about 2.1× of the 2,100 is the draft's, 1.9× the
kernels'. At `fused_launch` 0 the same assumptions give 2,408 and at 360 (the research launch) 1,898, so
the point is reached inside the key's physical range. The value rests on the assumed acceptance: at
α = 0.7 no launch reaches 2,100 (1,989 at 0 cycles, a miss of 5 %); at α = 0.9 the research launch alone
gives 2,253 and 200 cycles 2,488. That is why the draft's part is stated beside the key, not hidden in
it. The other CS-3 figures are predictions: the 8B at launch (1,800) is −24 % under the research code
and +46 % under the production stack (the launch ran the earlier software; no later 8B figure from
Cerebras was found in a primary source); the 405B (969, Nov 2024) is +11 % with the same draft and −40 %
without it; its 0.24 s to first token is missed by 15× because the prefill's GEMMs are still the
research code's and the prompt is assumed 4,096 tokens.
## Reading the kernel rows

`wsesim kernel` (docs/model.md §10) times each kernel from the hardware preset: SIMD lanes, SRAM ports,
32-bit wavelets one a cycle per link, 2 cycles of ramp each way and 1 cycle a router hop, and the PE's
instruction stream (one issue of 7 cycles per vector instruction, set on the MeshGEMV 16K row). The
chain reduce equals Luczynski et al.'s closed form by construction of the same mechanism (their model
times the network; the reduce's one instruction issue is reported beside it). The K-tree over 420 PEs
takes 549 cycles, the centred roots' arithmetic; the end-rooted tree wsesim used before took about
twice that.

Misses, each with its mechanism:
- **MeshGEMV 32K, +29 %**: with the issue set on 16K, the 32K GEMV's 79 instructions of 79 values cost
  more than WaferLLM measured; on a larger grid (theirs is not published) both rows would shrink, so the
  grid, not a parameter, remains the main uncertainty.
- **MeshGEMV over the vendor's GEMV, 2.8× against ~4.6×**: the vendor's code is modelled as a chain
  reduce with its multicast after it; what else the vendor's GEMV pays (its own instruction stream, a
  different layout) is not known to us.
- **MeshGEMM over SUMMA at 2K³ on 720², 6.3× against 2–3×**: SUMMA here pays a multicast of up to 719
  hops every step and keeps no pipelining across steps beyond double buffering; WaferLLM's SUMMA may
  pipeline its broadcasts.
- **Computational efficiency**: WaferLLM's "> 70 %" is the share of time MeshGEMM computes (their Fig. 9),
  now compared as such (97 % of the time is the PEs' instruction stream); as a share of peak MeshGEMM
  gives 13.5 %, since 6-value instructions use the lanes poorly and pay their issue.
- **The fp32 GEMM, +136 %**: wsesim's SUMMA is compute-bound at 1.73 FLOP per cycle per PE (44-value
  fp32 instructions, 7 cycles to issue each) where the published run reaches 0.73. The fp32 rate has its
  source: the SDK's table of SIMD widths gives `@fmacs` (the fp32 FMAC) no SIMD mode, one a cycle (the
  residual was +136 % before that source was found and is unchanged by it). An issue cost large enough
  to close it (~76 cycles) would contradict the GEMV rows, and the vendor's own SUMMA loop closes only
  ~5 % of it; an fp32 stencil on WSE-2 sustains the same ~0.8 FLOP/cycle/PE (Reading the `compute:
  kernel` rows), which points at the sustained fp32 rate, unsourced and not adopted. The weak-scaling row
  agrees: both grids are compute-bound.

WSE-3 has no published kernel row. Its collectives are WaferLLM's WSE-3 code's (docs/model.md §10.2): the
WSE-2 phases and multicast, and five colours re-routed whenever the allreduce turns axis, one issue each
(35 cycles: the K-tree over 755 × 1,170 PEs and one wavelet 2,364 cycles, 2,329 before; MeshGEMV
[1,16K] × [16K,16K] on 420² 1,161, 1,126 before). Its ramp and hop stay WSE-2's: that code gives neither.

Also, at 33,000³ the 44 × 44 fp32 blocks with Cannon's or MeshGEMM's extra buffers need 38,720 B per PE,
over the 36,864 B that the preset's 25 % runtime reserve leaves: wsesim reports those two infeasible,
and SUMMA fits only by narrowing its panels to 19 columns.

The fabric rows: one physics of a hop now serves the training step's fabric, its op costs and the
kernels (`fabric.ramp_latency` 2, `fabric.hop_latency` 1: Luczynski et al., whose model is within 4 % of
CS-2 measurements). The SDK's simprint tutorial shows a row multicast reaching successive PEs 2 cycles
apart; the model gives 1. Replacing the older 2-cycle hop and 7-cycle injection moved the dense rows by
at most 0.2 % and the BTA rows by at most 0.6 % under `compute: constant` (the step is compute- and
I/O-bound; its fills and drains are small).
## Reading the BTA rows

The BTA figures run the shipped experiment (`workloads/qwen3-30b-a3b/experiment.yaml`: sequence length
4096, recompute, standard attention, the default MoE mapping) and tune G with `wsesim tune`. The paper
states neither sequence length, depth, batch nor precision; the README's table shows how the eight points
move with each of those assumptions, and `docs/model.md` derives why the top_k contrast is bounded.

Since MemoryX's optimizer step is modelled (docs/model.md §2.5) it ends every step: 0.25 s for the 30.5B
parameters at 128 experts, 0.03 s at 8. The shipped experiment's step is one micro-batch of G·B
sequences, so a larger G·B spreads the update over more tokens, and the tuned runs gain from that as well
as from BTA: the speedups moved from 1.03× to 1.12× at 8 experts, 3.03× to 3.34× at 128 (top_k 8) and
4.22× to 4.58× (top_k 1), the tuned curve's spread from 9 % to 18 %. How much of that the paper's runs
contain depends on their global batch, which it does not state. `gemm_efficiency` was not retuned.

## Reading the dense rows

Published training throughput of dense models on one or two CS-2s and one CS-3, read from Cerebras
appliance logs that Argonne publishes: `GlobalRate` at the last logged step, in samples per second. Each
source is pinned to the commit of the page that holds the log, because the page is rewritten at every
software release. How each row's conditions were read:

- **Systems**: from the command (`--num_csx`; none means 1), the page's own sentence ("uses 2 CS2s") or
  the log ("Preparing to execute using 1 CSX").
- **Global batch**: samples processed over steps, both printed at the end of the log (for example
  24,000 samples in 200 steps: 120), or the compiler's "per-box batch size". In a cluster it is split
  evenly: 60 sequences per CS-2 for the GPT-J run at 120.
- **Sequence length**: never printed. GPT-J's Model Zoo default (2,048) is assumed; LLaMA-7B's comes from
  the Model Zoo config the page copies; Llama-2-7B's is unknown, so that run is shown at both 2,048 and
  4,096.

wsesim runs each with the shipped model preset on `wse2` or `wse3` (two systems behind the `swarmx`
interconnect for the cluster rows), the published global batch, and the shipped experiment's defaults
(recompute, standard attention, G = 1; B and the micro-batches from the memory model, docs/model.md §2.4).
Nothing is fitted to these points.

**The cluster anchor.** The GPT-J run at a global batch of 120 (R2.0.3) is on two CS-2s: the earliest
version of the page runs it with `--num_csx=2` and says it uses 2 CS-2s (later versions changed the
command but kept the same log), so it is the first measured multi-system point wsesim is checked against.
The same page's older versions run GPT-J on the same two CS-2s at 27.53 (R1.7.1) and 33.98 (R1.8.0)
samples/s at a batch of 130: a factor of 1.6 from software alone, which no hardware model can see. Those
rows are shown so that the spread is visible, not to be fitted.

**Llama-2-7B on CS-3.** At S = 2,048 wsesim is high, as for GPT-J on the same CS-3 (+23 % against
+15 %); at 4,096, the Model Zoo default, it is far low: with the standard kernel's S × S matrices only 2 sequences
fit per micro-batch, every weight streams in 512 times a step and the step is I/O-bound. If the run was at
4,096, the real stack keeps far more sequences per pass (a tiled attention kernel, or activations off the
wafer), which wsesim does not model; with `training.attention_kernel: flash` the same run holds 16
sequences per micro-batch and gives 21.1 samples/s (−34 %): a sensitivity, not a tuning. Which of the two
readings is right the log does not say.

**LLaMA-7B at batch 99 on one CS-2.** The compiler tried sub-batches of 33, 9 and 11, then ran 99 "with 9
lanes" and no gradient accumulation; wsesim fits 9 sequences and runs 11 micro-batches of 9. Its step is
compute-bound (the weight stream stalls it 0.06 %, MemoryX's optimizer step is 1 %), so streaming the
weights once per batch instead of 11 times would not change wsesim's figure: the −14 % is in the compute,
not in the micro-batching (docs/model.md §2.4 says what the "lanes" are known to be, and are not).

**MemoryX's optimizer step** (docs/model.md §2.5) ends every step; on these rows it is 1–2 % of the step
(56 ms for a 6.7B model) and moved them by 0.1 to 2.5 points when it was introduced.

## Reading the cluster rows

The GPT-J run at a global batch of 120 on two CS-2s is met within 0.4 %: each system runs 5 micro-batches
of 12, and the tree costs it nothing measurable (tree efficiency 1.000: its latency is microseconds on a
2.8 s step, and a CS-2's link is the tree's slowest port either way).

Sandia and Cerebras trained a trillion-parameter model on one CS-3 with 55 TB of MemoryX, and on 16 CS-3s,
where it ran 15.3× faster (95.6 % of linear). Neither its shape, its sequence length nor its batch is
published, so the rows state theirs: Kimi K2's published trillion-parameter MoE shape, S = 2,048, and 4
sequences per micro-batch (what fits). wsesim cannot fit a dense trillion-parameter shape such as
Megatron-LM's 128 layers of 25,600 on one CS-3 (its memory model keeps a whole layer's weights resident:
62 KB per PE at one sequence, of 48): the real stack does not, a miss of the memory model in its own right.

On one CS-3 each micro-batch is the weight stream's: 2 TB of bf16 weights in for the forward pass, again
for the recompute (a layer does not fit the staging buffer) and again for the backward, 6.1 TB: 31.6 s. MemoryX's optimizer step over 1.03 T parameters, 30 B each at the assumed
3.6 TB/s, adds 8.6 s per step whatever the number of systems; the SwarmX tree adds microseconds. What the
speedup comes to depends on the batch, which is the unknown. With each system's batch fixed (weak scaling)
every step pays the update once whatever N: 16.0× (+4.6 %). At a fixed global batch (strong scaling) the
update does not shrink with N while the stream does: 12.8× (−16 %) at 64 sequences, the smallest batch that
gives each of 16 wafers one micro-batch, rising with the batch towards 16× and through 15.3× between 5
and 6 micro-batches per system (320–384 sequences, 0.7–0.8 M tokens). The published point lies between
the two readings.
The update's bandwidth was not set against it; at the ends of its assumed range (0.15 and 15 TB/s) the
fixed-batch row would give about 3× and 15.1×. Before the update was modelled both readings gave 16.0×.

What a step pays at the cluster's boundary, each system's batch fixed: 15.3× on 16 says a step on 16
systems is 4.6 % longer than one system's, 1.84 s on wsesim's 40.1 s step (31.6 s of weight stream and
8.6 s of update). wsesim charges 8 µs there: the SwarmX tree (1:4 fan-out, two levels for 16 systems) is
pipelined wavelet by wavelet at the systems' own I/O rate, so the weights reach 16 systems as fast as one
and the gradients are summed as they pass; the update is MemoryX's, once a step at any N. What could fill
1.84 s is outside the model: a tree that stores and forwards a layer at a time (a Kimi K2 layer's 34 GB of
weights, or gradients, at a CS-3's 195 GB/s is 0.17 s a level, ~0.7 s for two levels at both ends of a
step), MemoryX's own ports feeding the tree, and the slowest of 16 systems setting every step's pace.
None is published, so none is charged.

## Reading the energy rows

No per-event energy of a wafer is published, so every value in the presets' `energy` sections is
modelled (docs/model.md §12.1: Horowitz's 45 nm figures scaled to 7 and 5 nm; the floor from the CS-1's
published split into wafer, cooling and power supply), and none was fitted to these rows. A system's
published draw is a maximum or a typical figure, not a measurement at a stated load, so it is an upper
anchor. Since an instruction costs energy (a cycle of a PE's instruction stream: Horowitz's ~70 pJ
instruction at 45 nm less its instruction cache, 10 pJ at 7 nm and 7.5 pJ at 5 nm), everything busy comes
to 23.1 kW for a CS-2 and 26.0 kW for a CS-3, from 16.7 and 20.3 kW without it. The CS-3's bound is 13 %
over its ~23 kW because it adds the lanes fed at full rate and the instruction stream issuing every cycle,
which no program does at once: WaferLLM's issue-bound kernels keep the instruction stream busy with the
lanes three-quarters idle (17.7 kW with the lanes idle), a GEMM of long vectors the reverse (20.3 kW with
the instruction stream idle); ~23 kW lies between. At the loads wsesim simulates the model gives 12–13 kW,
about half: one user on LLaMA3-8B 12.4 kW, 14 % of it the instruction streams (a decode step is about half
issue and kernel launches on every PE); a dense training step 12.4 kW, with no instruction counted (its
compute is FLOPs at an efficiency, not instructions). The floor (cooling, conversion, leakage and the clock
tree, 10.4 kW) still sets one user's joules per token (29 J for LLaMA3-8B on a CS-3, 381 J for
LLaMA-3.1-70B on four): the dynamic energy of a token is a few joules, its seconds on idle wafers are the
rest. For context, not as a fit: NVIDIA's DGX B200 (8 GPUs, ~14.3 kW at most by its datasheet) serves Llama
4 Maverick at up to 72,000 tokens/s per server at its throughput configuration (NVIDIA developer blog, May
2025), ~0.2 J a token at full draw, with a server full of concurrent users; a wafer's joules per token fall
the same way only as its work per second grows (a batch that shares the seconds, issue 28's continuous
batching).

## Reading the GPU rows

A GPU's kernels (docs/model.md §13) are tiles in waves over its SMs, each wave the longer of its
tensor-core arithmetic and its HBM traffic, and NCCL's collectives as steps of latency and bandwidth. One
key per GPU, `runtime.tensor_efficiency`, is set on the largest matmul rate of one published table (the
two rows marked so; the H200 takes the H100's, its compute being the H100's); every other row predicts.
Large GEMMs, compute-bound, land within 0.4–9 % of what was measured. What is bound by HBM or by a
kernel's fixed work lands fast: a skinny fp8 GEMM by 25–29 % and a grouped one by 62 % (HBM at its
datasheet rate, where measured kernels reach ~80 % of it; no per-group fixed work), NCCL's ring by 21 %
(its protocol's overhead left out), and a 70B decode at batch 1 by 40 %, the sum of both: each of its
~1,045 kernels a token misses a few µs of fixed latency, and its GEMVs read at the datasheet's rate. The
fix is two global keys, a measured share of HBM and a per-kernel latency, each to be set on one named
point; neither is set, so the misses stand. The published decode figure is fp8 on 2 GPUs; wsesim has no
fp8 model weights, so it runs bf16 on 4, which reads the same 35 GB a GPU a token.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/validation.md is not what the code gives")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            sys.stderr.write("docs/validation.md differs from what the code gives: run python scripts/validation.py\n")
            return 1
        print("docs/validation.md agrees with the code")
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
