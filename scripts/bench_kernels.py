"""Benchmark the kernel model (wsesim.kernels): the issue's two speed targets (a GEMM on the full 750 × 994
WSE-2 grid, a chain reduce over a 750-PE row at PE granularity, each ≤ 2 s) and the other kernels at
wafer scale, the link map (``--png``'s data) on the two target cases, plus the training-step cost
function cold and cached.

    python scripts/bench_kernels.py [--repeat N]

Prints one table: what was timed, the wall time (best of N, default 3), and the simulated cycles.
Every kernel is timed through ``run_kernel`` (no cache); ``kernel_cost`` (the cost pass's front door) once cold, once cached.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from wsesim.config.loader import load_hardware
from wsesim.kernels import kernel_cost, run_kernel


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def _mapped(r: Any) -> Any:
    """The run with its link map expanded (every directed link's wavelets) and summarised."""
    assert r.link_map.load.size and r.links.links_used >= 0
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per case, the best is shown (default 3)")
    args = ap.parse_args(argv)
    hw = load_hardware("wse2")
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("gemm summa 8192^3 fp16, 750 x 994 (target <= 2 s)",
         lambda: run_kernel(hw, "gemm", 750, 994, algorithm="summa", shape=(8192, 8192, 8192))),
        ("gemm summa 33000^3 fp32, 750 x 750",
         lambda: run_kernel(hw, "gemm", 750, 750, dtype="fp32", algorithm="summa", shape=(33000,) * 3)),
        ("gemm meshgemm 8192^3 fp16, 750 x 750",
         lambda: run_kernel(hw, "gemm", 750, 750, algorithm="meshgemm", shape=(8192, 8192, 8192))),
        ("gemm cannon 8192^3 fp16, 750 x 750",
         lambda: run_kernel(hw, "gemm", 750, 750, algorithm="cannon", shape=(8192, 8192, 8192))),
        ("reduce chain, 750-PE row, B = 1 (target <= 2 s)",
         lambda: run_kernel(hw, "reduce", 1, 750, dtype="fp32", algorithm="chain", wavelets=1)),
        ("reduce chain, 750-PE row, B = 1,000",
         lambda: run_kernel(hw, "reduce", 1, 750, dtype="fp32", algorithm="chain", wavelets=1000)),
        ("allreduce two-phase, 750 x 994, B = 64",
         lambda: run_kernel(hw, "allreduce", 750, 994, dtype="fp32", algorithm="two-phase", wavelets=64)),
        ("allreduce ring, 750 x 994, B = 1,000",
         lambda: run_kernel(hw, "allreduce", 750, 994, dtype="fp32", algorithm="ring", wavelets=1000)),
        ("gemv meshgemv 1 x 32768 x 32768 fp16, 420 x 420",
         lambda: run_kernel(hw, "gemv", 420, 420, algorithm="meshgemv", shape=(1, 32768, 32768))),
        ("link map: gemm summa 8192^3, 750 x 994, run + map (target <= 2 s)",
         lambda: _mapped(run_kernel(hw, "gemm", 750, 994, algorithm="summa", shape=(8192, 8192, 8192)))),
        ("link map: reduce chain, 750-PE row, run + map (target <= 2 s)",
         lambda: _mapped(run_kernel(hw, "reduce", 1, 750, dtype="fp32", algorithm="chain", wavelets=1))),
        ("link map: gemm meshgemm 8192^3, 750 x 750, run + map",
         lambda: _mapped(run_kernel(hw, "gemm", 750, 750, algorithm="meshgemm", shape=(8192, 8192, 8192)))),
    ]
    rows = []
    for name, fn in cases:
        seconds, r = timed(fn, args.repeat)
        rows.append((name, f"{seconds:.4f} s", f"{r.cycles:,.0f}"))
    kernel_cost.cache_clear()

    def gemm() -> float:
        return kernel_cost(hw, "gemm", 750, 994, dtype="fp16", algorithm="summa", shape=(4096, 2048, 6144)).cycles

    cold, c = timed(gemm, 1)
    warm, _ = timed(gemm, max(args.repeat, 100))
    rows.append(("kernel_cost: SUMMA 4096 x 2048 x 6144, 750 x 994, cold", f"{cold * 1e3:.3f} ms", f"{c:,.0f}"))
    rows.append(("kernel_cost, the same shape again (cached)", f"{warm * 1e6:.1f} us", f"{c:,.0f}"))
    width = max(len(r[0]) for r in rows)
    print(f"{'case':<{width}}  {'wall':>10}  {'cycles':>14}")
    for name, wall, cycles in rows:
        print(f"{name:<{width}}  {wall:>10}  {cycles:>14}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
