"""The scheduler's features together (docs/model.md §11.7): arrival × speculative decoding × split prefill ×
MoE routing, each cell with its energy. Every cell runs — counting every wafer it uses, giving its joules
per token (a draft with split prefill too: three wafers)."""

from __future__ import annotations

from itertools import product
from pathlib import Path

import pytest

from wsesim.config.inference import load_inference_data
from wsesim.experiments.runner import run_inference

TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 8, "output_len": 5}, "grid": "2x4", "interconnect": "swarmx"}}
DRAFT = {"kind": "model", "name": "tiny-draft", "hidden_size": 64, "layers": 1, "heads": 4, "kv_heads": 2,
         "head_dim": 16, "ffn_intermediate": 96, "vocab_size": 256, "dtype": "fp16"}
ARRIVALS = {
    "one alone": {},
    "together": {"inference.scheduler.batch": 4},
    "poisson": {"inference.load.arrival": "poisson", "inference.load.rate": 2e5, "inference.load.requests": 10,
                "inference.scheduler.batch": 4},
    "trace": {"inference.load.arrival": "trace", "inference.scheduler.batch": 4},
}
SPECULATIVE = {"off": {}, "draft": {"inference.speculative": {"draft": DRAFT, "tokens": 3, "acceptance": 0.7}}}
SPLIT = {"off": {}, "prefill wafer": {"inference.disaggregation.prefill_systems": 1}}
ROUTING = {"balanced": {}, "zipf": {"inference.moe.routing": "zipf:1.2"}}


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    path.write_text("arrival_s,prompt_len,output_len\n" + "".join(
        f"{i * 2e-6:.6f},{6 + i % 3},{4 + i % 2}\n" for i in range(8)))
    return path


@pytest.mark.parametrize(("arrival", "speculative", "split", "routing"),
                         list(product(ARRIVALS, SPECULATIVE, SPLIT, ROUTING)))
def test_every_cell_runs_or_is_refused_for_its_reason(arrival: str, speculative: str, split: str, routing: str,
                                                      trace_file: Path) -> None:
    overrides = {**ARRIVALS[arrival], **SPECULATIVE[speculative], **SPLIT[split], **ROUTING[routing],
                 "hardware.pe.sram": "1 MiB"}
    if arrival == "trace":
        overrides["inference.load.file"] = str(trace_file)
    spec = load_inference_data(TINY, overrides=overrides).spec
    r = run_inference(spec).result
    assert r.feasible, r.infeasible_reason
    extra = (speculative != "off") + (split != "off")
    assert r.systems == 1 + extra  # the target's wafer and the draft's or the prefill wafer
    assert r.joules_per_token is not None and r.joules_per_token > 0
    assert r.batching == "continuous"  # every request goes through the one scheduler, one alone too
    assert bool(r.speculative) == (speculative != "off") and bool(r.split_prefill) == (split != "off")
