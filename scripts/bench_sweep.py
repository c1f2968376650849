#!/usr/bin/env python3
"""Benchmark: the whole bta-paper sweep (16 points, 8 of them tuned) as a command, with 1 and N workers.

    python scripts/bench_sweep.py [--workers 2] [--repeat 2]

Each figure is ``wsesim sweep`` in a fresh interpreter (imports, loading, workers, every point, the CSV),
the best of ``--repeat``. To tell the sweep's own scaling from the machine's, it also runs two 1-worker
sweeps at the same time: on a machine whose cores share caches and memory bandwidth (a 2-vCPU cloud VM,
say) each then runs slower than alone, and no number of workers can beat that ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wsesim.config.loader import shipped_file

SWEEP = str(shipped_file("qwen3-30b-a3b/bta-paper.yaml"))


def _sweep(workers: int, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "wsesim", "sweep", SWEEP, "--out", str(out), "--workers", str(workers)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def command_seconds(workers: int, repeat: int) -> float:
    best = float("inf")
    for i in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            if _sweep(workers, Path(tmp) / f"run{i}").wait() != 0:
                raise SystemExit(f"wsesim sweep --workers {workers} failed")
            best = min(best, time.perf_counter() - start)
    return best


def concurrent_seconds() -> float:
    """Wall time of two 1-worker sweeps started together (each alone takes ``command_seconds(1)``)."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        procs = [_sweep(1, Path(tmp) / name) for name in ("a", "b")]
        if any(p.wait() != 0 for p in procs):
            raise SystemExit("wsesim sweep failed")
        return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2, help="runs per figure (the best is reported)")
    args = ap.parse_args()
    one = command_seconds(1, args.repeat)
    many = command_seconds(args.workers, args.repeat)
    both = concurrent_seconds()
    print(f"{os.cpu_count()} cores; bta-paper sweep (16 points, 8 tuned) as a command:")
    print(f"  1 worker:  {one:.2f} s")
    print(f"  {args.workers} workers: {many:.2f} s  ({one / many:.2f}x)")
    print(f"  two 1-worker sweeps at once: {both:.2f} s for both, {one / both * 2:.2f}x the throughput of one "
          "(the most any number of workers could gain on this machine)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
