"""The keys of dense models and mixed layers (wsesim.config.model_rules), gradient accumulation and
clusters (wsesim.config.cluster): what they accept, and a one-line error naming the key for nonsense (0,
negative, a micro-batch that does not divide the batch, an MoE key on a dense model, a cluster without its
interconnect). The keys were added by issue 11."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.loader import load_experiment, load_experiment_data, load_model, validate_file
from wsesim.config.specs import SPEC_KINDS

DENSE = {"model.experts": 0, "model.top_k": 0, "model.expert_intermediate": 0, "model.ffn_intermediate": 96}
TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe", "training": {"seq_len": 32}}


def _error(overrides: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        load_experiment_data(TINY, overrides=overrides)
    assert "\n" not in str(e.value) and len(str(e.value)) < 300
    return e.value


def test_dense_presets_load_with_their_published_shapes() -> None:
    llama, gptj, gpt3 = load_model("llama-7b"), load_model("gpt-j-6b"), load_model("gpt3-xl")
    assert (llama.experts, llama.dense_layer_count, llama.ffn_intermediate, llama.ffn_activation) == (0, 32, 11008, "swiglu")
    assert (gptj.parallel_block, gptj.ffn_activation, gptj.heads, gptj.head_dim) == (True, "gelu", 16, 256)
    assert (gpt3.tie_word_embeddings, gpt3.layers, gpt3.hidden_size) == (True, 24, 2048)
    assert load_model("llama2-7b").model_dump(exclude={"name", "description", "context_len"}) == llama.model_dump(
        exclude={"name", "description", "context_len"})  # the same shape; only the context differs
    assert (load_model("llama2-7b").context_len, llama.context_len) == (4096, 2048)


def test_a_mixed_model_has_its_first_layers_dense() -> None:
    spec = load_experiment_data(TINY, overrides={"model.dense_layers": 1, "model.ffn_intermediate": 96}).spec
    assert [spec.model.is_dense(i) for i in range(2)] == [True, False]
    assert load_experiment_data(TINY, overrides=DENSE).spec.model.dense_layer_count == 2


@pytest.mark.parametrize(("overrides", "path", "words"), [
    ({**DENSE, "model.top_k": 2}, "model.top_k", "expected at most experts (0), got 2"),
    ({**DENSE, "model.expert_intermediate": 32}, "model.expert_intermediate", "expected 0 without experts"),
    ({**DENSE, "model.ffn_intermediate": 0}, "model.ffn_intermediate", "expected a positive width"),
    ({**DENSE, "model.dense_layers": 1}, "model.dense_layers", "expected 0 or layers (2) in a dense model"),
    ({"model.dense_layers": 2, "model.ffn_intermediate": 96}, "model.dense_layers", "expected fewer than layers (2)"),
    ({"model.dense_layers": 1}, "model.ffn_intermediate", "expected a positive width"),
    ({"model.ffn_intermediate": 96}, "model.ffn_intermediate", "expected 0 in a model without dense layers"),
    ({"model.top_k": 0}, "model.top_k", "expected 1 to experts (4)"),
    ({"model.ffn_activation": "relu"}, "model.ffn_activation", "expected 'swiglu' or 'gelu'"),
    ({"model.dense_layers": -1}, "model.dense_layers", "expected a value ≥ 0"),
    ({"training.micro_batches": 0}, "training.micro_batches", "expected a value > 0 or 'auto', got 0"),
    ({"training.micro_batches": -3}, "training.micro_batches", "expected a value > 0 or 'auto', got -3"),
    ({"training.micro_batches": 1.5}, "training.micro_batches", "expected an integer or 'auto'"),
    ({"training.global_batch": 0}, "training.global_batch", "expected a value > 0"),
    ({"training.global_batch": -8}, "training.global_batch", "expected a value > 0"),
    ({"training.global_batch": 10, "training.tiles": 4}, "training.global_batch",
     "expected a multiple of tiles (4) = 4, got 10"),
    ({"training.global_batch": 12, "training.micro_batches": 5}, "training.global_batch",
     "expected a multiple of tiles (1) × micro_batches (5) = 5, got 12"),
    ({"training.global_batch": 12, "training.micro_batches": 2, "training.batch_per_tile": 2}, "training.global_batch",
     "expected exactly tiles (1) × micro_batches (2) × batch_per_tile (2) = 4, got 12"),
    ({"training.global_batch": 12, "cluster.systems": 8, "cluster.interconnect": "swarmx"}, "cluster",
     "expected a multiple of systems (8) × tiles (1) = 8, got 12"),
    ({"cluster.systems": 0}, "cluster.systems", "expected a value > 0"),
    ({"cluster.systems": -2}, "cluster.systems", "expected a value > 0"),
    ({"cluster.systems": 4}, "cluster.interconnect", "required with systems > 1"),
    ({"cluster.systems": 4, "cluster.interconnect": "infiniband"}, "cluster.interconnect",
     "expected an interconnect preset (swarmx) or a path"),
    ({"cluster.systems": 2, "cluster.interconnect": {"name": "t", "fan_out": 1, "link_bandwidth": "1 GB/s",
                                                     "latency": "1 us"}}, "cluster.interconnect.fan_out",
     "expected a value ≥ 2"),
    ({"cluster.systems": 2, "cluster.interconnect": {"name": "t", "fan_out": 4, "link_bandwidth": "0 GB/s",
                                                     "latency": "1 us"}}, "cluster.interconnect.link_bandwidth",
     "expected a bandwidth from 1 MB/s"),
    ({"cluster.systems": 2, "cluster.interconnect": {"name": "t", "fan_out": 4, "link_bandwidth": "1 GB/s",
                                                     "latency": "-1 us"}}, "cluster.interconnect.latency",
     "expected a time from 0 s"),
])
def test_nonsense_is_one_line_naming_the_key(overrides: dict[str, Any], path: str, words: str) -> None:
    e = _error(overrides)
    assert e.path == path, str(e)
    assert words in e.message, str(e)


def test_accepted_splits() -> None:
    t = load_experiment_data(TINY, overrides={"training.global_batch": 12, "training.tiles": 2,
                                              "training.micro_batches": 3}).spec.training
    assert (t.global_batch, t.tiles, t.micro_batches, t.batch_per_tile) == (12, 2, 3, "auto")
    spec = load_experiment_data(TINY, overrides={"training.global_batch": 16, "cluster.systems": 4,
                                                 "cluster.interconnect": "swarmx", "training.tiles": 2}).spec
    assert (spec.cluster.systems, spec.cluster.interconnect.fan_out) == (4, 4)
    assert spec.cluster.interconnect.link_bandwidth_bytes_per_s == 195e9  # a CS-3's 1.56 Tb/s per port
    assert spec.cluster.interconnect.latency_s == pytest.approx(2e-6)


def test_defaults_are_todays_single_wafer() -> None:
    spec = load_experiment().spec
    assert (spec.training.micro_batches, spec.training.global_batch) == ("auto", None)
    assert (spec.cluster.systems, spec.cluster.interconnect) == (1, None)
    assert (spec.model.dense_layers, spec.model.ffn_intermediate, spec.model.dense_layer_count) == (0, 0, 0)


def test_the_interconnect_preset_is_a_kind_of_its_own() -> None:
    kind, spec = validate_file(Path(__file__).resolve().parents[2] / "hardware" / "interconnect" / "swarmx.yaml")
    assert kind == "interconnect" and SPEC_KINDS[kind] is type(spec)
    assert (spec.name, spec.fan_out) == ("swarmx", 4)
