"""wsesim's figures for WaferLLM's serving measurements (He et al., OSDI '25), as ``scripts/validation.py``
shows them. WaferLLM converts cycles to time at 1.1 GHz, so each figure here is wsesim's cycles converted
at that clock: the comparison is of cycles, whatever clock the hardware preset runs at."""

from __future__ import annotations

from functools import cache

from wsesim.config.inference import load_inference
from wsesim.experiments.inference import run_inference

WAFERLLM_HZ = 1.1e9


@cache
def _run(model: str, grid: str, output_len: int):
    spec = load_inference(model=model, hardware="wse2", overrides={
        "inference.grid": grid, "inference.prompt_len": 4096, "inference.output_len": output_len}).spec
    return spec, run_inference(spec).result


def decode_per_layer(model: str) -> float:
    """Tokens/s per request as WaferLLM's code forms it: one layer's decode step on one 420 × 420 grid,
    at a context of about 4K tokens, times the number of layers (no LM head, no hand-off between grids)."""
    spec, result = _run(model, "420x420", 2)
    return WAFERLLM_HZ / (result.layer_decode_cycles * spec.model.layers)


def decode_pipeline(model: str) -> float:
    """wsesim's own answer on 420 × 420 stages: every layer on its stage, the LM head, the hand-offs
    between grids and between wafers, at WaferLLM's clock."""
    spec, result = _run(model, "420x420", 2)
    return WAFERLLM_HZ * result.tokens_per_s_per_request / spec.hardware.clock_hz


def prefill(gemm: str = "summa", model: str = "llama3-8b") -> float:
    """Prompt tokens/s of a 4,096-token prefill on one 720 × 720 grid (the whole model fits it)."""
    spec = load_inference(model=model, hardware="wse2", overrides={
        "inference.grid": "720x720", "inference.prompt_len": 4096, "inference.output_len": 2,
        "inference.gemm": gemm}).spec
    result = run_inference(spec).result
    return 4096 * WAFERLLM_HZ / (result.ttft_s * spec.hardware.clock_hz)


@cache
def _seventy_b():
    spec = load_inference(model="llama3.1-70b", hardware="wse3", overrides={
        "inference.prompt_len": 4096, "inference.output_len": 128, "inference.grid": "755x1170"}).spec
    return spec, run_inference(spec).result


def seventy_b_wafers() -> float:
    """CS-3s the mapping needs for LLaMA-3.1-70B in 16 bits (one stage a wafer, ``systems: auto``)."""
    return float(_seventy_b()[1].systems)


def seventy_b_tokens_per_s() -> float:
    """Its tokens/s per request (one user), at the preset's clock."""
    return _seventy_b()[1].tokens_per_s_per_request


CEREBRAS = "Cerebras, \"Introducing Cerebras Inference\" (blog, Aug 2024), as reported"
SOURCE = "WaferLLM (He et al., OSDI '25), §7 and its launch scripts (cycles at 1.1 GHz)"
GROUP = "serving on WSE-2 (WaferLLM)"


def serving_anchors(anchor: type, prediction: str, parameter: str) -> list:
    """The validation table's serving rows (``anchor`` is ``scripts/validation.py``'s record)."""
    per_layer = ("one layer on one 420² grid × layers, as WaferLLM's code times it; real LLaMA shapes (WaferLLM "
                 "pads to the grid and uses one wide head, ~20 % more weights); context 4,097 tokens")
    return [
        anchor(GROUP, "LLaMA3-8B decode, tokens/s per request", "2,699.9", 2699.9, "tokens/s", SOURCE, parameter,
               lambda: decode_per_layer("llama3-8b"), digits=5,
               note="runtime.kernel_launch (360 cycles) set on this point; " + per_layer),
        anchor(GROUP, "LLaMA2-13B decode, tokens/s per request", "2,039.2", 2039.2, "tokens/s", SOURCE, prediction,
               lambda: decode_per_layer("llama2-13b"), digits=5, note=per_layer),
        anchor(GROUP, "LLaMA3-8B decode, wsesim's whole pipeline on 420² stages", "2,699.9", 2699.9, "tokens/s",
               SOURCE, prediction, lambda: decode_pipeline("llama3-8b"), digits=5,
               note="every layer on its stage (3 stages on 2 wafers), the LM head, the hand-offs: not WaferLLM's method"),
        anchor(GROUP, "LLaMA3-8B prefill, 4,096 tokens on 720² PEs (SUMMA)", "27,686.5", 27686.5, "tokens/s", SOURCE,
               prediction, prefill, digits=5, note="the whole model on one 720² grid; see Reading the serving rows"),
        anchor(GROUP, "LLaMA3-8B prefill, 4,096 tokens on 720² PEs (MeshGEMM)", "27,686.5", 27686.5, "tokens/s",
               SOURCE, prediction, lambda: prefill("meshgemm"), digits=5, note="WaferLLM's own GEMM"),
        anchor("serving on CS-3", "LLaMA-3.1-70B, 16-bit weights: CS-3s needed", "4", 4.0, "wafers", CEREBRAS,
               parameter, seventy_b_wafers, note="bounds WSE-3's pe.reserved_sram at ≤ 14.9 % (set 12.5 %)"),
        anchor("serving on CS-3", "LLaMA-3.1-70B on four CS-3s, tokens/s per user at launch", "450", 450.0,
               "tokens/s", CEREBRAS, prediction, seventy_b_tokens_per_s, digits=4,
               note="one stage a wafer (4 of 755 × 1,170, the layout Cerebras describes), batch 1, 4,096-token "
                    "prompt; grid: auto by TPOT takes 12 stages of 755 × 390 on the same four wafers, faster per "
                    "user; Cerebras' batch, prompt and clock are not published"),
        anchor(GROUP, "LLaMA2-13B prefill, 4,096 tokens on 720² PEs (MeshGEMM)", "17,498.3", 17498.3, "tokens/s",
               SOURCE, prediction, lambda: prefill("meshgemm", "llama2-13b"), digits=5,
               note="WaferLLM's own GEMM; Table 3"),
    ]
