"""``wsesim infer`` on a GPU preset (docs/model.md §13.7): the command line's figures, its JSON's ``gpu``
block, and a GPU run's refusals as one line on stderr with exit code 2."""

from __future__ import annotations

import json

import pytest

from wsesim import cli


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_llama3_8b_on_an_h100_node_prints_its_figures(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "infer", "--hardware", "h100", "--model", "llama3-8b")
    assert (code, err) == (0, "")
    assert "mapping: 1 node (tensor parallel over 8 of its 8 GPUs, KV heads in 8 shards)" in out
    for row in ("time to first token", "time per output token", "energy per token", "tokens/s per kW",
                "HBM per GPU (B)"):
        assert row in out
    assert " J (" in out.split("energy per token")[1].split("\n")[0]


def test_the_json_has_the_gpu_block_and_a_wafer_run_none(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(capsys, "infer", "--hardware", "h200", "--model", "llama3-8b", "--set",
                         "inference.tensor_parallel=2", "--set", "inference.load.prompt_len=128", "--json")
    r = json.loads(out)
    assert code == 0 and r["gpu"]["tensor_parallel"] == 2 and r["gpu"]["kv_shards"] == 2
    assert r["joules_per_token"] > 0 and r["tpot_s"] > 0 and r["systems"] == 1
    code, out, _ = _main(capsys, "infer", "--set", "inference.load.prompt_len=128", "--set", "inference.load.output_len=4",
                         "--json")
    assert code == 0 and "gpu" not in json.loads(out)


@pytest.mark.parametrize(("args", "message"), [
    (("infer", "--hardware", "h100", "--set", "inference.tensor_parallel=5"),
     "inference.tensor_parallel: expected a tensor-parallel size dividing the model's 32 attention heads, got 5"),
    (("run", "--hardware", "h100", "--set", "training.global_batch=64"),
     "training.global_batch: expected no global_batch on a GPU"),
    (("infer", "--hardware", "h200", "--search"), "--search: expected a wafer with --search"),
    (("infer", "--hardware", "b200", "--set", "inference.speculative.draft=llama3.2-1b", "--set",
      "inference.speculative.tokens=4", "--set", "inference.speculative.acceptance=0.8"),
     "inference.speculative: speculative decoding is not modelled on GPUs yet"),
])
def test_a_gpu_refusal_is_one_line(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                                   message: str) -> None:
    code, out, err = _main(capsys, *args)
    assert (code, out) == (2, "") and err.count("\n") == 1 and message in err
