#!/usr/bin/env python3
"""Benchmark: serving simulations — one LLaMA3-8B decode step on WSE-2 (a fresh process: imports, the
mapping, every kernel simulated once) and a 20-point batch sweep, each as a whole command, the median of
several runs.

    python scripts/bench_serving.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

DECODE_STEP = ["infer", "--model", "llama3-8b", "--hardware", "wse2", "--set", "inference.grid=420x420",
               "--set", "inference.prompt_len=4096", "--set", "inference.output_len=2", "--json"]
BATCH_SWEEP = ["infer", "--model", "llama3-8b", "--hardware", "wse2", "--set", "inference.grid=375x375",
               "--vary", "inference.batch=" + ",".join(str(b) for b in range(1, 21)), "--json"]


def timed(args: list[str], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "wsesim", *args], check=True, capture_output=True,
                       cwd=tempfile.gettempdir())
        out.append(time.perf_counter() - start)
    return out


def in_process(repeat: int) -> list[float]:
    """The simulation alone (mapping, kernels, pipeline), each time with the kernel cache cleared."""
    from wsesim.config.inference import load_inference
    from wsesim.experiments.inference import run_inference
    from wsesim.kernels.cost import kernel_cost
    from wsesim.kernels.lines import rotating_reduces

    spec = load_inference(model="llama3-8b", hardware="wse2", overrides={
        "inference.grid": "420x420", "inference.prompt_len": 4096, "inference.output_len": 2}).spec
    out = []
    for _ in range(repeat):
        kernel_cost.cache_clear()
        rotating_reduces.cache_clear()
        start = time.perf_counter()
        run_inference(spec)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command (default 3)")
    args = ap.parse_args()
    sim = in_process(args.repeat)
    print(f"one decode step, LLaMA3-8B on WSE-2 (420x420 stages): median {statistics.median(sim):.2f} s "
          f"(min {min(sim):.2f}) simulated in process, cold kernel cache")
    for name, command in (("one decode step, LLaMA3-8B on WSE-2 (420x420 stages)", DECODE_STEP),
                          ("20-point batch sweep, LLaMA3-8B on WSE-2 (375x375 stages)", BATCH_SWEEP)):
        times = timed(command, args.repeat)
        print(f"{name}: median {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}) "
              f"as a command")


if __name__ == "__main__":
    main()
