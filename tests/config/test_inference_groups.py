"""The serving keys in groups (docs/model.md §11.7): a valid file per load variant loads with the values it
wrote; a key of another variant is refused in one line naming the variant it belongs to; every key of the
old flat ``inference:`` section, in a file or by ``--set``, is refused in one line naming its new home,
exit code 2 through the CLI and no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from wsesim import cli
from wsesim.config.errors import ConfigError
from wsesim.config.inference import load_inference_data
from wsesim.config.inference_load import MOVED, LognormalLengths, PoissonLoad, TogetherLoad, TraceLoad

BASE = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe"}
REPO = Path(__file__).resolve().parents[2]


def _load(inference: dict, source: str = "f.yaml"):
    return load_inference_data({**BASE, "inference": inference}, source=source).spec.inference


def test_a_together_load_is_the_default_and_its_requests_default_to_the_batch() -> None:
    inf = _load({"scheduler": {"batch": 3}})
    assert isinstance(inf.load, TogetherLoad) and inf.load.requests is None
    assert inf.request_count == 3 and not inf.alone  # three at cycle 0: one full batch
    assert _load({}).alone and _load({"load": {"requests": 7}, "scheduler": {"batch": 3}}).request_count == 7


def test_a_load_without_arrival_arrives_together() -> None:
    assert isinstance(_load({"load": {"prompt_len": 16}}).load, TogetherLoad)


def test_a_poisson_load_with_lognormal_lengths_keeps_what_it_wrote() -> None:
    inf = _load({"load": {"arrival": "poisson", "rate": "2 /s", "requests": 10, "lengths": {"lognormal": 0.5},
                          "seed": 4, "warmup": 2}})
    assert isinstance(inf.load, PoissonLoad)
    assert (inf.load.rate, inf.load.requests, inf.load.seed, inf.load.warmup) == (2.0, 10, 4, 2)
    assert inf.load.lengths == LognormalLengths(lognormal=0.5) and inf.load.sigma == 0.5 and inf.load.lognormal
    assert _load({"load": {"lengths": "lognormal"}}).load.sigma == 1.0  # the default σ
    assert not _load({}).load.lognormal


def test_a_trace_load_reads_its_file_relative_to_the_experiment(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("arrival_s,prompt_len,output_len\n0,4,2\n0.5,6,3\n")
    spec = load_inference_data({**BASE, "inference": {"load": {"arrival": "trace", "file": "t.csv"}}},
                               source=str(tmp_path / "e.yaml"), base_dir=tmp_path).spec
    assert isinstance(spec.inference.load, TraceLoad)
    assert spec.inference.trace_file == str((tmp_path / "t.csv").resolve())
    assert spec.inference.request_count is None  # the trace's rows, known once it is read


def test_the_other_groups_load() -> None:
    inf = _load({"scheduler": {"batching": "continuous", "prefill": "chunked", "token_budget": 64, "kv_block": 8,
                               "preemption": "swap"},
                 "moe": {"routing": "zipf:1.2", "expert_grids": 2}, "economics": {"price_per_system_hour": 7},
                 "slo": {"ttft": "1 s", "tpot": "10 ms"}})
    assert (inf.scheduler.kv_block, inf.scheduler.preempt_by, inf.scheduler.continuous) == (8, "swap", True)
    assert (inf.moe.sampled, inf.moe.zipf_alpha, inf.moe.expert_grids) == (True, 1.2, 2)
    assert inf.economics.price_per_system_hour == 7 and inf.slo.tpot_s == 0.01
    assert inf.economics is not None and _load({}).economics is None and _load({}).disaggregation is None


@pytest.mark.parametrize(("load", "message"), [
    ({"arrival": "together", "rate": 2},
     "inference.load.rate: expected no rate with arrival: together (rate belongs to arrival: poisson)"),
    ({"rate": 2}, "inference.load.rate: expected no rate with arrival: together (rate belongs to arrival: poisson)"),
    ({"arrival": "together", "file": "t.csv"},
     "inference.load.file: expected no file with arrival: together (file belongs to arrival: trace)"),
    ({"arrival": "poisson", "rate": 2, "requests": 3, "file": "t.csv"},
     "inference.load.file: expected no file with arrival: poisson (file belongs to arrival: trace)"),
    ({"arrival": "trace", "file": "t.csv", "rate": 2},
     "inference.load.rate: expected no rate with arrival: trace (rate belongs to arrival: poisson)"),
    ({"arrival": "trace", "file": "t.csv", "lengths": "lognormal"},
     "inference.load.lengths: expected no lengths with arrival: trace (lengths belongs to arrival: together or "
     "poisson)"),
    ({"arrival": "poisson", "requests": 3}, "inference.load.rate: expected rate with arrival: poisson, got none"),
    ({"arrival": "poisson", "rate": 2}, "inference.load.requests: expected requests with arrival: poisson, got none"),
    ({"arrival": "burst"}, "inference.load: expected arrival: one of 'together', 'poisson', 'trace', got "
                           '"burst" (a string)'),
    ({"arrival": "together", "bogus": 1}, 'inference.load.bogus: unknown key (valid keys: arrival, lengths, '
                                          'output_len, prompt_len, requests, seed, warmup)'),
    ({"lengths": {"lognormal": 5}}, "inference.load.lengths.lognormal: expected a value ≤ 4"),
])
def test_a_key_of_another_variant_is_refused_in_one_line_naming_it(load: dict, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        _load({"load": load})
    assert str(e.value).startswith("f.yaml: ") and message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(("inference", "message"), [
    ({"scheduler": {"preemption": "swap"}}, "inference.scheduler.preemption: expected no preemption without "
                                            "kv_block"),
    ({"scheduler": {"kv_block": 8, "batching": "none"}},
     "inference.scheduler.kv_block: expected batching: auto or continuous with kv_block"),
    ({"kv_layout": "concat", "scheduler": {"kv_block": 8}}, "inference.scheduler.kv_block: expected kv_layout: "
                                                            "shift with kv_block"),
    ({"disaggregation": {"prefill_systems": 1}, "scheduler": {"batching": "none"}},
     "inference.disaggregation.prefill_systems: expected batching: auto or continuous with prefill_systems"),
    ({"load": {"warmup": 3}, "scheduler": {"batch": 3}},
     "inference.load.warmup: expected a warmup below the run's 3 requests"),
    ({"moe": {"routing": "top"}}, "inference.moe.routing: expected"),
])
def test_a_rule_across_groups_is_one_line_at_its_key(inference: dict, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        _load(inference)
    assert message in str(e.value) and "\n" not in str(e.value)


OLD_VALUES = {"arrival": "poisson", "trace": "t.csv", "lengths": "lognormal", "batching": "none",
              "prefill": "chunked", "preemption": "swap", "routing": "uniform", "expert_grids": 2,
              "length_sigma": 0.5, "rate": 2, "chunk": 64}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_flat_key_in_a_file_names_its_new_home(old: str) -> None:
    with pytest.raises(ConfigError) as e:
        _load({old: OLD_VALUES.get(old, 4)})
    assert str(e.value).startswith(f"f.yaml: inference.{old}: moved to inference.{MOVED[old]}")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_flat_key_by_set_names_its_new_home_exit_2(old: str, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set",
                     f"inference.{old}={OLD_VALUES.get(old, 4)}", "--json"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith(f"wsesim: --set: inference.{old}: moved to inference.{MOVED[old]}")
    assert "\n" not in err and "Traceback" not in err and captured.out == ""


def test_an_old_flat_file_is_refused_through_the_cli_without_a_traceback(tmp_path: Path) -> None:
    old = tmp_path / "old.yaml"
    old.write_text("kind: inference\nhardware: tiny8\nmodel: tiny-moe\ninference:\n  batch: 4\n  rate: 2\n",
                   encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "wsesim", "infer", str(old)], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"wsesim: {old}: inference.batch: moved to inference.scheduler.batch "
                           "(docs/model.md §11.7)\n")


def test_a_key_of_another_variant_by_the_cli_is_exit_2_in_one_line(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.rate=2",
                     "--json"]) == 2
    err = capsys.readouterr().err
    assert err == ("wsesim: --set: inference.load.rate: expected no rate with arrival: together (rate belongs to "
                   "arrival: poisson)\n")
