"""Speculative decoding's arithmetic (docs/model.md §11.9): how many tokens a verify pass yields, and the
rounds a request's output takes.

A draft proposes K tokens; the target checks the K + 1 positions in one pass and keeps the drafted tokens
up to the first it rejects, plus one token of its own (the correction, or a bonus when all K pass). With
each drafted token accepted independently with probability α, the tokens a pass yields are i + 1 with
probability α^i·(1 − α) for i < K and α^K for i = K, whose mean is (Leviathan, Kalman and Matias 2023,
"Fast inference from transformers via speculative decoding", eq. 1)

    E = Σ_{i=0}^{K} α^i = (1 − α^(K+1)) / (1 − α)        (E = K + 1 at α = 1).

wsesim takes the expectation, not a sample: after j rounds a request has ⌊j·E⌋ tokens beyond its first
(capped at the output), so a run is deterministic with no draw, and its rounds are ⌈(output − 1) / E⌉.
"""

from __future__ import annotations

from math import ceil, floor

__all__ = ["accepted", "expected_tokens", "outputs", "round_contexts"]


def expected_tokens(k: int, alpha: float) -> float:
    """Tokens one verify pass yields on average: (1 − α^(K+1)) / (1 − α), K + 1 at α = 1."""
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def round_contexts(prompt_len: int, output_len: int, k: int, alpha: float) -> tuple[int, ...]:
    """The context each round starts from (the tokens cached before it: the prompt, the first token and
    those accepted so far): prompt + 1 + ⌊(j − 1)·E⌋ for rounds j = 1 … ⌈(output − 1) / E⌉. The executors
    reach the same contexts pass by pass through ``accepted``; this closed form is what the tests hold
    them to, and what a reader can compute by hand."""
    e = expected_tokens(k, alpha)
    rounds = ceil((output_len - 1) / e)
    return tuple(prompt_len + 1 + min(floor((j - 1) * e), output_len - 1) for j in range(1, rounds + 1))


def accepted(rounds: int, output_len: int, e: float) -> int:
    """Tokens a request has beyond its first after ``rounds`` verify passes: ⌊rounds·E⌋, capped at
    output − 1 (E = 1 without a draft: one a pass, a plain decode step)."""
    return min(output_len - 1, floor(rounds * e))


def outputs(output_len: int, e: float) -> int:
    """The request's outputs as the scheduler counts them: its first token, then one per verify pass
    until it has all its tokens (``output_len`` at E = 1)."""
    rounds = ceil((output_len - 1) / e)
    while rounds and accepted(rounds - 1, output_len, e) >= output_len - 1:
        rounds -= 1
    while accepted(rounds, output_len, e) < output_len - 1:
        rounds += 1
    return 1 + rounds
