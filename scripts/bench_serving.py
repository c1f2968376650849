#!/usr/bin/env python3
"""Benchmark: serving simulations — one LLaMA3-8B decode step on WSE-2 (a fresh process: imports, the
mapping, every kernel simulated once), a 20-point batch sweep, each as a whole command, and 10,000
Poisson requests (prompt 1,024, output 128) on LLaMA3-8B on one CS-3 under continuous batching (its
time in a fresh process, kernels cold, and its peak memory), the median of several runs.

Issue 37's speed cases are the 70B with a draft (10,000 Poisson requests) and a 1,000,000-request
trace of LLaMA3-8B on one CS-3, its CSV written to a temporary folder first (``--trace-requests`` runs
a shorter one; ``--cases`` picks the cases). ``moe`` and ``moe-sampled``: 1,000 Poisson requests of
Qwen3-30B-A3B, its expert dispatch through the fabric model, balanced and Zipf-sampled routing.

    python scripts/bench_serving.py [--repeat N] [--cases decode,sweep,load,load70,trace,moe,moe-sampled]
                                    [--trace-requests N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

DECODE_STEP = ["infer", "--model", "llama3-8b", "--hardware", "wse2", "--set", "inference.grid=420x420",
               "--set", "inference.load.prompt_len=4096", "--set", "inference.load.output_len=2", "--json"]
BATCH_SWEEP = ["infer", "--model", "llama3-8b", "--hardware", "wse2", "--set", "inference.grid=375x375",
               "--vary", "inference.scheduler.batch=" + ",".join(str(b) for b in range(1, 21)), "--json"]


LOAD = ("import resource, time\n"
        "start = time.perf_counter()\n"
        "from wsesim.config.inference import load_inference\n"
        "from wsesim.experiments.runner import run_inference\n"
        "spec = load_inference(model='llama3-8b', hardware='wse3', overrides={'inference.load.prompt_len': 1024, "
        "'inference.load.output_len': 128, 'inference.load.arrival': 'poisson', 'inference.load.rate': 4.0, "
        "'inference.load.requests': 10000, 'inference.scheduler.batch': 64}).spec\n"
        "r = run_inference(spec).result\n"
        "print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "
        "r.events, r.tokens_per_s, r.ttft_p99_s)\n")
"""10,000 requests at 4 per second, up to 64 in flight: imports, mapping (``grid: auto`` by a full batch's
decode step: the CS-3 as one 755 x 1,170 stage), kernels and the run, in a fresh process."""
LOAD_70B = LOAD.replace("model='llama3-8b'", "model='llama3.1-70b'").replace(
    "'inference.load.rate': 4.0", "'inference.load.rate': 2.0").replace(
    "'inference.scheduler.batch': 64}", "'inference.scheduler.batch': 64, 'inference.speculative.draft': 'llama3.2-1b', "
    "'inference.speculative.tokens': 4, 'inference.speculative.acceptance': 0.8}")
"""Issue 37's speed case: LLaMA-3.1-70B on CS-3s (``grid: auto``, mapped for 64 requests in flight) with
LLaMA 3.2 1B drafting on a wafer of its own, 10,000 Poisson requests at 2 per second under continuous
batching."""

MOE = LOAD.replace("model='llama3-8b'", "model='qwen3-30b-a3b'").replace(
    "'inference.load.requests': 10000", "'inference.load.requests': 1000")
"""1,000 Poisson requests of Qwen3-30B-A3B (128 experts, top-8) on CS-3s at 4 per second, up to 64 at once:
every MoE layer's dispatch and combine through the fabric model (docs/model.md §11.8), balanced routing."""
MOE_SAMPLED = MOE.replace("'inference.scheduler.batch': 64}", "'inference.scheduler.batch': 64, 'inference.moe.routing': 'zipf:1.2'}")
"""The same with sampled routing (Zipf α 1.2): each iteration's drawn experts through the fabric model."""

TRACE = LOAD.replace("'inference.load.arrival': 'poisson', 'inference.load.rate': 4.0, 'inference.load.requests': 10000, ",
                     "'inference.load.arrival': 'trace', 'inference.load.file': TRACE, ")
"""A trace (``TRACE``: its CSV's path) of LLaMA3-8B on one CS-3, up to 64 requests at once."""


def write_trace(path: str, requests: int, rate: float = 4.0, seed: int = 37) -> None:
    """A trace CSV of ``requests`` requests: Poisson arrivals at ``rate`` per second, prompt and output
    lengths lognormal (σ 0.5) about medians of 1,024 and 128 tokens, as the 10,000-request case's."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(1 / rate, requests))
    prompt = np.clip(np.rint(rng.lognormal(np.log(1024), 0.5, requests)), 1, 8192).astype(int)
    output = np.clip(np.rint(rng.lognormal(np.log(128), 0.5, requests)), 1, 1024).astype(int)
    with open(path, "w") as f:
        f.write("arrival_s,prompt_len,output_len\n")
        f.writelines(f"{a:.6f},{p},{o}\n" for a, p, o in zip(t.tolist(), prompt.tolist(), output.tolist(),
                                                             strict=True))


def load_run(repeat: int, code: str = LOAD) -> list[tuple[float, float]]:
    """(seconds, peak bytes) of a 10,000-request run (``code``), each in a fresh process."""
    out = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=tempfile.gettempdir())
        if done.returncode:  # e.g. the work estimate refusing a run this machine cannot hold: its one line
            sys.exit(f"the run failed: {(done.stderr.strip().splitlines() or ['no message'])[-1]}")
        seconds, peak, *_ = done.stdout.split()
        out.append((float(seconds), float(peak)))
    return out


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
    from wsesim.experiments.runner import run_inference
    from wsesim.kernels.cost import kernel_cost
    from wsesim.kernels.lines import rotating_reduces

    spec = load_inference(model="llama3-8b", hardware="wse2", overrides={
        "inference.grid": "420x420", "inference.load.prompt_len": 4096, "inference.load.output_len": 2}).spec
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
    ap.add_argument("--cases", default="decode,sweep,load,load70,trace,moe",
                    help="comma-separated: decode, sweep, load, load70, trace, moe, moe-sampled (default all "
                         "but moe-sampled)")
    ap.add_argument("--trace-requests", type=int, default=1_000_000,
                    help="requests in the trace case (default 1,000,000)")
    args = ap.parse_args()
    cases = set(args.cases.split(","))
    if "decode" in cases:
        sim = in_process(args.repeat)
        print(f"one decode step, LLaMA3-8B on WSE-2 (420x420 stages): median {statistics.median(sim):.2f} s "
              f"(min {min(sim):.2f}) simulated in process, cold kernel cache")
    for case, name, command in (
            ("decode", "one decode step, LLaMA3-8B on WSE-2 (420x420 stages)", DECODE_STEP),
            ("sweep", "20-point batch sweep, LLaMA3-8B on WSE-2 (375x375 stages)", BATCH_SWEEP)):
        if case in cases:
            times = timed(command, args.repeat)
            print(f"{name}: median {statistics.median(times):.2f} s (min {min(times):.2f}, max "
                  f"{max(times):.2f}) as a command")
    for case, name, code in (("load", "LLaMA3-8B on one CS-3, 4/s", LOAD),
                             ("load70", "LLaMA-3.1-70B on four CS-3s with a draft on a fifth, 2/s", LOAD_70B)):
        if case in cases:
            report(f"10,000 Poisson requests (1,024 + 128 tokens, up to 64 at once), {name}",
                   load_run(args.repeat, code))
    for case, name, code in (("moe", "balanced routing", MOE), ("moe-sampled", "zipf:1.2 routing", MOE_SAMPLED)):
        if case in cases:
            report(f"1,000 Poisson requests (1,024 + 128 tokens, up to 64 at once), Qwen3-30B-A3B on CS-3s, "
                   f"4/s, {name}", load_run(args.repeat, code))
    if "trace" in cases:
        with tempfile.TemporaryDirectory() as folder:
            path = f"{folder}/trace.csv"
            write_trace(path, args.trace_requests)
            report(f"a {args.trace_requests:,}-request trace (Poisson 4/s, lognormal lengths about 1,024 + "
                   f"128 tokens, up to 64 at once), LLaMA3-8B on one CS-3",
                   load_run(args.repeat, TRACE.replace("TRACE", repr(path))))


def report(name: str, runs: list[tuple[float, float]]) -> None:
    seconds = [s for s, _ in runs]
    print(f"{name}: median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}), peak memory "
          f"{max(p for _, p in runs) / 2**20:,.0f} MiB, in a fresh process")


if __name__ == "__main__":
    main()
