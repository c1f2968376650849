"""Benchmark the fabric models: flow on the full WSE-2, packet-mode event rate, and the dispatch fast path.

    python scripts/bench_fabric.py [--quick]

Prints one table: what was timed, its size, the wall time, and a rate. Measured on the machine that
runs it (single process; numpy may use its BLAS threads for the dispatch matrix-vector product).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import simpy

from wsesim.config.loader import load_hardware
from wsesim.fabric import DispatchModel, FlowFabric, PacketFabric, all_to_all, dispatch_traffic
from wsesim.fabric.mesh import Mesh
from wsesim.fabric.placement import place


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time of ``repeat`` runs, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def bare_simpy_rate(processes: int, events: int) -> float:
    """``env.timeout`` events per second with ``processes`` processes pending at once."""
    def proc(env: simpy.Environment, n: int, delay: int) -> Any:
        for _ in range(n):
            yield env.timeout(delay)

    env = simpy.Environment()
    for i in range(processes):
        env.process(proc(env, events // processes, 1 + i % 7))
    start = time.perf_counter()
    env.run()
    return events / (time.perf_counter() - start)


def stages(mesh: Mesh, traffic: Any) -> int:
    """Route stages the packet fidelity books: inject + hops + eject per remote message."""
    t = traffic.to_traffic() if hasattr(traffic, "to_traffic") else traffic
    remote = t.src != t.dst
    s, d = t.src[remote], t.dst[remote]
    return int((np.abs(s // mesh.cols - d // mesh.cols) + np.abs(s % mesh.cols - d % mesh.cols) + 2).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    ap.add_argument("--quick", action="store_true",
                    help="smaller runs only (no 8.8-million-message listing, no 12x12 packet all-to-all)")
    args = ap.parse_args()
    hw = load_hardware("wse2")
    rows: list[tuple[str, str, str, str]] = []
    repeat = 1 if args.quick else 3

    # 1. flow all-to-all on the whole wafer --------------------------------------------------------------
    pe = Mesh.from_hardware(hw)
    wall, r = timed(lambda: FlowFabric(pe).simulate(all_to_all(pe, 4)), repeat=repeat)
    rows.append(("flow all-to-all, 750x994 PEs (product form)", f"{r.messages:.3g} messages",
                 f"{wall:.3f} s", f"{r.cycles:.4g} cycles"))
    for k in ((32,) if args.quick else (32, 16)):
        m = Mesh.from_hardware(hw, f"block:{k}")
        wall_list, listed = timed(lambda m=m: all_to_all(m, 4).to_traffic(max_messages=10**8))
        wall, r = timed(lambda m=m, listed=listed: FlowFabric(m).simulate(listed))
        rows.append((f"flow all-to-all, block:{k} ({m.rows}x{m.cols}), listed", f"{len(listed):,} messages",
                     f"{wall:.3f} s (+{wall_list:.2f} s to list)", f"{len(listed) / wall / 1e6:.1f} M msg/s"))

    # 2. packet-mode event rate, beside bare SimPy --------------------------------------------------------
    packet_cases = [
        (8, "all-to-all 1 KiB", lambda m: all_to_all(m, 1024)),
        (12, "all-to-all 256 B", lambda m: all_to_all(m, 256)),
        (16, "dispatch E=16", lambda m: dispatch_traffic(m, place(m, 16), np.full(16, 256.0 * m.pes))),
    ]
    for n, label, make in packet_cases[:1] if args.quick else packet_cases:
        m = Mesh.from_hardware(hw, "pe", (n, n))
        traffic = make(m)
        wall, r = timed(lambda m=m, traffic=traffic: PacketFabric(m).simulate(traffic))
        hops = stages(m, traffic)
        rows.append((f"packet {label}, {n}x{n} PEs", f"{r.events:,} events", f"{wall:.2f} s",
                     f"{r.events / wall / 1e3:.0f} k events/s, {hops / wall / 1e3:.0f} k hops/s"))
    events = 100_000 if args.quick else 500_000
    for procs in (100, 5000):
        rate = bare_simpy_rate(procs, events)
        rows.append((f"bare SimPy env.timeout, {procs} processes", f"{events:,} events", f"{events / rate:.2f} s",
                     f"{rate / 1e3:.0f} k events/s"))

    # 3. the engine's dispatch fast path on the whole wafer ---------------------------------------------
    m = Mesh.from_hardware(hw, "block:16")
    placement = place(m, 128)
    wall, model = timed(lambda: DispatchModel(m, placement))
    rows.append(("DispatchModel build, block:16, E=128", f"{model.active_links:,} links x 128",
                 f"{wall:.3f} s", ""))
    xs = np.random.default_rng(0).random((200, 128)) * 1e6
    model.cycles(xs[0])
    wall, _ = timed(lambda: [model.cycles(x) for x in xs], repeat=repeat)
    rows.append(("DispatchModel.cycles, block:16, E=128", "200 calls", f"{wall:.3f} s",
                 f"{wall / 200 * 1e3:.2f} ms per call"))
    traffic = dispatch_traffic(m, placement, xs[0])
    wall, r = timed(lambda: FlowFabric(m).simulate(traffic))
    rows.append(("flow on the listed dispatch, same", f"{len(traffic):,} messages", f"{wall:.3f} s",
                 f"{r.cycles:,.0f} cycles (model: {model.cycles(xs[0])[0]:,.0f})"))

    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":
    main()
