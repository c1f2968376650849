"""GEMV y[M×N] = x[M×K] · W[K×N] on a P × Q grid of PEs (docs/model.md §10.4): one vector (M = 1), or a
skinny GEMM of M vectors against the same resident weights (a decode batch's tokens, §11.7), which
takes the same hops with M times the FMACs and the wavelets.

PE (r, c) holds W's block of rows c·k … (c + 1)·k − 1 and columns r·n … (r + 1)·n − 1 (k = ⌈K/Q⌉,
n = ⌈N/P⌉), and x's slice c, which the previous op's allreduce left on every PE of column c (the decode
loop of WaferLLM and the vendor's example keep x there). Each PE does M·k·n FMACs (one vector
instruction of n per value of x), then every row allreduces its M·n partial sums (⌈M·n / elements per
wavelet⌉ wavelets) so that y ends on every PE of the row, ready for the next GEMV. Every row does the
same, so one row is simulated:

* ``pipeline`` — the vendor's: a chain reduce along the row to its first PE, pipelined per wavelet, and
  a multicast of the result back along the row;
* ``meshgemv`` — WaferLLM's centred K-tree allreduce (``ktree``): two chains converging on the middle
  of each group, the same over the group roots to the row's middle, a multicast both ways. Its decode
  alternates the axis its GEMVs reduce along (qkv, output and up/gate along one, score, o and down along
  the other: six turns a layer for six GEMVs), so each GEMV pays one turn (``Machine.turn``): nothing on
  WSE-2, whose code keeps colours for each axis; the colours' re-routing on WSE-3, whose code shares them.

cycles = compute(M·k·n) + the allreduce of one row (``allreduce_line``).
"""

from __future__ import annotations

from collections.abc import Callable

from ..config.errors import ConfigError
from .kinds import GemvAlgorithm, KernelKind, ReduceAlgorithm
from .lines import ktree_allreduce, phases, reduce_line, topology
from .linkmap import LinkMap, Term, allreduce_line_loads, ones, row_terms
from .machine import T_OP, Machine
from .result import KernelResult, sram_check


def allreduce_line(m: Machine, n: int, wavelets: int, tree: ReduceAlgorithm) -> tuple[float, int, int]:
    """(cycles, steps, hops of the slowest path) of an allreduce along a line of n PEs: the K-tree's
    three phases (``lines.ktree_allreduce``), or a reduce to PE 0 and then, as its own instruction once
    the reduce has ended, the multicast of the sum to the far end (n − 1 hops)."""
    if n < 2:
        return 0.0, 0, 0
    if tree == ReduceAlgorithm.KTREE:
        return ktree_allreduce(m, n, wavelets)
    ready, depth = reduce_line(m, topology(tree, n), wavelets)
    return float(ready[0][-1] + m.transfer(wavelets, n - 1)), int(depth[0]) + 1, int(depth[1]) + n - 1


def gemv_terms(rows: int, cols: int, wavelets: int, tree: ReduceAlgorithm) -> list[Term]:
    """Every row's allreduce: its ``tree`` toward its root, then the multicast from the root to both ends
    (west of a K-tree's centre too)."""
    if cols < 2:
        return []
    return row_terms(ones(rows), *allreduce_line_loads(cols, topology(tree, cols)[0], wavelets))


ROW_TREES: dict[GemvAlgorithm, ReduceAlgorithm] = {
    GemvAlgorithm.PIPELINE: ReduceAlgorithm.CHAIN, GemvAlgorithm.MESHGEMV: ReduceAlgorithm.KTREE}
"""The reduce tree each GEMV algorithm's rows run (their colours and routes are that tree's)."""


def _gemv(algorithm: GemvAlgorithm) -> Callable[[Machine, int, int, tuple[int, int, int]], KernelResult]:
    tree = ROW_TREES[algorithm]

    def run(m: Machine, rows: int, cols: int, shape: tuple[int, int, int]) -> KernelResult:
        vectors, kk, nn = shape
        if vectors < 1 or kk < 1 or nn < 1:
            raise ConfigError(f"expected a GEMV shape M x K x N of positive sizes, got {vectors} x {kk} x "
                              f"{nn}", path="shape")
        m.check_grid(rows, cols)
        k, n = -(-kk // cols), -(-nn // rows)
        compute, issue = m.instructions(vectors * k, n)  # one FMAC instruction per x value, n long
        wav = m.wavelets(vectors * n)
        reduce, steps, hops = allreduce_line(m, cols, wav, tree)
        issue += (phases(tree) * m.issue + (m.turn if tree == ReduceAlgorithm.KTREE else 0.0)) * (cols > 1)
        cycles = compute + issue + reduce
        comm = min(reduce, wav + m.path(steps, hops)) if reduce else 0.0
        need = m.elem_bytes * (k * n + vectors * (k + 2 * n))  # W block; x slices, y partials, incoming
        links = LinkMap(rows, cols, lambda: gemv_terms(rows, cols, wav, tree))
        reason = sram_check(m, need, "the GEMV")
        return KernelResult(KernelKind.GEMV, algorithm, rows, cols, shape, m.dtype, cycles,
                            compute + steps * T_OP, comm, 2.0 * vectors * kk * nn, need, links, m, not reason,
                            reason, (f"{k} x {n} block per PE: {vectors * k} FMAC instructions of {n}; "
                                     f"{tree} allreduce of {wav} wavelets per row",), overhead=issue,
                            dsd_ops=float(vectors * k + phases(tree) * (cols > 1)),
                            dsd_elements=float(vectors * k * n))

    return run


GEMV_ALGORITHMS: dict[GemvAlgorithm, Callable[[Machine, int, int, tuple[int, int, int]], KernelResult]] = {
    a: _gemv(a) for a in GemvAlgorithm}
"""Each GEMV algorithm's schedule; keyed by members, so a plain name ("meshgemv") finds its entry too."""
