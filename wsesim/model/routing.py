"""Routing and expert load (docs/model.md §3, §5): how many routed slots each expert gets per layer,
and how much more a region holds per PE than the wafer-wide mean. Pure numpy; randomness comes from
the ``numpy.random.Generator`` the caller passes (seeded by ``training.seed``).
"""

from __future__ import annotations

import numpy as np

from ..config.specs import ModelSpec, TrainingSpec


def route_tokens(model: ModelSpec, training: TrainingSpec, tokens: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Routed slots per expert per layer (``[layers, experts]`` ints; each row sums to ``tokens · top_k``).

    ``uniform``: a multinomial around the balanced mean. ``zipf:alpha``: expert popularity ∝ rank^-alpha,
    ranks permuted per layer. Top-k routing picks k *distinct* experts per token, so no expert gets more
    than ``tokens`` slots: popularity is capped at 1/k (the excess spread over the others), and slots a
    draw puts above the cap are drawn again among the experts with room. With top_k = experts every
    expert gets every token. A dense layer (``model.is_dense``) routes nothing: its row is zeros.
    """
    E, L, k = model.experts, model.layers, model.top_k
    out = np.zeros((L, E), dtype=np.int64)
    if E == 0:
        return out
    for layer in range(model.dense_layer_count, L):
        out[layer] = _draw(rng, tokens, k, popularity(E, k, training.zipf_alpha, rng))
    return out


def popularity(experts: int, top_k: int, alpha: float | None, rng: np.random.Generator) -> np.ndarray:
    """One layer's expert popularity (``[experts]``, summing to 1): equal shares (``uniform``, alpha
    None), or rank^-alpha with the ranks permuted (``zipf:alpha``, one permutation drawn from ``rng``);
    capped at 1/top_k, since top-k routing picks k distinct experts."""
    if alpha is None:
        return _capped(np.full(experts, 1.0 / experts), top_k)
    with np.errstate(over="ignore"):  # rank^alpha past a double's range: that expert's weight is 0
        return _capped(rng.permutation(1.0 / np.arange(1, experts + 1) ** alpha), top_k)


SAMPLE_BLOCK = 1 << 20
"""``sample_layer`` draws at most this many (token, expert) keys at once (8 MiB of scratch)."""


def sample_layer(experts: int, top_k: int, alpha: float | None, tokens: int,
                 rng: np.random.Generator) -> np.ndarray:
    """One MoE layer's draw for ``tokens`` tokens (``[tokens, top_k]`` ints): one ``popularity`` p
    (uniform, or Zipf with its ranks permuted), then each token's k distinct experts drawn without
    replacement with weights p (the Gumbel top-k draw: the k largest of log p_e + Gumbel noise, which
    is drawing one expert at a time by p among those not yet drawn). With uniform p each expert is
    among a token's k with probability k/E."""
    with np.errstate(divide="ignore"):  # an underflowed weight: log 0 = −inf, never drawn
        log_p = np.log(popularity(experts, top_k, alpha, rng))
    return draw_with(log_p, top_k, tokens, rng)


def draw_with(log_p: np.ndarray, top_k: int, tokens: int, rng: np.random.Generator) -> np.ndarray:
    """``tokens`` tokens' k distinct experts (``[tokens, top_k]``) under one layer's log popularity
    ``log_p``, by the Gumbel top-k draw of ``sample_layer``."""
    experts = len(log_p)
    out = np.empty((tokens, top_k), dtype=np.int64)
    rows = max(1, SAMPLE_BLOCK // experts)
    for start in range(0, tokens, rows):
        keys = log_p + rng.gumbel(size=(min(rows, tokens - start), experts))
        out[start:start + len(keys)] = np.argpartition(-keys, top_k - 1, axis=1)[:, :top_k]
    return out


def _capped(p: np.ndarray, k: int) -> np.ndarray:
    """``p`` normalised with no share above 1/k, the excess given to the others in proportion."""
    p = p / p.sum()
    cap = 1.0 / k
    while (over := p > cap * (1 + 1e-12)).any():
        free = ~over & (p < cap)
        excess = float((p[over] - cap).sum())
        p = np.where(over, cap, p)
        room = p[free].sum()  # 0 when a steep Zipf's tail underflowed: then the excess is shared evenly
        p[free] += excess * p[free] / room if room > 0 else excess / np.count_nonzero(free)
    return p


def _draw(rng: np.random.Generator, tokens: int, k: int, p: np.ndarray) -> np.ndarray:
    """``tokens · k`` slots over the experts by ``p``, at most ``tokens`` per expert."""
    counts = rng.multinomial(tokens * k, p)
    while (excess := int(np.maximum(counts - tokens, 0).sum())) > 0:
        counts = np.minimum(counts, tokens)
        room = np.where(counts < tokens, p, 0.0)
        counts += rng.multinomial(excess, room / room.sum())
    return counts


def region_load(tokens: np.ndarray, region_of_expert: np.ndarray, region_pes: np.ndarray,
                pes: int) -> np.ndarray:
    """Each region's tokens per PE over the wafer-wide mean, in its busiest layer (``[regions]``).

    ``tokens[layer, e]`` are routed slots, ``region_of_expert[e]`` expert e's region, ``region_pes[r]``
    region r's PEs, ``pes`` the wafer's. A hot expert, experts sharing a region, or a small region all
    hold more per PE; the memory model sizes the expert working set by it.
    """
    index = np.asarray(region_of_expert)
    region_pes = np.asarray(region_pes, dtype=float)
    per_region = np.zeros((tokens.shape[0], len(region_pes)))
    for r in range(len(region_pes)):
        per_region[:, r] = tokens[:, index == r].sum(axis=1)
    mean = tokens.sum(axis=1, keepdims=True) / pes
    return (per_region / region_pes / np.where(mean > 0, mean, 1.0)).max(axis=0)


def expert_load(tokens: np.ndarray, region_of_expert: np.ndarray, region_pes: np.ndarray, pes: int) -> float:
    """The busiest region's ``region_load`` (≥ 1: the memory model never sizes below the mean)."""
    return max(1.0, float(region_load(tokens, region_of_expert, region_pes, pes).max()))


def busiest_column_copies(tokens: np.ndarray, columns: int, rng: np.random.Generator) -> np.ndarray:
    """For the ``in_place`` mapping: per layer and expert, the most copies of that expert any one PE
    column holds (``[layers, experts]`` ints).

    In place, each token's k copies stay where the token is: the step's tokens are spread evenly over
    the wafer's ``columns`` (each PE of a column holds a slice of the hidden state of that column's
    tokens), and the experts of a column's copies are whatever the routing chose. Expert e's
    ``tokens[layer, e]`` copies are therefore spread over the columns at random (a multinomial with
    equal shares), and the column with the most of them sets how long e's weights take to pass.
    """
    L, E = tokens.shape
    out = np.empty((L, E), dtype=np.int64)
    share = np.full(columns, 1.0 / columns)
    for layer in range(L):
        out[layer] = rng.multinomial(tokens[layer], share).max(axis=1)
    return out
