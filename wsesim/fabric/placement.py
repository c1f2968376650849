"""Expert placement (docs/model.md §6): the wafer tiled in a near-square grid of (almost) equal
rectangles, one per expert (experts share tiles round-robin when more experts than tiles fit), taken in
the order a strategy gives (``PLACEMENTS``: grid, snake, random). Tiles are whole nodes on a ``Mesh``,
whole PEs on a ``HardwareSpec``. Randomness only from the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config.errors import ConfigError, InternalError
from ..config.specs import HardwareSpec
from .mesh import Mesh, Region


@dataclass(frozen=True)
class Placement:
    """Where each phase runs, in PE coordinates.

    ``attention`` is the whole usable rectangle: in weight streaming every layer runs on all PEs.
    ``regions`` are the distinct expert tiles in placement order; expert ``e`` runs on
    ``regions[expert_region_index[e]]`` (also ``experts[e]``). A tile holds at least one node, so with
    more experts than tiles fit, experts share tiles round-robin (expert ``e`` on tile ``e mod tiles``).
    """

    strategy: str
    attention: Region
    regions: tuple[Region, ...]
    expert_region_index: tuple[int, ...]

    @property
    def experts(self) -> tuple[Region, ...]:
        """One region per expert (shared tiles repeat)."""
        return tuple(self.regions[i] for i in self.expert_region_index)


def _grid_order(gr: int, gc: int, rng: np.random.Generator | None) -> list[int]:
    """Tiles in row-major order."""
    return list(range(gr * gc))


def _snake_order(gr: int, gc: int, rng: np.random.Generator | None) -> list[int]:
    """Tiles in boustrophedon order: even tile rows left to right, odd ones right to left, so that
    consecutive experts are always neighbours."""
    return [i * gc + (j if i % 2 == 0 else gc - 1 - j) for i in range(gr) for j in range(gc)]


def _random_order(gr: int, gc: int, rng: np.random.Generator | None) -> list[int]:
    """Tiles in an order drawn from ``rng`` (the run's seeded generator: same seed, same placement)."""
    if rng is None:
        raise InternalError("random placement needs a numpy Generator (rng) from the run's seed")
    return [int(t) for t in rng.permutation(gr * gc)]


PLACEMENTS = {"grid": _grid_order, "snake": _snake_order, "random": _random_order}
"""Placement strategies by name: each maps a ``gr × gc`` grid of tiles to the order experts take them."""


def _tile_grid(rows: int, cols: int, experts: int) -> tuple[int, int]:
    """Tile rows × tile cols for ``experts`` on a ``rows × cols`` node grid: the most tiles (at most
    ``experts``, at least one node each) that form a full grid, then the factor pair whose tiles are
    closest to square."""
    for tiles in range(min(experts, rows * cols), 0, -1):
        pairs = [(g, tiles // g) for g in range(1, tiles + 1)
                 if tiles % g == 0 and g <= rows and tiles // g <= cols]
        if pairs:
            return min(pairs, key=lambda p: (abs(np.log((rows / p[0]) / (cols / p[1]))), p))
    raise AssertionError("unreachable: one tile always fits")


def place(mesh_or_hw: Mesh | HardwareSpec, experts: int, strategy: str = "grid",
          rng: np.random.Generator | None = None, *, tiles: int | None = None) -> Placement:
    """Tile the mesh in a near-square grid of (almost) equal rectangles and give them to ``experts``.

    On a ``Mesh`` the tiles are whole nodes (block-aligned); on a ``HardwareSpec`` whole PEs of the full
    wafer. ``strategy`` is a key of ``PLACEMENTS``; ``rng`` is needed by ``"random"``. Raises
    ``ConfigError`` for an unknown strategy or a non-positive expert count. ``tiles`` caps the number
    of tiles (default: one per expert; 1 puts every expert on the whole wafer).
    """
    if strategy not in PLACEMENTS:
        raise ConfigError(f"expected one of {', '.join(PLACEMENTS)}, got {strategy!r}", path="placement")
    if not isinstance(experts, (int, np.integer)) or isinstance(experts, bool) or experts <= 0:
        raise ConfigError(f"expected a positive integer, got {experts!r}", path="experts")
    if isinstance(mesh_or_hw, HardwareSpec):
        pe_rows, pe_cols, k = mesh_or_hw.mesh.rows, mesh_or_hw.mesh.cols, 1
    else:
        pe_rows, pe_cols, k = mesh_or_hw.pe_rows, mesh_or_hw.pe_cols, mesh_or_hw.block
    rows, cols = -(-pe_rows // k), -(-pe_cols // k)
    gr, gc = _tile_grid(rows, cols, int(tiles or experts))
    # node boundaries split as evenly as integers allow, then converted to PE rows/cols
    rb = [min(k * (i * rows // gr), pe_rows) for i in range(gr + 1)]
    cb = [min(k * (j * cols // gc), pe_cols) for j in range(gc + 1)]
    grid = [Region(rb[i], cb[j], rb[i + 1] - rb[i], cb[j + 1] - cb[j]) for i in range(gr) for j in range(gc)]
    regions = tuple(grid[t] for t in PLACEMENTS[strategy](gr, gc, rng))
    return Placement(strategy, Region(0, 0, pe_rows, pe_cols), regions,
                     tuple(e % len(regions) for e in range(int(experts))))
