#!/usr/bin/env python3
"""Benchmark: the engine on one full training step, beside bare SimPy on the same machine.

Qwen3-30B-A3B (48 layers, forward and backward), WSE-2, G=64, E=128, top_k=1, B=1 — the issue's
configuration. At the default seq_len (4096) that step does not fit in SRAM (the memory model allows
G <= 19 at B=1), so the benchmark builds the plan directly and times the simulation alone; memory
feasibility is not what is measured here.

    python scripts/bench_engine.py [--repeat N] [--seq-len S]
"""

from __future__ import annotations

import argparse
import time

import simpy

from wsesim.config.loader import load_experiment
from wsesim.experiments.training import costed_step, make_plan, random_streams
from wsesim.model.routing import route_tokens
from wsesim.sim.executors.engine import simulate


def bare_simpy_events_per_s(n: int = 200_000) -> float:
    """Events per second of a bare SimPy process that only yields timeouts."""
    env = simpy.Environment()

    def proc(env):
        for _ in range(n):
            yield env.timeout(1)

    env.process(proc(env))
    start = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seq-len", type=int, default=4096)
    args = ap.parse_args()
    spec = load_experiment(overrides={"model.top_k": 1, "model.experts": 128, "training.tiles": 64,
                                      "training.batch_per_tile": 1, "training.seq_len": args.seq_len}).spec
    place_rng, route_rng = random_streams(spec.training.seed)
    tokens = route_tokens(spec.model, spec.training, 64 * spec.training.seq_len, route_rng)
    t0 = time.perf_counter()
    plan, _, _ = make_plan(spec, 1, tokens, place_rng)
    plan_s = time.perf_counter() - t0
    walls, trace = [], None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        trace = simulate(plan, *costed_step(plan))
        walls.append(time.perf_counter() - t0)
    bare = bare_simpy_events_per_s()
    best = min(walls)
    print(f"Qwen3-30B-A3B, WSE-2, seq_len {args.seq_len}, G=64 B=1, E=128 top_k=1, 48 layers fwd+bwd")
    print(f"  plan (mesh, placement, dispatch basis): {plan_s:.3f} s")
    print(f"  simulate: best {best:.3f} s, median {sorted(walls)[len(walls) // 2]:.3f} s over {args.repeat}")
    print(f"  simulated step: {trace.step_cycles:,.0f} cycles = {trace.step_cycles / spec.hardware.clock_hz:.3f} s")
    print(f"  expert ops laid out: {sum(len(o.experts) for o in trace.expert_ops):,}; "
          f"SimPy events: {trace.events:,} ({trace.events / best:,.0f} events/s)")
    print(f"  bare SimPy timeouts in the same run: {bare:,.0f} events/s")


if __name__ == "__main__":
    main()
