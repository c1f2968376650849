"""Benchmark the fabric models: flow on the full WSE-2, the packet fidelity against its SimPy reference, flow
against packet on short messages, the dispatch fast path, and (with --full) packet timing of one full-wafer
MoE dispatch.

    python scripts/bench_fabric.py [--quick | --full]

Prints one table: what was timed, its size, the wall time, and a rate or result. The default run takes
well under a minute; --quick is the smoke test's (a few seconds); --full adds the long cases (block:16
listings, the packet fidelity on the whole wafer: about half a minute each). Measured on the machine that
runs it (single process; numpy may use its BLAS threads for the dispatch matrix-vector product).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from wsesim.config.loader import load_hardware
from wsesim.fabric import (
    DispatchModel,
    FlowFabric,
    PacketFabric,
    SimPyPacketFabric,
    all_to_all,
    dispatch_traffic,
    transpose,
    uniform_random,
)
from wsesim.fabric.mesh import Mesh
from wsesim.fabric.placement import place

# Qwen3-30B-A3B's MoE shape for the full-wafer dispatch: 128 experts, top-8, hidden 2048, bf16 tokens
EXPERTS, TOP_K, HIDDEN, DTYPE_BYTES, TOKENS = 128, 8, 2048, 2, 19 * 4096


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Best wall time of ``repeat`` runs, and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def qwen3_dispatch_bytes(seed: int = 0) -> np.ndarray:
    """Bytes per expert of one MoE dispatch: TOKENS tokens, each to TOP_K experts drawn uniformly (a
    seeded multinomial, as ``routing: uniform``), HIDDEN × DTYPE_BYTES bytes per token copy."""
    slots = np.random.default_rng(seed).multinomial(TOKENS * TOP_K, np.full(EXPERTS, 1.0 / EXPERTS))
    return slots * float(HIDDEN * DTYPE_BYTES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the smallest case of each kind (the smoke test's run)")
    size.add_argument("--full", action="store_true",
                      help="also the long cases: block:16 listings and packet timing of a full-wafer MoE dispatch")
    args = ap.parse_args()
    hw = load_hardware("wse2")
    rows: list[tuple[str, str, str, str]] = []
    repeat = 1 if args.quick else 3

    # 1. flow all-to-all on the whole wafer --------------------------------------------------------------
    pe = Mesh.from_hardware(hw)
    wall, r = timed(lambda: FlowFabric(pe).simulate(all_to_all(pe, 4)), repeat=repeat)
    rows.append(("flow all-to-all, 750x994 PEs (product form)", f"{r.messages:.3g} messages",
                 f"{wall:.3f} s", f"{r.cycles:.4g} cycles"))
    for k in (32, 16) if args.full else (32,):
        m = Mesh.from_hardware(hw, f"block:{k}")
        wall_list, listed = timed(lambda m=m: all_to_all(m, 4).to_traffic(max_messages=10**8))
        wall, r = timed(lambda m=m, listed=listed: FlowFabric(m).simulate(listed))
        rows.append((f"flow all-to-all, block:{k} ({m.rows}x{m.cols}), listed", f"{len(listed):,} messages",
                     f"{wall:.3f} s (+{wall_list:.2f} s to list)", f"{len(listed) / wall / 1e6:.1f} M msg/s"))

    # 2. the packet fidelity against its SimPy reference, where both run ---------------------------------
    packet_cases = [
        ("pe", 8, "all-to-all 1 KiB", lambda m: all_to_all(m, 1024)),
        ("pe", 16, "dispatch E=16", lambda m: dispatch_traffic(m, place(m, 16), np.full(16, 256.0 * m.pes))),
        ("block:8", 64, "all-to-all 64 B", lambda m: all_to_all(m, 64)),
        ("block:8", 64, "uniform random 1 KiB", lambda m: uniform_random(m, 1024, np.random.default_rng(0))),
    ]
    for granularity, n, label, make in packet_cases[:1] if args.quick else packet_cases:
        m = Mesh.from_hardware(hw, granularity, (n, n))
        traffic = make(m)
        fast_s, fast = timed(lambda m=m, traffic=traffic: PacketFabric(m).simulate(traffic))
        ref_s, ref = timed(lambda m=m, traffic=traffic: SimPyPacketFabric(m).simulate(traffic))
        agree = "=" if fast.cycles == ref.cycles else "!="
        rows.append((f"packet vs packet-simpy, {label}, {n}x{n} {granularity}", f"{fast.events:,} stages",
                     f"{fast_s:.2f} s vs {ref_s:.2f} s",
                     f"{ref_s / fast_s:.1f}x; cycles {fast.cycles:,.0f} {agree} {ref.cycles:,.0f}"))

    # 3. flow against packet on short messages (where the former flow rule was high) ------------------
    if not args.quick:
        for granularity, n, label, make in [
            ("pe", 8, "transpose 64 B", lambda m: transpose(m, 64)),
            ("pe", 32, "transpose 4 B", lambda m: transpose(m, 4)),
            ("pe", 16, "dispatch 16 B/PE/expert E=8", lambda m: dispatch_traffic(m, place(m, 8), np.full(8, 16.0 * m.pes))),
        ]:
            m = Mesh.from_hardware(hw, granularity, (n, n))
            traffic = make(m)
            wall, flow = timed(lambda m=m, traffic=traffic: FlowFabric(m).simulate(traffic))
            packet = PacketFabric(m).simulate(traffic)
            rows.append((f"flow vs packet, {label}, {n}x{n} {granularity}", f"{len(traffic):,} messages",
                         f"{wall * 1e3:.1f} ms", f"{flow.cycles:,.0f} vs {packet.cycles:,.0f} cycles"))

    # 4. the engine's dispatch fast path on the whole wafer ---------------------------------------------
    m = Mesh.from_hardware(hw, "block:16")
    placement = place(m, EXPERTS)
    wall, model = timed(lambda: DispatchModel(m, placement))
    rows.append((f"DispatchModel build, block:16, E={EXPERTS}", f"{model.active_links:,} links x {EXPERTS}",
                 f"{wall:.3f} s", ""))
    xs = np.random.default_rng(0).random((200, EXPERTS)) * 1e6
    model.cycles(xs[0])
    wall, _ = timed(lambda: [model.cycles(x) for x in xs], repeat=repeat)
    rows.append((f"DispatchModel.cycles, block:16, E={EXPERTS}, 0-1 MB/expert", "200 calls", f"{wall:.3f} s",
                 f"{wall / 200 * 1e3:.2f} ms per call"))
    if not args.quick:  # the full dispatch's size: the latency term matters less, fewer rows can win
        big = np.array([qwen3_dispatch_bytes(seed) for seed in range(200)])
        wall, _ = timed(lambda: [model.cycles(x) for x in big], repeat=repeat)
        rows.append((f"DispatchModel.cycles, block:16, E={EXPERTS}, Qwen3 dispatch", "200 calls", f"{wall:.3f} s",
                     f"{wall / 200 * 1e3:.2f} ms per call"))
    if not args.quick:  # some regions receive nothing: per-region latencies of the rows that could win, kept
        idle = np.where(np.random.default_rng(1).random((200, EXPERTS)) < 0.3, 0.0, xs)
        first, _ = timed(lambda: model.cycles(idle[0]))
        wall, _ = timed(lambda: [model.cycles(x) for x in idle], repeat=repeat)
        rows.append((f"DispatchModel.cycles, block:16, E={EXPERTS}, 30% of experts idle", "200 calls",
                     f"{wall:.3f} s", f"{wall / 200 * 1e3:.2f} ms per call (the first {first * 1e3:.0f} ms)"))
    traffic = dispatch_traffic(m, placement, xs[0])
    wall, r = timed(lambda: FlowFabric(m).simulate(traffic))
    rows.append(("flow on the listed dispatch, same", f"{len(traffic):,} messages", f"{wall:.3f} s",
                 f"{r.cycles:,.0f} cycles (model: {model.cycles(xs[0])[0]:,.0f})"))

    # 5. packet timing of one full-wafer MoE dispatch (Qwen3-30B-A3B shape) ----------------------------
    if args.full:
        x = qwen3_dispatch_bytes()
        traffic = dispatch_traffic(m, placement, x)
        wall, r = timed(lambda: PacketFabric(m).simulate(traffic))
        flow = model.cycles(x)[0]
        rows.append((f"packet MoE dispatch, 750x994 block:16, E={EXPERTS}, {x.sum() / 2**30:.2f} GiB",
                     f"{len(traffic):,} messages, {r.events:,} stages", f"{wall:.1f} s",
                     f"{r.cycles:,.0f} cycles (flow {flow:,.0f})"))

    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":
    main()
