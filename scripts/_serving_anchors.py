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


def prefill(gemm: str = "summa") -> float:
    """Prompt tokens/s of a 4,096-token LLaMA3-8B prefill on one 720 × 720 grid (the whole model fits it)."""
    spec = load_inference(model="llama3-8b", hardware="wse2", overrides={
        "inference.grid": "720x720", "inference.prompt_len": 4096, "inference.output_len": 2,
        "inference.gemm": gemm}).spec
    result = run_inference(spec).result
    return 4096 * WAFERLLM_HZ / (result.ttft_s * spec.hardware.clock_hz)
