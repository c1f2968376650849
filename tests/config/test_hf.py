"""``--model config.json`` (wsesim.config.hf): the shipped presets' own published Hugging Face configs,
written by hand into ``tests/data/hf/`` from the values the presets' comments cite (not fetched), read
into the same model spec as the preset; keys that may change the architecture are refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wsesim import cli
from wsesim.config.errors import ConfigError
from wsesim.config.loader import load_experiment, load_model

HF = Path(__file__).resolve().parents[1] / "data" / "hf"

# Where a published config.json and the preset knowingly part (each preset's comment says why):
DIFFERENCES: dict[str, dict[str, tuple[Any, Any]]] = {
    "gpt-j-6b": {"vocab_size": (50400, 50257)},  # Hugging Face pads the vocabulary; the Model Zoo runs 50257
    # checkpoints stored in float16; the presets train in bf16 (2 bytes either way)
    "llama2-13b": {"dtype": ("fp16", "bf16")}, "llama2-7b": {"dtype": ("fp16", "bf16")},
    "llama-7b": {"dtype": ("fp16", "bf16")},
}


def _spec(ref: str | Path) -> dict[str, Any]:
    return load_model(ref).model_dump(exclude={"name", "description"})


@pytest.mark.parametrize("name", sorted(p.stem for p in HF.glob("*.json")))
def test_a_published_config_reads_as_its_preset(name: str) -> None:
    got, preset = _spec(HF / f"{name}.json"), _spec(name)
    differs = {k: (got[k], preset[k]) for k in got if got[k] != preset[k]}
    assert differs == DIFFERENCES.get(name, {})


def test_every_family_is_covered() -> None:
    families = {json.loads(p.read_text())["model_type"] for p in HF.glob("*.json")}
    assert {"llama", "qwen3_moe", "mixtral", "deepseek_v3", "gptj"} <= families


def test_a_config_json_is_a_model_reference_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    loaded = load_experiment(model=str(HF / "mixtral-8x7b.json"))
    assert loaded.spec.model.experts == 8 and loaded.spec.model.name == "mixtral-8x7b"
    assert loaded.sources["model"] == str(HF / "mixtral-8x7b.json")
    assert cli.main(["memory", "training", "--model", str(HF / "llama3-8b.json"), "--json"]) == 0
    assert "llama3-8b" in capsys.readouterr().out


def _write(tmp_path: Path, name: str, **changes: Any) -> Path:
    data = json.loads((HF / f"{name}.json").read_text())
    data.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("name", "changes", "key", "says"), [
    ("llama3-8b", {"model_type": "falcon"}, "model_type", "expected one of"),
    ("llama3-8b", {"num_local_experts": 8}, "num_local_experts", "not understood for model_type llama"),
    ("qwen3-30b-a3b", {"mystery_gate": True}, "mystery_gate", "not understood"),
    ("qwen3-30b-a3b", {"use_sliding_window": True}, "use_sliding_window", "expected false"),
    ("qwen3-30b-a3b", {"decoder_sparse_step": 2}, "decoder_sparse_step", "expected 1"),
    ("qwen3-30b-a3b", {"mlp_only_layers": [3, 7]}, "mlp_only_layers", "the first layers"),
    ("mixtral-8x7b", {"sliding_window": "4096"}, "sliding_window", "expected an integer"),
    ("deepseek-v3", {"moe_layer_freq": 2}, "moe_layer_freq", "expected 1"),
    ("llama3-8b", {"hidden_act": "relu"}, "hidden_act", "expected one of silu, swish"),
    ("llama3-8b", {"torch_dtype": "float8"}, "torch_dtype", "expected one of bfloat16"),
    ("llama3-8b", {"hidden_size": "4096"}, "hidden_size", "expected an integer"),
])
def test_what_it_does_not_understand_is_refused_by_name(tmp_path: Path, name: str, changes: dict[str, Any], key: str,
                                                        says: str) -> None:
    path = _write(tmp_path, name, **changes)
    with pytest.raises(ConfigError) as e:
        load_model(path)
    assert (e.value.source, e.value.path) == (str(path), key) and says in e.value.message


def test_first_dense_layers_of_a_qwen_moe_and_a_missing_key(tmp_path: Path) -> None:
    spec = load_model(_write(tmp_path, "qwen3-30b-a3b", mlp_only_layers=[0, 1]))
    assert (spec.dense_layers, spec.ffn_intermediate, spec.name) == (2, 6144, tmp_path.name)
    data = json.loads((HF / "llama3-8b.json").read_text())
    del data["vocab_size"]
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="vocab_size: required key is missing"):
        load_model(tmp_path / "config.json")


def test_the_cli_refuses_in_one_line_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "llama3-8b", n_shared_experts=2)
    assert cli.main(["run", "--model", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert err == f"wsesim: {path}: n_shared_experts: not understood for model_type llama: wsesim does not know " \
                  "whether it changes the architecture, and does not guess (remove it, or write a model YAML)\n"
    assert cli.main(["run", "--hardware", str(path)]) == 2
    assert "--hardware: expected a hardware YAML file" in capsys.readouterr().err


def test_serving_takes_a_config_json_too() -> None:
    from wsesim.config.inference import load_inference

    from_json = load_inference(model=str(HF / "llama3-8b.json")).spec.model
    assert from_json.model_dump(exclude={"description"}) == load_inference(model="llama3-8b").spec.model.model_dump(
        exclude={"description"})
    with pytest.raises(ConfigError) as e:
        load_inference(model="nope")
    assert e.value.source == "--model"


def test_a_sliding_window_is_the_models_and_refused_only_where_it_matters(tmp_path: Path) -> None:
    """Issue 29 (low): Mistral-7B's ``sliding_window: 4096`` (its config, with no ``use_sliding_window``) is
    read as the model's window. Attention over the whole sequence is the window's own up to 4,096 tokens,
    so a 4,096-token training sequence and a 4,000 + 97-token request (each token attends over the 4,096
    before it, itself included) run; one token more is refused, naming the key and the window."""
    from wsesim.config.inference import load_inference

    mistral = {**json.loads((HF / "llama3-8b.json").read_text()), "model_type": "mistral",
               "sliding_window": 4096, "max_position_embeddings": 32768}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(mistral))
    assert load_model(path).sliding_window == 4096 and load_model(path).context_len == 32768
    assert load_experiment(model=str(path), overrides={"training.seq_len": 4096}).spec.model.sliding_window == 4096
    with pytest.raises(ConfigError) as e:
        load_experiment(model=str(path), overrides={"training.seq_len": 4097})
    assert e.value.message.startswith("training.seq_len: expected at most model.sliding_window (4,096 tokens), "
                                      "got 4,097: ")
    ok = {"inference.load.prompt_len": 4000, "inference.load.output_len": 97}
    assert load_inference(model=str(path), overrides=ok).spec.inference.load.prompt_len == 4000
    with pytest.raises(ConfigError, match=r"inference.load.prompt_len \+ output_len - 1: expected at most "
                                          r"model.sliding_window \(4,096 tokens\), got 4,097"):
        load_inference(model=str(path), overrides={**ok, "inference.load.output_len": 98})
