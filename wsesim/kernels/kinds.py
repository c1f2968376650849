"""The kernels' vocabulary: the kinds of kernel, the algorithms each can run, and the default of each.

Every member *is* its string (``KernelKind.GEMM == "gemm"``, hashing alike; ``model.vocabulary.Name``),
so a caller may pass plain strings and every result, JSON and table reads as the plain names would. The
tables that run an algorithm are keyed by these members where the code lives (``gemm.GEMM_ALGORITHMS``,
``gemv.GEMV_ALGORITHMS``, ``lines.TOPOLOGIES``); this module is the one list of what exists and what is
chosen when nothing is asked for. An unknown name is a ``ConfigError`` listing the valid ones.
"""

from __future__ import annotations

from ..config.errors import ConfigError
from ..model.vocabulary import Name

__all__ = ["DEFAULT_ALGORITHM", "GPU_ONLY", "MATMULS", "Algorithm", "AlltoallAlgorithm", "BroadcastAlgorithm",
           "GemmAlgorithm", "GemvAlgorithm", "KernelKind", "ReduceAlgorithm", "algorithms", "choice",
           "kernel_kind"]

GPU_ONLY = ("grouped-gemm", "attention", "decode-attention", "elementwise", "allgather", "reducescatter")
"""The kinds only a GPU runs (``kernels.gpu.registry``; the wafer's are ``KernelKind``): here, beside the
wafer's kinds, so that a command's parser can name them without loading the GPU kernels."""


class KernelKind(Name):
    """What a kernel computes (docs/model.md §10)."""

    GEMM = "gemm"  # C[M×N] = A[M×K] · B[K×N]
    GEMV = "gemv"  # y[1×N] = x[1×K] · W[K×N]
    REDUCE = "reduce"  # every PE's values summed at PE (0, 0)
    ALLREDUCE = "allreduce"  # ... and the sum on every PE
    BROADCAST = "broadcast"  # PE (0, 0)'s values to every PE
    ALLTOALL = "alltoall"  # a share of every PE's values to every other PE of its row, then of its column


class GemmAlgorithm(Name):
    """GEMM schedules (``gemm.py``, §10.3)."""

    SUMMA = "summa"  # panels multicast along rows and down columns, any rectangle
    CANNON = "cannon"  # skew, then one-place shifts with wrap-around (square grids)
    MESHGEMM = "meshgemm"  # Cannon on the folded ring: shifts of at most 2 hops (square grids; WaferLLM)
    # Cerebras' weight-streaming matmul (``stream.py``, §10.7): activations resident, the weights' rows
    # streamed down the columns, partial sums reduced around each row; any rectangle
    STREAM = "stream"
    STREAM_DW = "stream-dw"  # its weight gradient: dY along the rows, partial sums down the columns, out


class GemvAlgorithm(Name):
    """GEMV schedules (``gemv.py``, §10.4): how each row allreduces its partial sums."""

    PIPELINE = "pipeline"  # the vendor's: a chain reduce along the row and a multicast back
    MESHGEMV = "meshgemv"  # WaferLLM's: its centred two-level K-tree allreduce (``ktree``) along the row


class ReduceAlgorithm(Name):
    """Reduce trees over a line of PEs (``lines.py``, §10.2), and the ring, which only an allreduce runs."""

    CHAIN = "chain"  # i → i − 1
    STAR = "star"  # every PE straight to the root
    TREE = "tree"  # recursive halving: i → i − lowbit(i)
    TWO_PHASE = "two-phase"  # chains inside groups of ⌈√P⌉ PEs, then a chain over the group roots
    RING = "ring"  # reduce-scatter and all-gather on a folded ring: not a tree, leaves the sum everywhere
    # WaferLLM's allreduce: two chains converging on the centre of each group, the same over the group
    # roots to the line's centre, a multicast both ways; three phases, one after the other (allreduce only)
    KTREE = "ktree"


class BroadcastAlgorithm(Name):
    # one route from PE (0, 0), copied by the routers along row 0 and down every column
    MULTICAST = "multicast"


class AlltoallAlgorithm(Name):
    TRANSPOSE = "transpose"  # the row transpose, then the column's


Algorithm = GemmAlgorithm | GemvAlgorithm | ReduceAlgorithm | BroadcastAlgorithm | AlltoallAlgorithm

MATMULS = frozenset({KernelKind.GEMM, KernelKind.GEMV})
"""The kinds that take a shape M × K × N; the collectives take wavelets per PE instead."""

_TREES = tuple(a for a in ReduceAlgorithm if a not in (ReduceAlgorithm.RING, ReduceAlgorithm.KTREE))
_ALGORITHMS: dict[KernelKind, tuple[Algorithm, ...]] = {
    KernelKind.GEMM: tuple(GemmAlgorithm), KernelKind.GEMV: tuple(GemvAlgorithm), KernelKind.REDUCE: _TREES,
    KernelKind.ALLREDUCE: tuple(ReduceAlgorithm), KernelKind.BROADCAST: tuple(BroadcastAlgorithm),
    KernelKind.ALLTOALL: tuple(AlltoallAlgorithm)}

DEFAULT_ALGORITHM: dict[KernelKind, Algorithm] = {
    # SUMMA runs on any rectangle (Cannon and MeshGEMM need a square grid) and a new shape simulates in
    # under a millisecond (theirs ~0.1 s on a 750-PE side, the skew's link loads). Not the fastest on a
    # square grid: MeshGEMM is (§10.3), so ask for it there.
    KernelKind.GEMM: GemmAlgorithm.SUMMA,
    # MeshGEMV is WaferLLM's, the decode GEMV the serving model runs (``inference.gemv``); its two-level
    # tree takes about 2√Q dependent steps over a row of Q PEs where the vendor's chain takes Q − 1.
    KernelKind.GEMV: GemvAlgorithm.MESHGEMV,
    # The chain is Luczynski et al.'s baseline, B + 6(P − 1) cycles, the reduce docs/validation.md checks
    # against their closed form; it needs two colours, and each link carries one child's stream at a time.
    KernelKind.REDUCE: ReduceAlgorithm.CHAIN,
    # The reduce's default and one multicast back, so that an allreduce compares with its reduce.
    KernelKind.ALLREDUCE: ReduceAlgorithm.CHAIN,
    KernelKind.BROADCAST: BroadcastAlgorithm.MULTICAST,  # the only one
    KernelKind.ALLTOALL: AlltoallAlgorithm.TRANSPOSE,  # the only one
}


def kernel_kind(name: str) -> KernelKind:
    """The kind named ``name`` (a member, or its plain string). Raises ``ConfigError`` at ``kind``."""
    try:
        return KernelKind(name)
    except ValueError:
        raise ConfigError(f"expected one of {', '.join(KernelKind)}, got \"{name}\"", path="kind") from None


def algorithms(kind: str) -> tuple[Algorithm, ...]:
    """The algorithms ``kind`` runs, in the order ``--help`` and the error messages list them: as their
    enum declares them, the simplest schedule first (SUMMA before the square-grid shifts, the vendor's
    chain before WaferLLM's tree, the reduce trees before the ring). The default need not be the first:
    ``DEFAULT_ALGORITHM``. Raises ``ConfigError`` for an unknown kind."""
    return _ALGORITHMS[kernel_kind(kind)]


def choice(kind: str, algorithm: str | None = None) -> tuple[KernelKind, Algorithm]:
    """``(kind, algorithm)`` as members; ``algorithm`` None or empty: the kind's default. Raises
    ``ConfigError`` at ``kind`` or ``algorithm`` listing the valid names."""
    k = kernel_kind(kind)
    if not algorithm:
        return k, DEFAULT_ALGORITHM[k]
    for a in _ALGORITHMS[k]:
        if a == algorithm:
            return k, a
    raise ConfigError(f"expected one of {', '.join(_ALGORITHMS[k])} for {k}, got \"{algorithm}\"",
                      path="algorithm")
