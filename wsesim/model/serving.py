"""The SRAM model of serving (docs/model.md §11.3): what a pipeline stage's grid holds per PE — its
layers' weights, the KV cache of every request it serves, and the activations in flight — and the
longest output that still fits, under the two KV-cache layouts.

A stage's weights are spread evenly over its grid (each PE holds a block of every matrix, as the
kernels of ``wsesim.kernels`` assume). The KV cache:

* ``shift`` — balanced over the whole grid: when a new token's K and V rows arrive, the rows are
  shifted along the grid so every PE holds the same number of tokens (±1);
* ``concat`` — appended where the cache ends: the prompt's tokens are spread over the grid's P rows of
  PEs, every decoded token goes to the last row, so that row fills first.

Pure functions, sizes in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.specs import ModelSpec
from .shapes import LayerShapes

__all__ = ["StageMemory", "activation_bytes", "experts_per_grid", "kv_bytes_per_token", "kv_cache_bytes",
           "kv_pool_tokens", "layer_weight_bytes", "requests_fit", "stage_memory"]


def kv_bytes_per_token(model: ModelSpec) -> float:
    """K and V of one token in one layer: 2 · kv_heads · head width · bytes (with latent attention, the
    latent and the rotary key, which is what such a model caches)."""
    s = LayerShapes(model)
    if model.kv_lora_rank:
        return float((model.kv_lora_rank + model.qk_rope_head_dim) * model.bytes_per_value)
    _, k, v, _ = s.qkvo_widths
    return float((k + v) * model.bytes_per_value)


def layer_weight_bytes(model: ModelSpec, layer: int, expert_grids: int = 1) -> float:
    """Weights of one layer held on its stage's first grid: a dense layer whole; an MoE layer's
    attention, router and shared expert, and its share of the routed experts when they are spread over
    ``expert_grids`` grids (``experts_per_grid``; with one grid every expert, all of them resident)."""
    s = LayerShapes(model)
    if model.is_dense(layer):
        return float(s.dense_layer_params * model.bytes_per_value)
    routed = (model.experts - experts_per_grid(model.experts, expert_grids)) * s.expert_params
    return float((s.moe_layer_params - routed) * model.bytes_per_value)


def experts_per_grid(experts: int, grids: int) -> int:
    """The most experts of one layer a grid holds when its ``experts`` are dealt over ``grids`` grids
    in blocks of ⌈E/G⌉ (the first grids full, the last with the rest)."""
    return -(-experts // max(grids, 1))


@dataclass(frozen=True)
class StageMemory:
    """Per PE of one stage's grid: weights, the KV cache at the run's longest context, the activations,
    and what is usable; ``max_output`` is the longest output (tokens) whose cache still fits."""

    weights: float
    kv_cache: float
    activations: float
    usable: float
    max_output: int

    @property
    def total(self) -> float:
        return self.weights + self.kv_cache + self.activations

    @property
    def fits(self) -> bool:
        return self.total <= self.usable


def kv_cache_bytes(per_token: float, prompt: float, output: float, rows: int, cols: int,
                   layout: str) -> float:
    """KV cache per PE of ``prompt`` + ``output`` tokens (a request's, or summed over requests) at
    ``per_token`` bytes a token (every layer of the stage): ``shift`` over the whole grid, ``concat`` the
    prompt over the rows and every decoded token on the last row."""
    if layout == "shift":
        return per_token * (prompt + output) / (rows * cols)
    return per_token * (prompt / rows + output) / cols


def activation_bytes(model: ModelSpec, batch: int, prompt: int, rows: int, cols: int) -> float:
    """Activations per PE: two hidden vectors per request in flight over a row, or four of the
    ``prompt``'s (the longest being prefilled) over the grid, whichever is more."""
    return max(batch * model.hidden_size * model.bytes_per_value * 2 / cols,
               prompt * model.hidden_size * model.bytes_per_value * 4 / (rows * cols))


def requests_fit(model: ModelSpec, memory: StageMemory, layers: int, rows: int, cols: int, layout: str,
                 batch: int, prompts: int, outputs: int, longest: int) -> bool:
    """Whether a stage (its weights per PE as ``memory`` holds them) holds the KV cache of ``batch``
    requests of ``prompts`` + ``outputs`` tokens in all, the longest prompt ``longest``, and their
    activations: what continuous batching admits (docs/model.md §11.7)."""
    kv = kv_cache_bytes(kv_bytes_per_token(model) * layers, prompts, outputs, rows, cols, layout)
    return memory.weights + kv + activation_bytes(model, batch, longest, rows, cols) <= memory.usable


def kv_pool_tokens(model: ModelSpec, memory: StageMemory, layers: int, rows: int, cols: int, batch: int,
                   longest: int) -> int:
    """The tokens of KV cache a stage holds beside its weights and the activations of ``batch`` requests
    whose longest prompt is ``longest``, the cache balanced over the grid (``shift``): the most T for which
    ``requests_fit`` holds T tokens at that batch, the one bound admission reads, so a pool of paged
    blocks (``inference.scheduler.kv_block``, docs/model.md §11.7) is cut from exactly the room it would
    reserve."""
    per_pe = kv_cache_bytes(kv_bytes_per_token(model) * layers, 1, 0, rows, cols, "shift")
    free = memory.usable - memory.weights - activation_bytes(model, batch, longest, rows, cols)
    most = 2**31 - 1
    if free < 0:
        return 0
    tokens = most if per_pe <= 0 else int(min(free / per_pe, most))

    def fit(t: int) -> bool:
        return requests_fit(model, memory, layers, rows, cols, "shift", batch, t, 0, longest)
    while tokens > 0 and not fit(tokens):  # the division's rounding, settled by the bound itself
        tokens -= 1
    while tokens < most and fit(tokens + 1):
        tokens += 1
    return tokens


def stage_memory(model: ModelSpec, weight_bytes: float, layers: int, rows: int, cols: int, usable: float,
                 prompt_len: int, output_len: int, batch: int, layout: str) -> StageMemory:
    """Per-PE SRAM of a stage holding ``weight_bytes`` of weights and ``layers`` layers' KV cache for
    ``batch`` requests of ``prompt_len`` + ``output_len`` tokens, on a ``rows`` × ``cols`` grid.

    Activations: one hidden vector per request in flight plus the prompt's activations during prefill
    (``prompt_len`` × hidden per request, spread over the grid) — the larger of decode and prefill.
    """
    pes = rows * cols
    per_token = kv_bytes_per_token(model) * layers * batch  # one token of every request, every layer here
    weights = weight_bytes / pes
    activations = activation_bytes(model, batch, prompt_len, rows, cols)
    free = usable - weights - activations
    kv = kv_cache_bytes(per_token, prompt_len, output_len, rows, cols, layout)
    if layout == "shift":
        room = free * pes / per_token - prompt_len if per_token else float("inf")
    else:  # concat: the last row of PEs holds its share of the prompt and every decoded token
        room = free * cols / per_token - prompt_len / rows if per_token else float("inf")
    max_output = int(max(0.0, min(room, 2**31 - 1)))
    return StageMemory(weights, kv, activations, usable, max_output)
