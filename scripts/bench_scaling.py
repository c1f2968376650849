#!/usr/bin/env python3
"""Benchmark: how wsesim's cost grows with the number of experts, as a user meets it.

For each case, ``wsesim run`` as a command (a fresh interpreter: imports, planning and simulation; the
best wall time of ``--repeat`` runs and the largest peak resident memory of them), and the same step
in-process split into its stages (imports once, then sizing, planning — mesh, placement, the dispatch
model, expert costs —, the chunk plan, and the simulation). Bare SimPy's event rate is measured in the
same run, and the machine's core count printed, so figures from different machines can be compared.
Commands run with Python's bytecode cache, as an installed wsesim has it (an environment with
``PYTHONDONTWRITEBYTECODE`` set recompiles every module at each start: ~0.1 s more per command).

    python scripts/bench_scaling.py [--repeat N] [--quick] [--paired N]

``--paired N`` times the paper point as a command N times, each run right after bare SimPy's rate is
measured, and prints the medians of both and of the run's time at the rate the README's figures were
measured at (each run scaled by its own rate: on a shared machine whose speed drifts by tens of percent,
a time alone says little).

Cases: the BTA paper point (Qwen3-30B-A3B on WSE-2, G=19 B=1, 128 experts, top_k 1), the same shape with
256 and 512 experts, Qwen3-235B-A22B, and DeepSeek-V3's MoE layers (256 experts + 1 shared, flash
attention). ``--quick`` runs the paper point only, once.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from bench_engine import bare_simpy_events_per_s  # (scripts/ is on the path when run as a script)

PAPER = ["--set", "training.tiles=19", "--set", "training.batch_per_tile=1", "--set", "model.top_k=1"]
CASES = {
    "paper point (E=128, k=1, G=19)": [*PAPER],
    "Qwen3 shape, E=256": [*PAPER, "--set", "model.experts=256"],
    "Qwen3 shape, E=512": [*PAPER, "--set", "model.experts=512"],
    "qwen3-235b-a22b (E=128, k=8), G=1": ["--model", "qwen3-235b-a22b"],
    "deepseek-v3 (E=256+1, k=8), flash, G=3": ["--model", "deepseek-v3", "--set", "training.attention_kernel=flash",
                                               "--set", "training.tiles=3", "--set", "training.batch_per_tile=1"],
}


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # cache bytecode, as installs do


def run_command(command: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident memory in MB) of one command, from its own resource usage
    (``os.wait4``: per child, where ``RUSAGE_CHILDREN`` keeps the largest child so far)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, command)
    return wall, usage.ru_maxrss / (2**20 if sys.platform == "darwin" else 2**10)  # bytes there, KiB on Linux


def command_seconds(args: list[str], repeat: int) -> tuple[float, float]:
    """(the best wall seconds of ``repeat`` runs, the largest peak memory in MB of them) of ``wsesim run``."""
    command = [sys.executable, "-m", "wsesim", "run", *args, "--json"]
    run_command(command)  # warm: bytecode written, files cached
    runs = [run_command(command) for _ in range(repeat)]
    return min(wall for wall, _ in runs), max(peak for _, peak in runs)


README_RATE = 1.47e6
"""Bare SimPy's timeouts per second on the machine the README's figures come from (its Performance
section: 1.45–1.49 M), the rate ``--paired`` scales to."""


def paired(repeat: int) -> None:
    """``--paired``: see the module docstring."""
    import statistics

    command = [sys.executable, "-m", "wsesim", "run", *PAPER, "--json"]
    run_command(command)  # warm
    rates, walls = [], []
    for _ in range(repeat):
        rates.append(bare_simpy_events_per_s(100_000))
        walls.append(run_command(command)[0])
    scaled = [w * r / README_RATE for w, r in zip(walls, rates, strict=True)]
    print(f"paper point, {repeat} runs: median {statistics.median(walls):.3f} s (min {min(walls):.3f}); bare "
          f"SimPy median {statistics.median(rates) / 1e6:.2f} M/s (min {min(rates) / 1e6:.2f}, max "
          f"{max(rates) / 1e6:.2f}); at {README_RATE / 1e6:.2f} M/s: median {statistics.median(scaled):.3f} s")


def stages(args: list[str]) -> dict[str, float]:
    """In a fresh interpreter: seconds per stage of one ``wsesim run``."""
    code = f"""
import json, sys, time
t0 = time.perf_counter()
from wsesim.cli.common import parse_overrides
from wsesim.config.loader import load_experiment
from wsesim.experiments import training
from wsesim.sim.programs.chunks import plan_chunks
t1 = time.perf_counter()
argv = {args!r}
model = argv[argv.index("--model") + 1] if "--model" in argv else None
sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
spec = load_experiment(model=model, overrides=parse_overrides(sets)).spec
size = training.size_step(spec)
t2 = time.perf_counter()
plan, _, _ = training.make_plan(spec, size.batch_per_tile, size.tokens, training.random_streams(spec.training.seed)[0])
t3 = time.perf_counter()
plan_chunks(spec.hardware, spec.model, spec.training.activations == "recompute")
t4 = time.perf_counter()
trace = training.engine_for(spec)(plan, *training.costed_step(plan))
t5 = time.perf_counter()
print(json.dumps({{"imports": t1 - t0, "load+size": t2 - t1, "plan": t3 - t2, "chunks": t4 - t3,
                  "simulate": t5 - t4, "events": trace.events}}))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=ENV).stdout
    import json

    return json.loads(out.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="command runs per case (the best is reported)")
    ap.add_argument("--quick", action="store_true", help="the paper point only, once")
    ap.add_argument("--paired", type=int, metavar="N", help="the paper point N times, each beside bare "
                                                              "SimPy's rate, scaled to the README's rate")
    args = ap.parse_args()
    if args.paired:
        paired(args.paired)
        return 0
    cases = dict(list(CASES.items())[:1]) if args.quick else CASES
    repeat = 1 if args.quick else args.repeat
    print(f"{os.cpu_count()} cores; bare SimPy: {bare_simpy_events_per_s():,.0f} timeouts/s in this run")
    print(f"{'case':42s} {'command':>8s} {'peak':>8s} {'imports':>8s} {'size':>6s} {'plan':>6s} {'chunks':>7s} "
          f"{'sim':>6s} {'events':>8s}")
    for name, case in cases.items():
        wall, peak = command_seconds(case, repeat)
        s = stages(case)
        print(f"{name:42s} {wall:7.2f}s {peak:5.0f} MB {s['imports']:7.2f}s {s['load+size']:5.2f}s {s['plan']:5.2f}s "
              f"{s['chunks']:6.2f}s {s['simulate']:5.2f}s {s['events']:8,d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
