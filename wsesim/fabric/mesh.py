"""The wafer's mesh at a chosen granularity (docs/model.md §6): nodes, directed links and routes.

A *node* is one PE (granularity ``"pe"``) or a K×K block of PEs (``"block:K"``); blocks on the last
row or column of the wafer may be partial. Every node has six directed links, numbered
``node * 6 + direction`` (``EAST, WEST, SOUTH, NORTH, INJECT, EJECT``): the four to its neighbours and
the two ramps of its router (core → fabric, fabric → core). A mesh link between two blocks stands for
as many parallel PE links as PEs on the shared side (K, fewer for a partial block); a block's ramps
stand for all its PEs' ramps. One PE link carries ``fabric.link_bytes_per_cycle`` bytes (one wavelet)
per cycle per direction, so a node-level link carries ``parallel × link_bytes_per_cycle`` bytes per cycle.

Timing never needs the networkx graph (``Mesh.graph`` is built on first use): link state lives in
numpy arrays indexed by link number, so flow timing covers the full 750 × 994 wafer.
Expert regions are placed on the mesh by ``wsesim.fabric.placement``.
Units: sizes in bytes, time in clock cycles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..config.errors import ConfigError, InternalError
from ..config.specs import HardwareSpec, parse_granularity

if TYPE_CHECKING:
    import networkx as nx

EAST, WEST, SOUTH, NORTH, INJECT, EJECT = range(6)
DIRECTIONS = ("east", "west", "south", "north", "inject", "eject")
LINKS_PER_NODE = 6
ROUTINGS = ("xy", "yx")
_STEP = {EAST: (0, 1), WEST: (0, -1), SOUTH: (1, 0), NORTH: (-1, 0)}
_DIRECTION_OF = {step: d for d, step in _STEP.items()}


def check_routing(routing: str) -> str:
    """Return ``routing`` if it is a known dimension order, else raise ``ConfigError`` listing them."""
    if routing not in ROUTINGS:
        raise ConfigError(f"expected one of {', '.join(ROUTINGS)}, got {routing!r}", path="routing")
    return routing


@dataclass(frozen=True)
class Region:
    """A rectangle of PEs, in PE coordinates: rows ``row0 .. row0+rows-1``, cols ``col0 .. col0+cols-1``."""

    row0: int
    col0: int
    rows: int
    cols: int

    def __post_init__(self) -> None:
        if self.rows <= 0 or self.cols <= 0 or self.row0 < 0 or self.col0 < 0:
            raise InternalError(f"expected a non-empty rectangle at non-negative coordinates, got {self}")

    @property
    def pes(self) -> int:
        return self.rows * self.cols

    def overlaps(self, other: Region) -> bool:
        return (self.row0 < other.row0 + other.rows and other.row0 < self.row0 + self.rows
                and self.col0 < other.col0 + other.cols and other.col0 < self.col0 + self.cols)


@dataclass(frozen=True)
class Route:
    """A message's path: ``nodes`` from source to destination; ``links`` the directed links it holds in
    order (inject at the source, the mesh links, eject at every receiver); ``receivers`` the nodes that
    take the message off the fabric (the destination, or every node after the source for a multicast)."""

    nodes: tuple[int, ...]
    links: tuple[int, ...]
    receivers: tuple[int, ...]

    @property
    def hops(self) -> int:
        return len(self.nodes) - 1


@dataclass(frozen=True, eq=False)
class Mesh:
    """The wafer (or a sub-rectangle of it) as a grid of nodes, with per-link capacities and latencies.

    Attributes: ``pe_rows × pe_cols`` PEs, ``block`` PEs per node side, ``rows × cols`` nodes;
    ``node_pes`` (PEs per node, by node id), ``link_parallel`` (PE links per directed link, 0 where a
    link does not exist, by link number), ``link_bytes_per_cycle``; ``hop_cycles`` (latency of one
    node-to-node hop: ``block × hop_latency``, the PEs a wavelet crosses between block centres) and
    ``injection_cycles`` (both ramps of a path, ``fabric.latency(0)``, charged at its start).
    """

    hw: HardwareSpec
    pe_rows: int
    pe_cols: int
    block: int = 1
    node_pe_rows: np.ndarray = field(init=False, repr=False)
    node_pe_cols: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("pe_rows", "pe_cols", "block"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"expected a positive integer, got {value!r}", path=name)
        k = self.block
        rows, cols = -(-self.pe_rows // k), -(-self.pe_cols // k)
        object.__setattr__(self, "node_pe_rows", np.minimum(k, self.pe_rows - k * np.arange(rows)))
        object.__setattr__(self, "node_pe_cols", np.minimum(k, self.pe_cols - k * np.arange(cols)))

    @classmethod
    def from_hardware(cls, hw: HardwareSpec, granularity: str = "pe",
                      shape: tuple[int, int] | None = None) -> Mesh:
        """The mesh of ``hw`` at ``granularity`` (``"pe"`` or ``"block:K"``); ``shape`` = (PE rows, PE cols)
        of a sub-mesh with the same link parameters. Raises ``ConfigError`` for a bad granularity or a
        shape that is empty or larger than the wafer."""
        block = parse_granularity(granularity)
        pe_rows, pe_cols = shape if shape is not None else (hw.mesh.rows, hw.mesh.cols)
        if not (0 < pe_rows <= hw.mesh.rows and 0 < pe_cols <= hw.mesh.cols):
            raise ConfigError(f"expected a sub-mesh of at most {hw.mesh.rows} x {hw.mesh.cols} PEs "
                              f"({hw.name}), got {pe_rows} x {pe_cols}", path="mesh")
        return cls(hw, int(pe_rows), int(pe_cols), block)

    # sizes ---------------------------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return len(self.node_pe_rows)

    @property
    def cols(self) -> int:
        return len(self.node_pe_cols)

    @property
    def nodes(self) -> int:
        return self.rows * self.cols

    @property
    def pes(self) -> int:
        return self.pe_rows * self.pe_cols

    @property
    def granularity(self) -> str:
        return "pe" if self.block == 1 else f"block:{self.block}"

    @property
    def hop_cycles(self) -> float:
        return self.block * self.hw.fabric.hop_latency_cycles

    @property
    def injection_cycles(self) -> float:
        """Both ramps of a path, charged at its start: a path of d node hops then takes
        ``fabric.latency(d · block)`` in all (``injection_cycles + d · hop_cycles``)."""
        return self.hw.fabric.latency(0)

    @property
    def wavelet_bytes(self) -> float:
        return self.hw.fabric.link_bytes_per_cycle

    @property
    def colour_budget(self) -> int:
        """Routes a node may carry: ``colours`` per PE router; a block's K rows (or columns) of routers
        each carry their own, so a block node is allowed ``colours × K`` (a coarse bound)."""
        return self.hw.fabric.colours * self.block

    @cached_property
    def node_pes(self) -> np.ndarray:
        """PEs per node, indexed by node id (int64, shape ``(nodes,)``)."""
        return np.outer(self.node_pe_rows, self.node_pe_cols).ravel()

    # nodes ---------------------------------------------------------------------------------------------
    def node_id(self, r: int | np.ndarray, c: int | np.ndarray) -> int | np.ndarray:
        return r * self.cols + c

    def node_rc(self, node: int) -> tuple[int, int]:
        r, c = divmod(int(node), self.cols)
        return r, c

    def node_of_pe(self, pe_row: int | np.ndarray, pe_col: int | np.ndarray) -> int | np.ndarray:
        """The node holding PE (``pe_row``, ``pe_col``); vectorised over arrays."""
        return (pe_row // self.block) * self.cols + pe_col // self.block

    def region_nodes(self, region: Region) -> tuple[np.ndarray, np.ndarray]:
        """Node ids that hold PEs of ``region`` (row-major) and how many of its PEs each holds."""
        if region.row0 + region.rows > self.pe_rows or region.col0 + region.cols > self.pe_cols:
            raise InternalError(f"{region} lies outside the {self.pe_rows} x {self.pe_cols} mesh")

        def span(start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
            k = self.block
            idx = np.arange(start // k, (start + n - 1) // k + 1)
            return idx, np.minimum((idx + 1) * k, start + n) - np.maximum(idx * k, start)

        r, nr = span(region.row0, region.rows)
        c, nc = span(region.col0, region.cols)
        return (r[:, None] * self.cols + c[None, :]).ravel(), np.outer(nr, nc).ravel()

    # links ---------------------------------------------------------------------------------------------
    @cached_property
    def link_parallel(self) -> np.ndarray:
        """PE links per directed link (int64, shape ``(nodes * 6,)``); 0 where the link leaves the mesh."""
        par = np.zeros((self.rows, self.cols, LINKS_PER_NODE), dtype=np.int64)
        pr, pc = self.node_pe_rows[:, None], self.node_pe_cols[None, :]
        par[:, :-1, EAST] = np.broadcast_to(pr, (self.rows, self.cols))[:, :-1]
        par[:, 1:, WEST] = np.broadcast_to(pr, (self.rows, self.cols))[:, 1:]
        par[:-1, :, SOUTH] = np.broadcast_to(pc, (self.rows, self.cols))[:-1, :]
        par[1:, :, NORTH] = np.broadcast_to(pc, (self.rows, self.cols))[1:, :]
        par[:, :, INJECT] = par[:, :, EJECT] = pr * pc
        return par.reshape(-1)

    @cached_property
    def link_bytes_per_cycle(self) -> np.ndarray:
        """Bandwidth of each directed link in bytes per cycle (``parallel × link_bytes_per_cycle``)."""
        return self.link_parallel * self.wavelet_bytes

    def link_id(self, node: int, direction: int) -> int:
        return node * LINKS_PER_NODE + direction

    def link_ends(self, link: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """(from (r, c), to (r, c)) of a directed link; both ends are the node itself for a ramp."""
        node, d = divmod(int(link), LINKS_PER_NODE)
        r, c = self.node_rc(node)
        dr, dc = _STEP.get(d, (0, 0))
        return (r, c), (r + dr, c + dc)

    def link_name(self, link: int) -> str:
        """A readable name: ``"(3, 4)->(3, 5)"``, or ``"inject at (3, 4)"`` for a ramp."""
        (a, b), d = self.link_ends(link), int(link) % LINKS_PER_NODE
        return f"{DIRECTIONS[d]} at {a}" if d in (INJECT, EJECT) else f"{a}->{b}"

    # routes --------------------------------------------------------------------------------------------
    def route(self, src: int, dst: int, routing: str = "xy") -> Route:
        """Dimension-ordered unicast route. ``"xy"``: along the source's row to the destination's column,
        then along that column; ``"yx"``: column first. A message to its own node has no route (no links)."""
        check_routing(routing)
        (r0, c0), (r1, c1) = self.node_rc(src), self.node_rc(dst)
        corner = (r0, c1) if routing == "xy" else (r1, c0)
        path = _line((r0, c0), corner)[:-1] + _line(corner, (r1, c1))
        return self._route(path, receivers=(path[-1],) if len(path) > 1 else ())

    def multicast_route(self, src: int, dst: int) -> Route:
        """A row or column multicast from ``src`` to ``dst`` (same row or same column): every node after the
        source takes the message off the fabric as the head passes. Raises ``ConfigError`` otherwise."""
        (r0, c0), (r1, c1) = self.node_rc(src), self.node_rc(dst)
        if r0 != r1 and c0 != c1:
            raise InternalError(f"a multicast runs along one row or column, got {(r0, c0)} -> {(r1, c1)}")
        path = _line((r0, c0), (r1, c1))
        return self._route(path, receivers=tuple(path[1:]))

    def _route(self, path: list[tuple[int, int]], receivers: tuple[tuple[int, int], ...]) -> Route:
        nodes = tuple(r * self.cols + c for r, c in path)
        if len(nodes) == 1:
            return Route(nodes, (), ())
        ejecting = {r * self.cols + c for r, c in receivers}
        links = [nodes[0] * LINKS_PER_NODE + INJECT]
        for i in range(len(path) - 1):
            (ra, ca), (rb, cb) = path[i], path[i + 1]
            links.append(nodes[i] * LINKS_PER_NODE + _DIRECTION_OF[(rb - ra, cb - ca)])
            if nodes[i + 1] in ejecting:
                links.append(nodes[i + 1] * LINKS_PER_NODE + EJECT)
        return Route(nodes, tuple(links), tuple(n for n in nodes if n in ejecting))

    # graph ---------------------------------------------------------------------------------------------
    @cached_property
    def graph(self) -> nx.DiGraph:
        """The mesh as a networkx DiGraph, built on first use. Nodes are ``(r, c)`` with ``id``, ``pes``,
        ``sram_bytes``, ``flops_per_cycle``; each directed edge has ``link`` (its number), ``links``
        (parallel PE links), ``bytes_per_cycle`` and ``latency_cycles``."""
        # local: keeps networkx out of fabric.mesh's import
        import networkx as nx

        g = nx.DiGraph(granularity=self.granularity, block=self.block)
        pes = self.node_pes
        sram, flops = self.hw.pe.sram_bytes, self.hw.flops_per_cycle_per_pe
        for n in range(self.nodes):
            g.add_node(self.node_rc(n), id=n, pes=int(pes[n]), sram_bytes=float(pes[n] * sram),
                       flops_per_cycle=int(pes[n] * flops))
        par, bw = self.link_parallel, self.link_bytes_per_cycle
        for link in np.flatnonzero(par):
            if link % LINKS_PER_NODE < INJECT:
                a, b = self.link_ends(link)
                g.add_edge(a, b, link=int(link), links=int(par[link]), bytes_per_cycle=float(bw[link]),
                           latency_cycles=self.hop_cycles)
        return g


def _line(a: tuple[int, int], b: tuple[int, int]) -> list[tuple[int, int]]:
    """Nodes from ``a`` to ``b`` inclusive along one row or column (``a`` alone if equal)."""
    (r0, c0), (r1, c1) = a, b
    if r0 == r1:
        step = 1 if c1 >= c0 else -1
        return [(r0, c) for c in range(c0, c1 + step, step)]
    step = 1 if r1 >= r0 else -1
    return [(r, c0) for r in range(r0, r1 + step, step)]
