#!/usr/bin/env python3
"""Efficiency of the weight-streaming GEMM against shape (docs/model.md §10.7): the share of the grid's
peak that one forward GEMM reaches, staged (as the training step runs it), for model widths from 768 to
8,192, GQA projections, and an expert on a small region, at the token counts a training step gives them.
Prints a markdown table; with ``--png FILE`` also draws efficiency against tokens per PE row, one line per
shape.

    python scripts/stream_shapes.py [--hardware wse2] [--png docs/stream_efficiency.png]

Every value is the kernel layer's simulation (``wsesim kernel gemm --algorithm stream``); nothing is
fitted.
"""

from __future__ import annotations

import argparse

from wsesim.config.loader import load_hardware
from wsesim.kernels import run_kernel

# (label, grid or None for the whole wafer, K, N): one forward GEMM of each
SHAPES = [
    ("768-wide, qkv (768 → 2,304)", None, 768, 2304),
    ("2,048-wide, qkv (2,048 → 6,144)", None, 2048, 6144),
    ("4,096-wide, gate+up (4,096 → 22,016)", None, 4096, 22016),
    ("4,096 GQA k,v (4,096 → 2 × 1,024)", None, 4096, 2048),
    ("8,192-wide, o (8,192 → 8,192)", None, 8192, 8192),
    ("expert 768 on 75 × 78 (2,048 → 1,536)", (75, 78), 2048, 1536),
]
TOKENS = (2048, 4096, 8192, 18432, 36864, 73728, 202752)  # a tile of 1 sequence … LLaMA-7B's batch 99


def table(hw_name: str) -> tuple[list[str], dict[str, list[tuple[float, float]]]]:
    hw = load_hardware(hw_name)
    lines = ["| shape | grid | " + " | ".join(f"{t:,} tokens" for t in TOKENS) + " |",
             "|---|---|" + "---:|" * len(TOKENS)]
    curves: dict[str, list[tuple[float, float]]] = {}
    for label, grid, k, n in SHAPES:
        rows, cols = grid or (hw.mesh.rows, hw.mesh.cols)
        cells, curve = [], []
        for t in TOKENS:
            r = run_kernel(hw, "gemm", rows, cols, dtype="fp16", algorithm="stream", shape=(t, k, n), staged=True)
            cells.append(f"{100 * r.efficiency:.0f} %" if r.feasible else "does not fit")
            if r.feasible:
                curve.append((t / rows, 100 * r.efficiency))
        curves[label] = curve
        lines.append(f"| {label} | {rows} × {cols} | " + " | ".join(cells) + " |")
    return lines, curves


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hardware", default="wse2", help="a hardware preset or file (default wse2)")
    ap.add_argument("--png", metavar="FILE", help="also draw the figure to FILE")
    args = ap.parse_args(argv)
    lines, curves = table(args.hardware)
    print("\n".join(lines))
    if args.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.2))
        for label, curve in curves.items():
            ax.plot(*zip(*curve, strict=True), marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("tokens per PE row (M / rows)")
        ax.set_ylabel("% of the grid's fp16 peak")
        ax.set_title(f"Weight-streaming GEMM, forward, staged ({args.hardware})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.png, dpi=120, metadata={"Software": None})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
