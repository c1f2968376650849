#!/usr/bin/env python3
"""BTA paper, Fig. 2: throughput vs number of experts at top_k 8, G=1 and tuned G.

    python scripts/fig2_experts.py [--out out/fig2] [--workers 2]
"""

from __future__ import annotations

import argparse

from _paper import run_figure

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="out/fig2")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    for path in run_figure("fig2-experts", lambda p: p["model.top_k"] == 8, args.out, args.workers):
        print(f"wrote {path}")
