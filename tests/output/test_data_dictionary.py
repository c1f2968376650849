"""The data dictionary (``wsesim.output.data_dictionary``, docs/outputs.md; issue 40, item 6): every field and
column the code writes has a description, every description names a field or column the code writes, and
docs/outputs.md is what the code generates. The keys of nested blocks and of the kernel and fabric CSVs are
taken from tiny real runs (tiny8), so a key added to a block without a description fails here."""

from __future__ import annotations

import csv
import re
from dataclasses import fields
from pathlib import Path

import pytest

from wsesim import cli
from wsesim.analysis.ops import OPS_COLUMNS
from wsesim.analysis.requests import REQUEST_COLUMNS
from wsesim.analysis.result_fields import OPS_FIELDS, PHASE_FIELDS, RUN_RESULT_FIELDS
from wsesim.analysis.results import STEP_PHASES, RunResult
from wsesim.analysis.serving import ServeResult
from wsesim.analysis.serving_fields import (
    BREAKDOWN_FIELDS,
    DECODE_OPS_FIELDS,
    ENERGY_EVENT_FIELDS,
    ENERGY_PART_FIELDS,
    MOE_FIELDS,
    PER_STAGE_FIELDS,
    REQUEST_FIELDS,
    SERVE_RESULT_FIELDS,
    SPECULATIVE_FIELDS,
    SPLIT_PREFILL_FIELDS,
)
from wsesim.analysis.serving_ops import DECODE_OPS_COLUMNS
from wsesim.config.inference import load_inference_data
from wsesim.config.loader import load_hardware
from wsesim.experiments.runner import run_inference
from wsesim.experiments.table import RESULT_COLUMNS, SERVING_COLUMNS, SPEEDUP, SWEEP_FIELDS, result_columns
from wsesim.fabric.traffic import FABRIC_FIELDS, HOTTEST_FIELDS
from wsesim.kernels import run_kernel
from wsesim.kernels.gpu.device import GPU_KERNEL_FIELDS
from wsesim.kernels.gpu.registry import run_gpu_kernel
from wsesim.kernels.result import KERNEL_FIELDS
from wsesim.model.energy import PARTS, EventCounts
from wsesim.output.data_dictionary import FILES, markdown, output_files
from wsesim.output.run_folder import flat

ROOT = Path(__file__).resolve().parent.parent.parent
DOC = ROOT / "docs" / "outputs.md"
TABLES = {"RUN_RESULT_FIELDS": RUN_RESULT_FIELDS, "PHASE_FIELDS": PHASE_FIELDS, "OPS_FIELDS": OPS_FIELDS,
          "SERVE_RESULT_FIELDS": SERVE_RESULT_FIELDS, "BREAKDOWN_FIELDS": BREAKDOWN_FIELDS,
          "PER_STAGE_FIELDS": PER_STAGE_FIELDS, "MOE_FIELDS": MOE_FIELDS, "SPECULATIVE_FIELDS": SPECULATIVE_FIELDS,
          "SPLIT_PREFILL_FIELDS": SPLIT_PREFILL_FIELDS, "ENERGY_PART_FIELDS": ENERGY_PART_FIELDS,
          "ENERGY_EVENT_FIELDS": ENERGY_EVENT_FIELDS, "REQUEST_FIELDS": REQUEST_FIELDS,
          "DECODE_OPS_FIELDS": DECODE_OPS_FIELDS, "SWEEP_FIELDS": SWEEP_FIELDS, "KERNEL_FIELDS": KERNEL_FIELDS,
          "FABRIC_FIELDS": FABRIC_FIELDS, "HOTTEST_FIELDS": HOTTEST_FIELDS}

# the tiny dense model on one PE of tiny8 of tests/sim/test_speculative.py, with a draft and with split prefill
DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96,
         "hardware.pe.sram": "1 MiB"}
TINY = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
        "inference": {"load": {"prompt_len": 8, "output_len": 9}, "grid": "1x1", "interconnect": "swarmx"}}
DRAFT = {"kind": "model", "name": "tiny-draft", "hidden_size": 64, "layers": 1, "heads": 4, "kv_heads": 2,
         "head_dim": 16, "ffn_intermediate": 96, "vocab_size": 256, "dtype": "fp16"}
LOAD = {"inference.load.arrival": "poisson", "inference.load.rate": 1e4, "inference.load.requests": 4, "inference.scheduler.batch": 2,
        "inference.scheduler.batching": "continuous"}


def _serve(data: dict = TINY, **overrides: object) -> ServeResult:
    r = run_inference(load_inference_data(data, overrides=overrides).spec).result
    assert r.feasible, r.infeasible_reason
    return r


def test_docs_outputs_md_is_what_the_code_generates() -> None:
    """Regenerate with ``wsesim schema --outputs > docs/outputs.md``."""
    assert DOC.read_text(encoding="utf-8") == markdown(), "run: wsesim schema --outputs > docs/outputs.md"


def test_every_description_has_a_unit_and_a_meaning() -> None:
    for name, table in TABLES.items():
        for key, doc in table.items():
            assert len(doc) in (2, 3) and doc[1].strip(), f"{name}[{key!r}]"
            assert len(doc) == 2 or re.fullmatch(r"§\d+(\.\d+)?", doc[2]), f"{name}[{key!r}]: {doc[2]!r}"


def test_every_file_is_described_with_no_name_twice() -> None:
    files = output_files()
    assert {f.name for f in files} == set(FILES)
    for f in files:
        names = [e.name for e in f.entries]
        assert len(names) == len(set(names)), f.name


def test_results_and_their_nested_keys_equal_the_dataclasses() -> None:
    assert list(RUN_RESULT_FIELDS) == [f.name for f in fields(RunResult)]
    assert list(PHASE_FIELDS) == list(STEP_PHASES)
    assert list(SERVE_RESULT_FIELDS) == [f.name for f in fields(ServeResult)]
    assert list(ENERGY_EVENT_FIELDS) == [f.name for f in fields(EventCounts)]
    assert tuple(ENERGY_PART_FIELDS) == PARTS


def test_csv_columns_equal_the_code_s() -> None:
    assert tuple(OPS_FIELDS) == OPS_COLUMNS
    assert tuple(REQUEST_FIELDS) == REQUEST_COLUMNS
    assert tuple(DECODE_OPS_FIELDS) == DECODE_OPS_COLUMNS
    assert set(SERVING_COLUMNS) <= set(SERVE_RESULT_FIELDS)
    phases = {f"phase_{p}_cycles" for p in STEP_PHASES}
    columns = result_columns([], speedup=True)
    described = set(SWEEP_FIELDS) | set(RUN_RESULT_FIELDS) | phases
    assert [c for c in columns if c not in described] == []
    # every sweep description names a column (or a family of them: <...>)
    assert [c for c in SWEEP_FIELDS if "<" not in c and c not in (*RESULT_COLUMNS, SPEEDUP)] == []


def _stage_keys(record: dict) -> set[str]:
    """A ``per_stage`` record's keys as the dictionary names them (``sram_bytes_per_pe.weights``)."""
    return {k for k in record if k != "sram_bytes_per_pe"} | {
        f"sram_bytes_per_pe.{k}" for k in record["sram_bytes_per_pe"]}


MOE = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
       "inference": {"load": {"prompt_len": 16, "output_len": 5}, "grid": "4x8",
                     "moe": {"expert_grids": 2, "routing": "uniform"},
                     "scheduler": {"batch": 2, "batching": "none"}}}


def test_a_serving_run_s_nested_keys_are_described() -> None:
    """The one-request pipeline's, continuous batching's and MoE serving's (its block, and each stage's
    grids and expert load): every key described, every description a key."""
    stage_keys: set[str] = set()
    for r in (_serve(**DENSE), _serve(**DENSE, **LOAD)):
        d = r.to_dict()
        assert set(d) <= set(SERVE_RESULT_FIELDS)
        assert set(d["decode_breakdown"]) == set(BREAKDOWN_FIELDS)
        assert set(d["prefill_breakdown"]) == set(BREAKDOWN_FIELDS) - {"waiting"}
        assert set(d["energy_events"]) == set(ENERGY_EVENT_FIELDS)
        stage_keys |= _stage_keys(d["per_stage"][0])
    d = _serve(MOE).to_dict()
    assert list(d["moe"]) == list(MOE_FIELDS)
    stage_keys |= _stage_keys(d["per_stage"][0])
    assert stage_keys == set(PER_STAGE_FIELDS)


def test_speculative_and_split_prefill_blocks_are_described() -> None:
    draft = {"inference.speculative": {"draft": DRAFT, "tokens": 4, "acceptance": 0.5}}
    pipeline, batched = _serve(**DENSE, **draft).speculative, _serve(**DENSE, **draft, **LOAD).speculative
    assert list(pipeline) == list(SPECULATIVE_FIELDS)
    assert list(batched) == list(SPECULATIVE_FIELDS)[:len(batched)]
    split = {"inference.disaggregation.prefill_systems": 1}
    pipeline, batched = _serve(**DENSE, **split).split_prefill, _serve(**DENSE, **split, **LOAD).split_prefill
    assert list(pipeline) == list(SPLIT_PREFILL_FIELDS)
    assert list(batched) == list(SPLIT_PREFILL_FIELDS)[:len(batched)]


@pytest.mark.parametrize(("kind", "kwargs"), [("gemm", {"shape": (8, 8, 8)}),
                                              ("allreduce", {"wavelets": 2})])
def test_kernels_csv_columns_are_described(kind: str, kwargs: dict) -> None:
    r = run_kernel(load_hardware("tiny8"), kind, 2, 2, **kwargs)
    assert list(flat(r.to_dict())) == list(KERNEL_FIELDS)


@pytest.mark.parametrize(("kind", "kwargs"), [("gemm", {"shape": (8, 8, 8)}), ("allreduce", {"gpus": 8}),
                                              ("attention", {"shape": (1, 256, 64), "heads": 2})])
def test_gpu_kernels_csv_columns_are_described(kind: str, kwargs: dict) -> None:
    r = run_gpu_kernel(load_hardware("h100"), kind, **kwargs)
    names = list(dict.fromkeys("shape_<dimension>" if k.startswith("shape_") else k for k in flat(r.to_dict())))
    assert names == list(GPU_KERNEL_FIELDS)


def test_fabric_csv_columns_are_described(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "f"
    assert cli.main(["fabric", "tiny8", "--pattern", "multicast", "--hops", "2", "--out", str(out)]) == 0
    capsys.readouterr()
    with (out / "fabric.csv").open(encoding="utf-8") as f:
        header = next(csv.reader(f))
    named = [re.sub(r"^multicast_arrivals_\d+$", "multicast_arrivals_<i>", c) for c in header]
    assert named == list(FABRIC_FIELDS)
    with (out / "hottest_links.csv").open(encoding="utf-8") as f:
        assert next(csv.reader(f)) == list(HOTTEST_FIELDS)


def test_schema_outputs_prints_the_dictionary(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema", "--outputs"]) == 0
    assert capsys.readouterr().out == markdown()
    assert cli.main(["schema", "--outputs", "requests.csv"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## `requests.csv` of a serving run") and "| `ttft_s` | s |" in out
    assert cli.main(["schema", "--outputs", "wafer.csv"]) == 2
    assert capsys.readouterr().err.startswith("wsesim: wsesim schema: --outputs: expected one of results.csv, ")
