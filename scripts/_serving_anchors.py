"""wsesim's figures for WaferLLM's serving measurements (He et al., OSDI '25), as ``scripts/validation.py``
shows them. WaferLLM converts cycles to time at 1.1 GHz, so each figure here is wsesim's cycles converted
at that clock: the comparison is of cycles, whatever clock the hardware preset runs at."""

from __future__ import annotations

from functools import cache

from wsesim.config.inference import load_inference
from wsesim.experiments.runner import run_inference

WAFERLLM_HZ = 1.1e9


@cache
def _run(model: str, grid: str, output_len: int):
    spec = load_inference(model=model, hardware="wse2", overrides={
        "inference.grid": grid, "inference.load.prompt_len": 4096, "inference.load.output_len": output_len}).spec
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
        "inference.grid": "720x720", "inference.load.prompt_len": 4096, "inference.load.output_len": 2,
        "inference.gemm": gemm}).spec
    result = run_inference(spec).result
    return 4096 * WAFERLLM_HZ / (result.ttft_s * spec.hardware.clock_hz)


@cache
def _seventy_b():
    spec = load_inference(model="llama3.1-70b", hardware="wse3", overrides={
        "inference.load.prompt_len": 4096, "inference.load.output_len": 128, "inference.grid": "755x1170"}).spec
    return spec, run_inference(spec).result


def seventy_b_wafers() -> float:
    """CS-3s the mapping needs for LLaMA-3.1-70B in 16 bits (one stage a wafer, ``systems: auto``)."""
    return float(_seventy_b()[1].systems)


def seventy_b_tokens_per_s() -> float:
    """Its tokens/s per request (one user), at the preset's clock."""
    return _seventy_b()[1].tokens_per_s_per_request


DRAFT = {"inference.interconnect": "swarmx", "inference.speculative.draft": "llama3.2-1b",
         "inference.speculative.tokens": 4, "inference.speculative.acceptance": 0.8}
"""The speculative part of Cerebras' October 2024 figure, ASSUMED (none of it is published): LLaMA 3.2 1B
drafting on a wafer of its own, K = 4, α = 0.8 (E = 3.36 tokens a verify pass)."""


@cache
def _cs3(model: str, software: str, draft: bool = False):
    """One request on CS-3s, one 755 × 1,170 stage a wafer (the layout Cerebras describes), 4,096 + 128
    tokens, under ``software``; with ``draft``, the assumed draft (``DRAFT``). More than four wafers are
    joined by SwarmX (the shipped interconnect preset)."""
    overrides = {"inference.load.prompt_len": 4096, "inference.load.output_len": 128, "inference.grid": "755x1170",
                 "inference.software": software, **(DRAFT if draft else {})}
    if model == "llama3.1-405b":
        overrides["inference.interconnect"] = "swarmx"
    return run_inference(load_inference(model=model, hardware="wse3", overrides=overrides).spec).result


def cs3_tokens_per_s(model: str, software: str, draft: bool = False) -> float:
    return _cs3(model, software, draft).tokens_per_s_per_request


def cs3_ttft_s(model: str, software: str, draft: bool = False) -> float:
    return _cs3(model, software, draft).ttft_s


CEREBRAS = "Cerebras, \"Introducing Cerebras Inference\" (blog, Aug 2024), as reported"
OCTOBER = "Cerebras' inference release of Oct 2024 (blog), as reported"
NOVEMBER = "Cerebras, Llama 3.1 405B on Cerebras Inference (Nov 2024), as reported (Tom's Hardware)"
PRODUCTION = "inference.software: production (docs/model.md §11.11)"
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
        anchor("serving on CS-3", "LLaMA-3.1-70B on four CS-3s at launch, the production stack", "450", 450.0,
               "tokens/s", CEREBRAS, prediction, lambda: cs3_tokens_per_s("llama3.1-70b", "production"), digits=4,
               note=f"{PRODUCTION}, no draft; the launch ran the earlier software, so the research row above is "
                    "the like-for-like one: this is what the production stack alone predicts"),
        anchor("serving on CS-3", "LLaMA-3.1-70B on four CS-3s after Oct 2024, production stack + draft", "2,100",
               2100.0, "tokens/s", OCTOBER, parameter,
               lambda: cs3_tokens_per_s("llama3.1-70b", "production", draft=True), digits=4,
               note="runtime.fused_launch (200 cycles) set on this point; its speculative part ASSUMED: LLaMA "
                    "3.2 1B drafting on a fifth CS-3, K = 4, α = 0.8 (E = 3.36); without the draft the production "
                    "stack gives 1,012 (the row above), and the research code with the same draft 1,043"),
        anchor("serving on CS-3", "LLaMA-3.1-8B on one CS-3 at launch (research code)", "1,800", 1800.0,
               "tokens/s", CEREBRAS, prediction, lambda: cs3_tokens_per_s("llama3-8b", "research"), digits=4,
               note="one 755 × 1,170 stage, batch 1, 4,096-token prompt (LLaMA 3 8B's shapes are 3.1's)"),
        anchor("serving on CS-3", "LLaMA-3.1-8B on one CS-3 at launch, the production stack", "1,800", 1800.0,
               "tokens/s", CEREBRAS, prediction, lambda: cs3_tokens_per_s("llama3-8b", "production"), digits=4,
               note=f"{PRODUCTION}, no draft; with the assumed draft on a second CS-3: 4,502"),
        anchor("serving on CS-3", "LLaMA-3.1-405B on CS-3s (Nov 2024), production stack + draft", "969", 969.0,
               "tokens/s", NOVEMBER, prediction,
               lambda: cs3_tokens_per_s("llama3.1-405b", "production", draft=True), digits=4,
               note="26 wafers of 5 layers (the mapping's; none published) and the draft's 27th, joined by "
                    "SwarmX; the draft and its K, α as assumed on the 70B point (whether Cerebras drafted the "
                    "405B is not published)"),
        anchor("serving on CS-3", "LLaMA-3.1-405B on CS-3s (Nov 2024), production stack alone", "969", 969.0,
               "tokens/s", NOVEMBER, prediction, lambda: cs3_tokens_per_s("llama3.1-405b", "production"),
               digits=4, note="as above, no draft; the research code gives 308"),
        anchor("serving on CS-3", "LLaMA-3.1-405B time to first token (Nov 2024), production stack", "0.24 s",
               0.24, "s", NOVEMBER, prediction, lambda: cs3_ttft_s("llama3.1-405b", "production"), digits=3,
               note="a 4,096-token prompt (Cerebras' is not published) through 26 wafers in turn; the production "
                    "stack leaves the prefill's GEMMs as the research code writes them"),
        anchor(GROUP, "LLaMA2-13B prefill, 4,096 tokens on 720² PEs (MeshGEMM)", "17,498.3", 17498.3, "tokens/s",
               SOURCE, prediction, lambda: prefill("meshgemm", "llama2-13b"), digits=5,
               note="WaferLLM's own GEMM; Table 3"),
    ]
