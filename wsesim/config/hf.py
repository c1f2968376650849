"""A model from where it lives: a Hugging Face ``config.json`` read into a model mapping (``--model
path/to/config.json``, anywhere a model reference is accepted; the loader calls ``model_from_hf``).

Families (by ``model_type``): LLaMA (``llama``, ``mistral``), Qwen2/Qwen3 (``qwen2``, ``qwen3``), their
MoE (``qwen2_moe``, ``qwen3_moe``), Mixtral (``mixtral``), DeepSeek-V2/V3 (``deepseek_v2``,
``deepseek_v3``) and GPT-J (``gptj``). Each key is either read (``FAMILIES``: hidden size, layers,
heads, KV heads, head dim, FFN or expert widths, experts, top_k, shared experts, vocabulary, tied
embeddings, first dense layers, latent-attention ranks, dtype), known to change nothing wsesim costs
(``IGNORED``: token ids, norms' epsilons, RoPE, dropout, the router's loss and its group-limited choice,
biases, which wsesim never counts), or refused by name: a key wsesim does not know may change the
architecture, so it is not guessed at (one line naming the key, exit 2). Values that would change it
in a way wsesim does not model are refused too (a sliding window, MoE layers only every n-th layer).

Left out, as the presets leave them out: DeepSeek's multi-token-prediction module
(``num_nextn_predict_layers``) and its FP8 checkpoint format (``quantization_config``: training runs in
``torch_dtype``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import ConfigError, shown_repr
from .yaml_strict import MAX_CONFIG_BYTES, read_bounded

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
_GATED = {"silu", "swish"}  # SwiGLU; wsesim's other activation is an ungated GELU MLP (GPT-J's)
_COMMON = {"model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
           "tie_word_embeddings", "torch_dtype", "dtype", "hidden_act", "intermediate_size",
           "num_key_value_heads"}
FAMILIES: dict[str, set[str]] = {
    "llama": _COMMON | {"head_dim"},
    "mistral": _COMMON | {"head_dim", "sliding_window"},
    "qwen2": _COMMON | {"use_sliding_window", "sliding_window", "max_window_layers"},
    "qwen3": _COMMON | {"head_dim", "use_sliding_window", "sliding_window", "max_window_layers",
                        "layer_types"},
    "qwen2_moe": _COMMON | {"use_sliding_window", "sliding_window", "max_window_layers", "num_experts",
                            "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
                            "decoder_sparse_step", "mlp_only_layers"},
    "qwen3_moe": _COMMON | {"head_dim", "use_sliding_window", "sliding_window", "max_window_layers",
                            "num_experts", "num_experts_per_tok", "moe_intermediate_size",
                            "decoder_sparse_step", "mlp_only_layers", "layer_types"},
    "mixtral": _COMMON | {"head_dim", "sliding_window", "num_local_experts", "num_experts_per_tok"},
    "deepseek_v2": _COMMON | {"n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
                              "n_shared_experts", "first_k_dense_replace", "moe_layer_freq", "kv_lora_rank",
                              "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"},
    "gptj": {"model_type", "n_embd", "n_layer", "n_head", "n_inner", "vocab_size", "tie_word_embeddings",
             "torch_dtype", "dtype", "activation_function", "rotary_dim", "rotary"},
}
FAMILIES["deepseek_v3"] = FAMILIES["deepseek_v2"]
IGNORED = frozenset({
    "architectures", "_name_or_path", "transformers_version", "auto_map", "bos_token_id", "eos_token_id",
    "pad_token_id", "initializer_range", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon",
    "max_position_embeddings", "max_sequence_length", "n_positions", "n_ctx", "rope_theta", "rope_scaling",
    "rope_parameters", "use_cache", "attention_dropout", "hidden_dropout", "embd_pdrop", "attn_pdrop",
    "resid_pdrop", "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "norm_topk_prob",
    "pretraining_tp", "attention_bias", "mlp_bias", "qkv_bias", "tokenizer_class", "scale_attn_weights",
    "gradient_checkpointing", "summary_activation", "summary_first_dropout", "summary_proj_to_labels",
    "summary_type", "summary_use_proj", "task_specific_params", "n_group", "topk_group", "topk_method",
    "routed_scaling_factor", "scoring_func", "seq_aux", "aux_loss_alpha", "ep_size",
    "num_nextn_predict_layers", "quantization_config", "id2label", "label2id", "return_dict", "torchscript",
    "is_decoder", "attn_implementation",
})
"""Keys that change nothing wsesim costs: ids, epsilons, positions, dropout, the router's auxiliary loss
and its group-limited top-k (the routing is wsesim's own, ``training.routing``), biases (never counted),
and what the module docstring says is left out."""


def model_from_hf(path: Path) -> dict[str, Any]:
    """The model mapping (``ModelSpec``'s keys) of a Hugging Face ``config.json`` at ``path``."""
    source = str(path)
    # a regular file, bounded
    raw = read_bounded(path, limit=MAX_CONFIG_BYTES, what="a Hugging Face config.json")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"expected a Hugging Face config.json, got a file that is not JSON ({e})",
                          source=source) from None
    except RecursionError:  # arrays or objects nested thousands deep: no config.json is
        raise ConfigError("expected a Hugging Face config.json, got JSON nested too deep to read",
                          source=source) from None
    if not isinstance(data, dict):
        raise ConfigError(f"expected a JSON object (a Hugging Face config.json), got a {type(data).__name__}",
                          source=source)
    family = data.get("model_type")
    if not isinstance(family, str) or family not in FAMILIES:
        raise ConfigError(f"expected one of {', '.join(sorted(FAMILIES))}, got {shown_repr(family)}",
                          source=source, path="model_type")
    for key in data:
        if key not in FAMILIES[family] and key not in IGNORED:
            raise ConfigError(f"not understood for model_type {family}: wsesim does not know whether it "
                              "changes the architecture, and does not guess "
                              "(remove it, or write a model YAML)", source=source, path=key)
    return _Reader(data, source, family).model(_name(path))


def _one_of(value: Any, names: Any) -> bool:
    """``value in names`` for a name; False for a list or a mapping (unhashable) where a name goes."""
    return isinstance(value, str) and value in names


def _name(path: Path) -> str:
    """The model's name: the folder of a ``config.json`` (as a hub download names it), else the stem."""
    stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return stem or "hf-model"


class _Reader:
    def __init__(self, data: dict[str, Any], source: str, family: str) -> None:
        self.data, self.source, self.family = data, source, family

    def fail(self, key: str, expected: str) -> ConfigError:
        return ConfigError(f"expected {expected}, got {shown_repr(self.data.get(key))}", source=self.source,
                           path=key)

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.data.get(key, default)
        if value is None and default is not None:
            value = default
        if isinstance(value, bool) or not isinstance(value, int):
            if key not in self.data:
                raise ConfigError("required key is missing (expected an integer)", source=self.source,
                                  path=key)
            raise self.fail(key, "an integer")
        return value

    def model(self, name: str) -> dict[str, Any]:
        d, gptj = self.data, self.family == "gptj"
        hidden = self.integer("n_embd" if gptj else "hidden_size")
        heads = self.integer("n_head" if gptj else "num_attention_heads")
        if heads <= 0:
            raise self.fail("n_head" if gptj else "num_attention_heads", "a positive number of heads")
        layers = self.integer("n_layer" if gptj else "num_hidden_layers")
        out: dict[str, Any] = {
            "name": name,
            "description": f"from the Hugging Face config.json at {self.source} ({self.family})",
            "hidden_size": hidden, "layers": layers, "heads": heads,
            "kv_heads": heads if gptj else self.integer("num_key_value_heads", heads),
            "head_dim": self.integer("head_dim", hidden // heads) if heads else 0,
            "vocab_size": self.integer("vocab_size"),
            "tie_word_embeddings": self._bool("tie_word_embeddings"),
            "dtype": self._dtype(),
            "context_len": self.integer("n_positions" if gptj else "max_position_embeddings", 0),
        }
        if gptj:
            return {**out, "head_dim": hidden // heads,
                    "ffn_intermediate": self.integer("n_inner", 4 * hidden),
                    "ffn_activation": self._gelu(), "parallel_block": True}
        if not _one_of(d.get("hidden_act", "silu"), _GATED):
            raise self.fail("hidden_act", f"one of {', '.join(sorted(_GATED))} (a gated FFN, SwiGLU)")
        out |= self._sliding_window()
        if self.family.startswith("deepseek"):
            return self._deepseek(out, heads)
        experts = {"mixtral": "num_local_experts", "qwen2_moe": "num_experts",
                   "qwen3_moe": "num_experts"}.get(self.family)
        if experts is None:  # dense
            return {**out, "ffn_intermediate": self.integer("intermediate_size")}
        width = "intermediate_size" if self.family == "mixtral" else "moe_intermediate_size"
        out |= {"experts": self.integer(experts), "top_k": self.integer("num_experts_per_tok"),
                "expert_intermediate": self.integer(width)}
        if self.family == "qwen2_moe":
            out["shared_expert_intermediate"] = self.integer("shared_expert_intermediate_size", 0)
        if self.integer("decoder_sparse_step", 1) != 1:
            raise self.fail("decoder_sparse_step", "1 (every layer MoE; wsesim has no MoE layer every n-th)")
        dense = d.get("mlp_only_layers") or []
        if not isinstance(dense, list) or dense != list(range(len(dense))):
            raise self.fail("mlp_only_layers",
                            "[] or the first layers [0, 1, ..., n-1] (dense layers come first)")
        return out | ({"dense_layers": len(dense), "ffn_intermediate": self.integer("intermediate_size")}
                      if dense else {})

    def _deepseek(self, out: dict[str, Any], heads: int) -> dict[str, Any]:
        width = self.integer("moe_intermediate_size")
        if self.integer("moe_layer_freq", 1) != 1:
            raise self.fail("moe_layer_freq", "1 (every layer after the first dense ones MoE)")
        dense = self.integer("first_k_dense_replace", 0)
        q_lora = self.data.get("q_lora_rank")
        out |= {"kv_heads": heads, "head_dim": self.integer("qk_nope_head_dim"),
                "kv_lora_rank": self.integer("kv_lora_rank"),
                "q_lora_rank": 0 if q_lora is None else self.integer("q_lora_rank"),
                "qk_rope_head_dim": self.integer("qk_rope_head_dim"),
                "v_head_dim": self.integer("v_head_dim"),
                "experts": self.integer("n_routed_experts"), "top_k": self.integer("num_experts_per_tok"),
                "expert_intermediate": width,
                "shared_expert_intermediate": self.integer("n_shared_experts", 0) * width}
        return out | ({"dense_layers": dense, "ffn_intermediate": self.integer("intermediate_size")}
                      if dense else {})

    def _sliding_window(self) -> dict[str, int]:
        """Mistral's and Mixtral's ``sliding_window`` (no ``use_sliding_window`` key: a number is in force) as
        the model's; a sequence longer than it is refused when an experiment is validated
        (``specs.window_problem``). Qwen's windows, in force on only some layers, are refused here."""
        d = self.data
        if d.get("use_sliding_window"):
            raise self.fail("use_sliding_window", "false (wsesim's attention is over the whole sequence)")
        window = {}
        if "use_sliding_window" not in d and d.get("sliding_window") is not None:
            window = {"sliding_window": self.integer("sliding_window")}
        types = d.get("layer_types")
        if types is not None and (not isinstance(types, list) or any(t != "full_attention" for t in types)):
            raise ConfigError("expected every layer full_attention (wsesim has no sliding-window layers), "
                              f"got {shown_repr(types)}", source=self.source, path="layer_types")
        return window

    def _bool(self, key: str) -> bool:
        value = self.data.get(key, False)
        if not isinstance(value, bool):
            raise self.fail(key, "true or false")
        return value

    def _dtype(self) -> str:
        key = "torch_dtype" if "torch_dtype" in self.data else "dtype"
        value = self.data.get(key, "bfloat16")
        if not _one_of(value, _DTYPES):
            raise self.fail(key, f"one of {', '.join(_DTYPES)}")
        return _DTYPES[value]

    def _gelu(self) -> str:
        if not _one_of(self.data.get("activation_function", "gelu_new"), ("gelu", "gelu_new", "gelu_fast")):
            raise self.fail("activation_function", "gelu, gelu_new or gelu_fast (GPT-J's MLP)")
        return "gelu"
