#!/usr/bin/env python3
"""The highest Poisson rate a serving setup holds within latency targets, and its tokens/s per system there
(issue 37's validation question): LLaMA3-8B on one CS-3 and LLaMA-3.1-70B on four, each without and with a
LLaMA 3.2 1B draft (K = 4, α = 0.8) on a wafer of its own, 1,024-token prompts and 128 tokens out, up to 64
in flight. A rate holds when TTFT p99 ≤ 1 s and TPOT p99 ≤ 50 ms over the requests after the warm-up and
the run does not say the offered load exceeds its capacity; the rate is bisected between one that holds and
one that does not.

    python scripts/slo_capacity.py [--requests N] [--steps N]
"""

from __future__ import annotations

import argparse
from typing import Any

TTFT_S, TPOT_S = 1.0, 0.05
DRAFT = {"inference.speculative.draft": "llama3.2-1b", "inference.speculative.tokens": 4,
         "inference.speculative.acceptance": 0.8}
SETUPS = {"LLaMA3-8B, 1 CS-3": ("llama3-8b", {}), "LLaMA3-8B, 1 CS-3 + draft": ("llama3-8b", DRAFT),
          "LLaMA-3.1-70B, 4 CS-3s": ("llama3.1-70b", {}),
          "LLaMA-3.1-70B, 4 CS-3s + draft": ("llama3.1-70b", DRAFT)}


def serve(model: str, extra: dict[str, Any], rate: float, requests: int) -> Any:
    from wsesim.config.inference import load_inference
    from wsesim.experiments.runner import run_inference

    spec = load_inference(model=model, hardware="wse3", overrides={
        "inference.load.prompt_len": 1024, "inference.load.output_len": 128, "inference.load.arrival": "poisson",
        "inference.load.rate": rate, "inference.load.requests": requests, "inference.load.warmup": requests // 10,
        "inference.scheduler.batch": 64, "inference.interconnect": "swarmx", **extra}).spec
    return run_inference(spec).result


def holds(r: Any) -> bool:
    return (r.feasible and r.ttft_p99_s <= TTFT_S and r.tpot_p99_s <= TPOT_S
            and not any("exceeds the measured capacity" in w for w in r.warnings))


def best_rate(model: str, extra: dict[str, Any], requests: int, steps: int) -> tuple[float, Any]:
    """(the highest rate found to hold, its result); (0, None) when even 0.25/s does not."""
    low, high, kept = 0.0, 0.25, None
    while True:  # double until a rate fails
        r = serve(model, extra, high, requests)
        if not holds(r):
            break
        low, kept, high = high, r, high * 2
    for _ in range(steps):
        mid = (low + high) / 2
        r = serve(model, extra, mid, requests)
        if holds(r):
            low, kept = mid, r
        else:
            high = mid
    return low, kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=600, help="requests a run (default 600, a tenth warm-up)")
    ap.add_argument("--steps", type=int, default=3, help="bisection steps after the doubling (default 3)")
    args = ap.parse_args()
    print("| setup | rate held (requests/s) | tokens/s per system | per user | TTFT p99 | TPOT p99 | J/token |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (model, extra) in SETUPS.items():
        rate, r = best_rate(model, extra, args.requests, args.steps)
        if r is None:
            print(f"| {name} | none ≥ 0.25 | | | | | |")
            continue
        print(f"| {name} | {rate:.2f} | {r.tokens_per_s_per_system:,.0f} | {r.tokens_per_s_per_request:,.0f} | "
              f"{r.ttft_p99_s:.2f} s | {r.tpot_p99_s * 1e3:.1f} ms | {r.joules_per_token:,.1f} |")


if __name__ == "__main__":
    main()
