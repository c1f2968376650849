"""Per-link load of a kernel: the wavelets each directed mesh link of the grid carries over the whole
kernel (east, west, south and north out of every PE), and the routes each PE's router holds at once
(docs/model.md §10.6).

A kernel's traffic is regular: every row of a row phase (a reduce tree, a panel multicast, a ring) loads
its east and west links alike, and every column of a column phase its south and north links. So a map
is kept as *terms*: a direction and a load that is an outer product of a per-row and a per-column
factor (``rows_w[r] · cols_w[c]``), or, where no such regularity holds (Cannon's skew, whose row i
shifts by i), a full rows × cols array. The terms are built by a closure the kernel hands over, from
the quantities its cycles came from (the topology's parents and hops, the owners of SUMMA's panels, the
ring order), and only when asked: ``summary`` needs the terms (O(rows + cols) but for the skew),
``load`` expands them to a rows × cols × 4 array (24 MB for the full WSE-2).

Along one line of n PEs, a message from ``src`` to ``dst`` loads the forward links (towards higher
index: east, or south) out of src … dst − 1, or the backward links out of dst + 1 … src (``line_loads``);
its route touches the routers src … dst, both ends included (``line_routes``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..fabric.mesh import EAST, NORTH, SOUTH, WEST


@dataclass(frozen=True)
class LinkSummary:
    """Wavelets over the kernel's links, summed over the whole kernel: the busiest directed link, how
    many links carry anything (N), the wavelet-hops (E), and E / N."""

    max_wavelets: float = 0.0
    links_used: int = 0
    wavelet_hops: float = 0.0

    @property
    def mean_wavelets(self) -> float:
        return self.wavelet_hops / self.links_used if self.links_used else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"max_wavelets": self.max_wavelets, "links_used": self.links_used,
                "wavelet_hops": self.wavelet_hops, "mean_wavelets": self.mean_wavelets}


Term = tuple[int, np.ndarray, np.ndarray | None]
"""(direction, rows_w, cols_w): load rows_w[r] · cols_w[c]; or (direction, a rows × cols array, None)."""


def line_loads(n: int, src: np.ndarray, dst: np.ndarray,
               weight: np.ndarray | float = 1.0) -> tuple[np.ndarray, ...]:
    """(forward, backward) loads out of each of n PEs on a line: forward[x] = Σ weight of the messages with
    src ≤ x < dst (the link x → x + 1), backward[x] = Σ weight with dst < x ≤ src (the link x → x − 1)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    w = np.broadcast_to(np.asarray(weight, dtype=np.float64), src.shape)
    fwd, bwd = dst > src, dst < src
    forward = np.cumsum(np.bincount(src[fwd], w[fwd], n + 1) - np.bincount(dst[fwd], w[fwd], n + 1))[:n]
    backward = np.cumsum(np.bincount(dst[bwd] + 1, w[bwd], n + 1)
                         - np.bincount(src[bwd] + 1, w[bwd], n + 1))[:n]
    return forward, backward


def line_routes(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Routes at each of n routers on a line: the messages whose path src … dst (ends included) touches it."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    return np.cumsum(np.bincount(lo, minlength=n + 1) - np.bincount(hi + 1, minlength=n + 1))[:n]


def tree_messages(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of a reduce tree over a line: every PE but the root sends to its parent."""
    child = np.flatnonzero(np.asarray(parent) >= 0)
    return child, np.asarray(parent)[child]


def allreduce_line_loads(n: int, parent: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """(forward, backward) loads of an allreduce along a line of n PEs, ``b`` wavelets a PE: every PE's to
    its parent, toward the root, then the sum multicast from the root to both ends."""
    fwd, bwd = line_loads(n, *tree_messages(parent), b)
    root, x = int(np.flatnonzero(parent < 0)[0]), np.arange(n)
    return fwd + b * ((x >= root) & (x < n - 1)), bwd + b * ((x <= root) & (x > 0))


def ones(n: int) -> np.ndarray:
    return np.ones(n)


def unit(n: int, i: int = 0) -> np.ndarray:
    out = np.zeros(n)
    out[i] = 1.0
    return out


def row_terms(rows_w: np.ndarray, forward: np.ndarray, backward: np.ndarray) -> list[Term]:
    """East and west terms of a row phase (``forward``/``backward`` over the columns)."""
    return [(EAST, rows_w, forward), (WEST, rows_w, backward)]


def col_terms(forward: np.ndarray, backward: np.ndarray, cols_w: np.ndarray) -> list[Term]:
    """South and north terms of a column phase (``forward``/``backward`` over the rows)."""
    return [(SOUTH, forward, cols_w), (NORTH, backward, cols_w)]


def multicast_terms(rows: int, cols: int, wavelets: float) -> list[Term]:
    """One multicast from PE (0, 0): east along row 0, then south down every column."""
    east = wavelets * (np.arange(cols) < cols - 1)
    south = wavelets * (np.arange(rows) < rows - 1)
    return [(EAST, unit(rows), east), (SOUTH, south, ones(cols))]


@dataclass(frozen=True, eq=False)
class LinkMap:
    """Wavelets over every directed mesh link of a rows × cols grid, formed when first asked."""

    rows: int
    cols: int
    build: Callable[[], Sequence[Term]] = tuple

    @cached_property
    def terms(self) -> tuple[Term, ...]:
        return tuple(t for t in self.build() if np.any(t[1]) and (t[2] is None or np.any(t[2])))

    def _direction(self, d: int) -> np.ndarray:
        out = np.zeros((self.rows, self.cols))
        for direction, a, b in self.terms:
            if direction == d:
                out += a if b is None else np.outer(a, b)
        return out

    @cached_property
    def load(self) -> np.ndarray:
        """rows × cols × 4: wavelets out of each PE, east, west, south, north (``fabric.mesh``'s order)."""
        return np.stack([self._direction(d) for d in (EAST, WEST, SOUTH, NORTH)], axis=-1)

    @property
    def busiest(self) -> np.ndarray:
        """rows × cols: each PE's busiest outgoing link."""
        return self.load.max(axis=-1)

    @cached_property
    def summary(self) -> LinkSummary:
        """The busiest link, the links used and the wavelet-hops, from the terms: a direction with one
        outer-product term (the usual case) without expanding it; else that direction's array."""
        peak, used, total = 0.0, 0, 0.0
        for d in (EAST, WEST, SOUTH, NORTH):
            mine = [(a, b) for direction, a, b in self.terms if direction == d]
            if len(mine) == 1 and mine[0][1] is not None:
                a, b = mine[0]
                peak = max(peak, float(a.max() * b.max()))
                used += int(np.count_nonzero(a)) * int(np.count_nonzero(b))
                total += float(a.sum() * b.sum())
            elif mine:
                arr = self._direction(d)
                peak, used, total = (max(peak, float(arr.max())), used + int(np.count_nonzero(arr)),
                                     total + float(arr.sum()))
        return LinkSummary(peak, used, total)
