"""GEMM C[M×N] = A[M×K] · B[K×N] on a P × Q grid of PEs: SUMMA (panels multicast along rows and down
columns), Cannon (a skew, then one-place shifts with wrap-around) and MeshGEMM (Cannon on the folded ring,
shifts of at most 2 hops); the last two on square grids only (docs/model.md §10.3 gives each step's terms).

Every PE owns an m × n block of C; the PEs with the largest blocks set the time. Each algorithm is a list
of steps every PE runs alike but for how far its operands come, so one representative PE per step is
timed, vectorised over the steps. Steps overlap when SRAM holds a second buffer for the next step's
operands (then a step takes max(its compute, the next step's communication), else their sum); the skew
takes the busiest link or ramp in wavelets plus one step over its longest path, as the flow fidelity
charges a phase.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..config.errors import ConfigError
from ..fabric.mesh import EAST, NORTH, SOUTH, WEST
from .kinds import GemmAlgorithm, KernelKind
from .lines import ring_order
from .linkmap import LinkMap, Term, col_terms, line_loads, ones, row_terms
from .machine import Machine
from .result import KernelResult


def check_gemm(m: Machine, rows: int, cols: int, shape: tuple[int, int, int]) -> None:
    """Raise ``ConfigError`` for a GEMM shape with a size below 1 or a grid larger than the mesh."""
    if min(shape) < 1:
        raise ConfigError(f"expected positive M, K and N, got {' x '.join(map(str, shape))}", path="shape")
    m.check_grid(rows, cols)


def _blocks(m: Machine, rows: int, cols: int, shape: tuple[int, int, int]) -> tuple[int, int, int, int]:
    check_gemm(m, rows, cols, shape)
    mm, kk, nn = shape
    return -(-mm // rows), -(-nn // cols), -(-kk // cols), -(-kk // rows)


def _schedule(compute: np.ndarray, comm: np.ndarray, overlap: bool,
              lead: float = 0.0) -> tuple[float, float, float]:
    """(cycles, compute, exposed communication) of steps whose operands arrive in ``comm[s]`` cycles
    before ``compute[s]`` can run, after ``lead`` cycles of set-up communication."""
    total_compute = float(compute.sum())
    if overlap and len(comm):
        nxt = np.append(comm[1:], 0.0)
        exposed = float(comm[0] + np.maximum(nxt - compute, 0).sum())
    else:
        exposed = float(comm.sum())
    return lead + total_compute + exposed, total_compute, lead + exposed


def step_work(m: Machine, bm: int, k: int, bn: int) -> tuple[float, float]:
    """(compute, issue) cycles of one step's block product C[bm×bn] += A[bm×k]·B[k×bn] on one PE, as
    WaferLLM's code writes it: one FMAC instruction per (k, n) pair, a column of A bm long scaled by
    B[k, n] into C's column n, so k·bn instructions of bm elements, and the step's task: one more issue."""
    compute, issue = m.instructions(k * bn, bm)
    return compute, issue + m.issue


def _result(algorithm: GemmAlgorithm, m: Machine, rows: int, cols: int, shape: tuple[int, int, int],
            timing: tuple, sram: float, links: LinkMap, reason: str, notes: tuple[str, ...],
            issue: float = 0.0, ops: float = 0.0, elements: float = 0.0) -> KernelResult:
    """``timing`` (cycles, the PE's work, exposed communication), the work split into ``issue`` and
    compute; ``ops`` DSD operations (a step's task counted as one) walking ``elements`` on the PE."""
    cycles, work, comm = timing
    flops = 2.0 * shape[0] * shape[1] * shape[2]
    return KernelResult(KernelKind.GEMM, algorithm, rows, cols, shape, m.dtype, cycles, work - issue, comm,
                        flops, sram, links, m, not reason, reason, notes, overhead=issue, dsd_ops=ops,
                        dsd_elements=elements)


def _sram_reason(m: Machine, need: float) -> str:
    if need <= m.sram_bytes:
        return ""
    return (f"the blocks need {need:,.0f} B per PE, more than the {m.sram_bytes:,.0f} B usable "
            f"({m.name}: pe.sram less pe.reserved_sram)")


def summa(m: Machine, rows: int, cols: int, shape: tuple[int, int, int]) -> KernelResult:
    bm, bn, ka, kb_own = _blocks(m, rows, cols, shape)
    k = shape[1]
    own = m.elem_bytes * (bm * ka + kb_own * bn + bm * bn)
    per_k = 2 * m.elem_bytes * (bm + bn)  # two buffers of an m × 1 and a 1 × n panel slice
    kb = min(-(-k // max(rows, cols)), max(1, int((m.sram_bytes - own) // per_k)))
    steps = -(-k // kb)
    need = own + kb * per_k
    s = np.arange(steps)
    # the owner of panel s: column (s·k_b) // ⌈K/Q⌉ for A, row (s·k_b) // ⌈K/P⌉ for B
    oc, orow = np.minimum(s * kb // ka, cols - 1), np.minimum(s * kb // kb_own, rows - 1)
    d = np.maximum(np.maximum(oc, cols - 1 - oc), np.maximum(orow, rows - 1 - orow))
    width = np.minimum(kb, k - s * kb)
    # a panel crosses the receiver's ramp unless the grid is one PE wide that way (then it is local)
    wav = np.array([m.wavelets(bm * w) * (cols > 1) + m.wavelets(w * bn) * (rows > 1)
                    for w in (kb, int(width[-1]))])
    comm = np.where(width == kb, wav[0], wav[1]) + m.step(d)
    full, last = step_work(m, bm, kb, bn), step_work(m, bm, int(width[-1]), bn)
    compute = np.where(width == kb, sum(full), sum(last)).astype(np.float64)
    issue = float(np.where(width == kb, full[1], last[1]).sum())
    timing = _schedule(compute, comm.astype(np.float64), overlap=True)
    wa = np.where(width == kb, m.wavelets(bm * kb), m.wavelets(bm * int(width[-1]))) * (cols > 1)
    wb = np.where(width == kb, m.wavelets(kb * bn), m.wavelets(int(width[-1]) * bn)) * (rows > 1)
    links = LinkMap(rows, cols, lambda: summa_terms(rows, cols, oc, orow, wa, wb))
    notes = (f"{steps} steps of panel width {kb}, double-buffered",)
    return _result(GemmAlgorithm.SUMMA, m, rows, cols, shape, timing, need, links, _sram_reason(m, need),
                   notes, issue, float(k * bn + steps), float(bm * k * bn))


def multicast_loads(n: int, owner: np.ndarray, wavelets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) loads over a line of n PEs of one multicast per step from ``owner[s]`` to
    both ends, ``wavelets[s]`` each: step s loads the forward links out of owner … n − 2 and the backward
    links out of 1 … owner (a message to n − 1 and one to 0)."""
    forward, _ = line_loads(n, owner, np.full(len(owner), n - 1), wavelets)
    _, backward = line_loads(n, owner, np.zeros(len(owner), dtype=np.int64), wavelets)
    return forward, backward


def summa_terms(rows: int, cols: int, oc: np.ndarray, orow: np.ndarray, wa: np.ndarray,
                wb: np.ndarray) -> list[Term]:
    """SUMMA's links: step s's A panel (``wa[s]`` wavelets) from column ``oc[s]`` along every row, its B
    panel (``wb[s]``) from row ``orow[s]`` down every column."""
    return [*row_terms(ones(rows), *multicast_loads(cols, oc, wa)),
            *col_terms(*multicast_loads(rows, orow, wb), ones(cols))]


def skew_loads(n: int, phys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Blocks over each link of the skew, per line: (forward, backward), n × n, [i, x] the blocks over
    the link out of physical position x of line i (line i's block at logical j goes to (j − i) mod n)."""
    i, j = np.divmod(np.arange(n * n), n)
    src, dst = phys[j], phys[(j - i) % n]
    size = n * (n + 1)

    def line(a: np.ndarray, b: np.ndarray, keep: np.ndarray) -> np.ndarray:  # +1 at a, −1 at b, per line
        diff = (np.bincount(i[keep] * (n + 1) + a[keep], minlength=size)
                - np.bincount(i[keep] * (n + 1) + b[keep], minlength=size))
        return np.cumsum(diff.reshape(n, n + 1), axis=1)[:, :n]

    return line(src, dst, dst > src), line(dst + 1, src + 1, dst < src)


def skew_routes(n: int, phys: np.ndarray) -> np.ndarray:
    """n × n: the skew's paths that touch the router at physical position x of line i (ends included)."""
    i, j = np.divmod(np.arange(n * n), n)
    src, dst = phys[j], phys[(j - i) % n]
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    size = n * (n + 1)
    diff = np.bincount(i * (n + 1) + lo, minlength=size) - np.bincount(i * (n + 1) + hi + 1, minlength=size)
    return np.cumsum(diff.reshape(n, n + 1), axis=1)[:, :n]


def skew_cycles(m: Machine, n: int, wa: int, wb: int, phys: np.ndarray) -> tuple[float, float, int]:
    """(cycles, busiest link or ramp in wavelets, longest path) of the skew on an n × n grid: line i's
    block at logical position j goes to (j − i) mod n, physical positions ``phys``; A along rows and B
    along columns at once (every line of both is the same problem, so one line class per shift i)."""
    east, west = skew_loads(n, phys)
    busiest_line = max(east.max(), west.max())
    i, j = np.divmod(np.arange(n * n), n)
    src, dst = phys[j], phys[(j - i) % n]
    busiest = float(max(busiest_line * max(wa, wb), wa + wb))
    hops = int(np.abs(dst - src).max(initial=0))
    return (busiest + m.step(hops) if hops else 0.0), busiest, hops


def shifted_terms(n: int, wa: int, wb: int, phys: np.ndarray) -> list[Term]:
    """Cannon's and MeshGEMM's links: the skew (A along rows, B down columns: line i's loads are row i's
    and column i's), then n − 1 shifts in which every PE sends its blocks to its ring predecessor."""
    if n < 2:
        return []
    east, west = skew_loads(n, phys)
    fwd, bwd = line_loads(n, phys, np.roll(phys, 1), n - 1)
    return [(EAST, wa * east, None), (WEST, wa * west, None), (SOUTH, wb * east.T, None),
            (NORTH, wb * west.T, None), *row_terms(ones(n), wa * fwd, wa * bwd),
            *col_terms(wb * fwd, wb * bwd, ones(n))]


def _shifted(name: GemmAlgorithm,
             phys: Callable[[int], np.ndarray],
             ) -> Callable[[Machine, int, int, tuple[int, int, int]], KernelResult]:
    def run(m: Machine, rows: int, cols: int, shape: tuple[int, int, int]) -> KernelResult:
        bm, bn, ka, kb = _blocks(m, rows, cols, shape)
        n = rows
        if rows != cols:
            reason = f"{name} needs a square grid, got {rows} x {cols}"
            return _result(name, m, rows, cols, shape, (0.0, 0.0, 0.0), 0.0, LinkMap(rows, cols), reason, ())
        wa, wb = m.wavelets(bm * ka), m.wavelets(kb * bn)
        order = phys(n)
        lead, _, _ = skew_cycles(m, n, wa, wb, order)
        d = int(np.abs(np.diff(np.append(order, order[0]))).max()) if n > 1 else 0
        shift = float(wa + wb + m.step(d)) if n > 1 else 0.0
        work = step_work(m, bm, ka, bn)
        compute = np.full(n, sum(work))
        comm = np.full(n, shift)
        comm[0] = 0.0  # the skew delivers step 0's operands
        block = m.elem_bytes * (bm * ka + kb * bn)
        base = m.elem_bytes * bm * bn + 2 * block  # C, the blocks, and a buffer for the next ones
        timing = _schedule(compute, comm, overlap=True, lead=lead)
        links = LinkMap(n, n, lambda: shifted_terms(n, wa, wb, order))
        notes = (f"skew {lead:,.0f} cycles; {n} shifts of at most {d} hops",)
        return _result(name, m, rows, cols, shape, timing, base, links, _sram_reason(m, base), notes,
                       n * work[1], float(n * (ka * bn + 1)), float(n * bm * ka * bn))

    return run


cannon = _shifted(GemmAlgorithm.CANNON, np.arange)
meshgemm = _shifted(GemmAlgorithm.MESHGEMM, ring_order)

GEMM_ALGORITHMS: dict[GemmAlgorithm, Callable[[Machine, int, int, tuple[int, int, int]], KernelResult]] = {
    GemmAlgorithm.SUMMA: summa, GemmAlgorithm.CANNON: cannon, GemmAlgorithm.MESHGEMM: meshgemm}
"""Each GEMM algorithm's schedule; keyed by members, so a plain name ("summa") finds its entry too."""
