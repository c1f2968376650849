#!/usr/bin/env python3
"""The BTA paper's eight points under the conditions the paper leaves unstated: how G=1 against tuned G
moves with sequence length, depth, activation policy and MoE mapping (one at a time from the shipped
experiment, and the mapping with each). Prints one markdown table (the one
in the README) of tuned / G=1 throughput per point, and the tuned curve's spread over 8–128 experts.

    python scripts/bta_conditions.py [--quick] [--out FILE.md]
    python scripts/bta_conditions.py --top-k [--compute kernel] [--out FILE.md]

Every cell is a real run of the shipped experiment with the condition's overrides (``wsesim tune`` for
the tuned G); nothing is fitted. ``--quick`` runs two conditions only (a smoke run).

``--top-k`` runs the two top_k tests already tried against the paper's Fig. 3 (128 experts, top_k 8 → 1;
README "Where both miss", docs/model.md §3.5), so that no one runs them again unknowingly: the shipped
expert size, and the active parameters held constant (expert size × 8/k as top_k falls); each with the
throughput read as tokens/s and as model FLOP/s. The answers are in the README. ``--compute kernel``
runs either table under ``simulation.compute: kernel`` (the weight-streaming GEMMs, docs/model.md §4.1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wsesim.config.loader import load_experiment
from wsesim.experiments.runner import run_experiment
from wsesim.experiments.tune import tune

POINTS = [(8, 8), (16, 8), (32, 8), (64, 8), (128, 8), (128, 4), (128, 2), (128, 1)]
BASELINE = (4096, 48, "recompute", "regions")  # the shipped experiment
CONDITIONS = [  # one assumption changed at a time, then the mapping with each
    BASELINE,
    (2048, 48, "recompute", "regions"),
    (1024, 48, "recompute", "regions"),
    (4096, 16, "recompute", "regions"),  # a shallower Qwen3-like model (16 of its 48 layers)
    (1024, 16, "recompute", "regions"),
    (4096, 48, "store", "regions"),
    (1024, 48, "store", "regions"),
    (4096, 48, "recompute", "in_place"),
    (1024, 48, "recompute", "in_place"),
    (4096, 16, "recompute", "in_place"),
]


def cell(overrides: dict) -> tuple[float, float]:
    """(G=1, tuned) tokens/s; 0 where nothing fits."""
    loaded = load_experiment(overrides=overrides)
    g1 = run_experiment(loaded.spec)
    best = tune(loaded).best
    return (g1.throughput_tokens_per_s if g1.feasible else 0.0,
            best.throughput_tokens_per_s if best.feasible else 0.0)


def row(seq_len: int, layers: int, activations: str, mapping: str, extra: dict) -> str:
    base = {**extra, "training.seq_len": seq_len, "model.layers": layers, "training.activations": activations,
            "simulation.moe_mapping": mapping}
    runs = [cell({**base, "model.experts": e, "model.top_k": k}) for e, k in POINTS]
    speedups = [f"{t / g:.2f}×" if g and t else "—" for g, t in runs]
    tuned = [t for (g, t), (e, k) in zip(runs, POINTS, strict=True) if k == 8 and t]
    spread = "—"
    if len(tuned) == 5:
        mean = sum(tuned) / len(tuned)
        spread = f"±{100 * max(abs(t - mean) for t in tuned) / mean:.0f} %"
    return f"| {seq_len} | {layers} | {activations} | {mapping} | " + " | ".join(speedups) + f" | {spread} |"


TOPK = (8, 4, 2, 1)
EXPERT_INTERMEDIATE = 768  # Qwen3-30B-A3B's moe_intermediate_size


def topk_run(overrides: dict) -> tuple[float, float, float, float]:
    """(G=1, tuned) throughput at one point: tokens/s, then model TFLOP/s (0 where nothing fits)."""
    loaded = load_experiment(overrides=overrides)
    runs = (run_experiment(loaded.spec), tune(loaded).best)
    tokens = [r.throughput_tokens_per_s if r.feasible else 0.0 for r in runs]
    flops = [r.model_flops_per_step / r.step_time_s / 1e12 if r.feasible else 0.0 for r in runs]
    return tokens[0], tokens[1], flops[0], flops[1]


def topk_table(extra: dict) -> list[str]:
    """At 128 experts, per top_k: G=1 and tuned throughput in tokens/s and model TFLOP/s, and their ratio
    (the same in both units: one model, one token count), for the two expert sizes."""
    lines = ["| expert size | intermediate | top_k | G=1 tokens/s | tuned tokens/s | speedup | G=1 TFLOP/s | tuned TFLOP/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, constant_active in (("shipped", False), ("× 8/k (active constant)", True)):
        for k in TOPK:
            size = EXPERT_INTERMEDIATE * 8 // k if constant_active else EXPERT_INTERMEDIATE
            g1, tuned, f1, ft = topk_run({**extra, "model.experts": 128, "model.top_k": k,
                                          "model.expert_intermediate": size})
            speedup = f"{tuned / g1:.2f}×" if g1 and tuned else "—"
            lines.append(f"| {label} | {size} | {k} | {g1:,.0f} | {tuned:,.0f} | {speedup} | {f1:.0f} | {ft:.0f} |")
            sys.stderr.write(lines[-1] + "\n")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="two conditions only")
    ap.add_argument("--top-k", action="store_true",
                    help="the top_k tests instead: shipped and constant-active expert sizes, tokens/s and FLOP/s")
    ap.add_argument("--compute", choices=("constant", "kernel"), default="constant",
                    help="the compute model (simulation.compute; default constant)")
    ap.add_argument("--out", metavar="FILE.md", help="also write the table to FILE.md")
    args = ap.parse_args(argv)
    extra = {"simulation.compute": args.compute}
    if args.top_k:
        text = "\n".join(topk_table(extra)) + "\n"
        print(text, end="")
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
        return 0
    head = ("| seq_len | layers | activations | mapping | " + " | ".join(f"E={e} k={k}" for e, k in POINTS)
            + " | tuned spread (k=8) |")
    lines = [head, "|" + "---:|" * 3 + "---|" + "---:|" * (len(POINTS) + 1)]
    conditions = CONDITIONS
    if args.quick:
        conditions = [(1024, 16, "recompute", "regions"), (1024, 16, "recompute", "in_place")]
    for condition in conditions:
        lines.append(row(*condition, extra))
        sys.stderr.write(lines[-1] + "\n")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
