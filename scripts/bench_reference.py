#!/usr/bin/env python3
"""Benchmark: the fast engine and the plain-SimPy reference engine on the same step plans.

Points: tiny (tiny8, tiny-moe, seq_len 64, G=2 B=2); a reduced WSE-2 (40 x 48 PEs at block:4, 2 MiB per
PE, two layers of Qwen3-30B-A3B, seq_len 256, G=1 B=1); the full Qwen3-30B-A3B on WSE-2 at G=1 (the
shipped experiment: seq_len 4096, B auto); with ``--full`` also bench_engine.py's point (G=64 B=1,
top_k 1: memory-infeasible at seq_len 4096, so planned directly). Each engine simulates the same plan;
the plan is built once, outside the timing. Prints wall seconds (best of ``--repeat``), SimPy events and
both step cycles with their relative difference.

    python scripts/bench_reference.py [--quick] [--full] [--repeat N]
"""

from __future__ import annotations

import argparse
import time

from wsesim.config.loader import load_experiment, load_experiment_data
from wsesim.experiments.runner import simulate_experiment
from wsesim.experiments.training import costed_step, make_plan, random_streams
from wsesim.model.routing import route_tokens
from wsesim.sim.executors import engine, reference
from wsesim.sim.programs.plan import StepPlan

TINY = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 64, "batch_per_tile": 2, "tiles": 2}, "simulation": {"granularity": "pe"}}
REDUCED_WSE2 = {"hardware.mesh.rows": 40, "hardware.mesh.cols": 48, "simulation.granularity": "block:4",
                "hardware.pe.sram": "2 MiB", "model.layers": 2, "training.seq_len": 256,
                "training.batch_per_tile": 1}


def _plan_of(spec) -> StepPlan:
    run = simulate_experiment(spec)
    if run.plan is None:
        raise SystemExit(f"infeasible: {run.result.infeasible_reason}")
    return run.plan


def _g64_plan() -> StepPlan:
    spec = load_experiment(overrides={"model.top_k": 1, "model.experts": 128, "training.tiles": 64,
                                      "training.batch_per_tile": 1}).spec
    place_rng, route_rng = random_streams(spec.training.seed)
    tokens = route_tokens(spec.model, spec.training, 64 * spec.training.seq_len, route_rng)
    return make_plan(spec, 1, tokens, place_rng)[0]


def _time(simulate, plan: StepPlan, repeat: int):
    walls, trace = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        trace = simulate(plan, *costed_step(plan))
        walls.append(time.perf_counter() - t0)
    return min(walls), trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="only the tiny and reduced WSE-2 points, once each")
    ap.add_argument("--full", action="store_true", help="add the G=64 point of bench_engine.py")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    repeat = 1 if args.quick else args.repeat
    points = [("tiny8 / tiny-moe, G=2 B=2", lambda: _plan_of(load_experiment_data(TINY).spec)),
              ("WSE-2 40x48 / Qwen3 2 layers", lambda: _plan_of(load_experiment(overrides=REDUCED_WSE2).spec))]
    if not args.quick:
        points.append(("WSE-2 / Qwen3-30B-A3B, G=1", lambda: _plan_of(load_experiment().spec)))
    if args.full:
        points.append(("WSE-2 / Qwen3-30B-A3B, G=64 B=1 k=1", _g64_plan))
    print(f"{'point':<38} {'B':>3} {'G':>3} {'fast s':>8} {'ref s':>8} {'ratio':>6} {'fast ev':>8} "
          f"{'ref ev':>9} {'step cycles':>16} {'rel diff':>9}")
    for name, build in points:
        plan = build()
        fast_s, fast = _time(engine.simulate, plan, repeat)
        ref_s, ref = _time(reference.simulate, plan, repeat)
        rel = (ref.step_cycles - fast.step_cycles) / fast.step_cycles
        print(f"{name:<38} {plan.batch_per_tile:>3} {plan.tiles:>3} {fast_s:>8.3f} {ref_s:>8.3f} "
              f"{ref_s / fast_s:>6.1f} {fast.events:>8,} {ref.events:>9,} {fast.step_cycles:>16,.1f} {rel:>9.1e}")


if __name__ == "__main__":
    main()
