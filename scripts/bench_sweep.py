#!/usr/bin/env python3
"""Benchmark: the whole bta-paper sweep (16 points, 8 of them tuned) with N local workers.

    python scripts/bench_sweep.py [--workers 2]
"""

from __future__ import annotations

import argparse
import time

from wsesim.config.loader import shipped_file
from wsesim.experiments.sweep import load_sweep, run_sweep

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    sweep = load_sweep(shipped_file("qwen3-30b-a3b/bta-paper.yaml"))
    start = time.perf_counter()
    rows = run_sweep(sweep, workers=args.workers)
    wall = time.perf_counter() - start
    sims = sum(1 if r.get("tuned") is False else 0 for r in rows)
    print(f"bta-paper: {len(rows)} points ({sum(1 for r in rows if r.get('tuned'))} tuned) with {args.workers} "
          f"workers in {wall:.1f} s; {wall * args.workers / len(rows):.2f} worker-s per point")
    for r in rows:
        if r["status"] != "ok":
            print(f"  point {r['point']}: {r['status']}: {r['reason']}")
    print(f"  single runs averaged {sum(float(r['wall_s']) for r in rows if not r.get('tuned')) / max(sims, 1):.2f} s each")
