#!/usr/bin/env python3
"""BTA paper, Fig. 3: throughput vs top_k at 128 experts, G=1 and tuned G.

    python scripts/fig3_topk.py [--out out/fig3] [--workers 2]
"""

from __future__ import annotations

import argparse

from _paper import run_figure

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="out/fig3")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    for path in run_figure("fig3-top-k", lambda p: p["model.experts"] == 128, args.out, args.workers):
        print(f"wrote {path}")
