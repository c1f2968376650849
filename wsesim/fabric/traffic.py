"""What the fabric carries and what a fabric simulation reports: ``Traffic``, ``OuterTraffic``,
``FabricResult``, and the standard traffic patterns (docs/model.md §6).

Node ids and link numbers are those of ``wsesim.fabric.mesh.Mesh``. Sizes are bytes; times are clock cycles.
Patterns are defined per PE (``nbytes`` per source-PE/destination-PE pair) and summed onto the mesh's
nodes, so the same pattern at ``"pe"`` and ``"block:K"`` granularity moves the same bytes; a message
between two PEs of the same node stays local (it never enters the fabric).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config.errors import ConfigError, InternalError
from .colours import DIRECTION_RULE, direction_colours, over_budget
from .mesh import EAST, INJECT, LINKS_PER_NODE, NORTH, SOUTH, WEST, Mesh

GOLDEN = (np.sqrt(5.0) - 1) / 2  # 0.618…: multiples of it mod 1 spread as evenly as any sequence can


@dataclass(frozen=True)
class Traffic:
    """Messages, one per index: ``src[i]`` → ``dst[i]`` (node ids) carrying ``nbytes[i]`` bytes.

    ``multicast[i]`` (optional) marks a row or column multicast: ``src`` and ``dst`` share a row or a
    column and every node after the source receives the message as it passes. The order of the arrays
    is the order messages are issued (packet mode breaks ties by it). Lists are accepted and converted.
    """

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray
    multicast: np.ndarray | None = None

    def __post_init__(self) -> None:
        src = np.asarray(self.src, dtype=np.int64).reshape(-1)
        dst = np.asarray(self.dst, dtype=np.int64).reshape(-1)
        nbytes = np.asarray(self.nbytes, dtype=np.float64).reshape(-1)
        if not (len(src) == len(dst) == len(nbytes)):
            raise InternalError(f"expected src, dst and nbytes of one length, got {len(src)}, {len(dst)}, "
                                f"{len(nbytes)}")
        if len(nbytes) and not (np.all(np.isfinite(nbytes)) and nbytes.min() >= 0):
            raise InternalError("expected finite, non-negative message sizes (bytes)")
        object.__setattr__(self, "src", src)
        object.__setattr__(self, "dst", dst)
        object.__setattr__(self, "nbytes", nbytes)
        if self.multicast is not None:
            mc = np.asarray(self.multicast, dtype=bool).reshape(-1)
            if len(mc) != len(src):
                raise InternalError(f"expected one multicast flag per message ({len(src)}), got {len(mc)}")
            object.__setattr__(self, "multicast", mc if mc.any() else None)

    def __len__(self) -> int:
        return len(self.src)

    @property
    def is_multicast(self) -> np.ndarray:
        return self.multicast if self.multicast is not None else np.zeros(len(self.src), dtype=bool)

    def reversed(self) -> Traffic:
        """The same messages sent back (destination to source), e.g. MoE combine after dispatch."""
        return Traffic(self.dst, self.src, self.nbytes, self.multicast)

    def check(self, mesh: Mesh) -> None:
        """Raise ``ConfigError`` if a node id lies outside ``mesh`` or a multicast is not a straight line."""
        if len(self) and (min(self.src.min(), self.dst.min()) < 0
                          or max(self.src.max(), self.dst.max()) >= mesh.nodes):
            raise InternalError(f"expected node ids in 0..{mesh.nodes - 1} "
                                f"for a {mesh.rows} x {mesh.cols} mesh")
        if self.multicast is not None:
            s, d = self.src[self.multicast], self.dst[self.multicast]
            if np.any((s // mesh.cols != d // mesh.cols) & (s % mesh.cols != d % mesh.cols)):
                raise InternalError("a multicast runs along one row or column of the mesh")


@dataclass(frozen=True)
class OuterTraffic:
    """Dense traffic given as a product: node ``s`` sends ``src_weight[s] * dst_weight[d]`` bytes to every
    node ``d != s`` (all-to-all, hotspot, MoE dispatch are all of this form). The flow fidelity times it
    in O(nodes) without listing the messages; ``to_traffic`` lists them (for the packet fidelity)."""

    src_weight: np.ndarray
    dst_weight: np.ndarray

    def __post_init__(self) -> None:
        a = np.asarray(self.src_weight, dtype=np.float64).reshape(-1)
        b = np.asarray(self.dst_weight, dtype=np.float64).reshape(-1)
        if len(a) != len(b) or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))) \
                or min(a.min(), b.min()) < 0:
            raise InternalError("expected two finite, non-negative weight vectors of one length "
                                "(one per node)")
        object.__setattr__(self, "src_weight", a)
        object.__setattr__(self, "dst_weight", b)

    @property
    def messages(self) -> int:
        a, b = self.src_weight > 0, self.dst_weight > 0
        return int(a.sum()) * int(b.sum()) - int((a & b).sum())

    @property
    def bytes_total(self) -> float:
        a, b = self.src_weight, self.dst_weight
        return float(a.sum() * b.sum() - a @ b)

    def reversed(self) -> OuterTraffic:
        return OuterTraffic(self.dst_weight, self.src_weight)

    def to_traffic(self, max_messages: int = 1_000_000) -> Traffic:
        """The messages, as an all-to-all schedule: at each step every node ``s`` sends to ``s + k mod n``
        (a cyclic shift, so every node sends one message and receives one), and the shifts ``k`` are
        taken in golden-ratio order (by the fractional part of ``k·0.618…``), so consecutive steps go to
        very different distances and every cut of the mesh stays loaded throughout (taking ``k = 1, 2,
        …`` in turn sweeps from near to far and measured 10 % slower in packet mode on 8 × 8). Pairs
        with no bytes are left out. Raises ``ConfigError`` beyond ``max_messages`` messages."""
        n = len(self.src_weight)
        if self.messages > max_messages:
            raise ConfigError(f"{self.messages} messages are too many to list (limit {max_messages}); "
                              "use the flow fidelity or a smaller mesh")
        shifts = np.arange(1, n)
        shifts = shifts[np.argsort(np.modf(shifts * GOLDEN)[0], kind="stable")]
        s = np.tile(np.arange(n), n - 1)
        d = (s + np.repeat(shifts, n)) % n
        nbytes = self.src_weight[s] * self.dst_weight[d]
        keep = nbytes > 0
        return Traffic(s[keep], d[keep], nbytes[keep])


AnyTraffic = Traffic | OuterTraffic


# --------------------------------------------------------------------------------------------------- result


@dataclass(frozen=True)
class FabricResult:
    """One fabric simulation. Times in cycles, sizes in bytes.

    ``cycles``: from the first dispatch to the last wavelet delivered. ``link_load``: bytes over each
    directed link (by link number, ramps included). ``max_link_load_bytes``: bytes over the busiest PE
    link (a node-level link's load divided by its parallel PE links). ``hottest``: the busiest mesh links
    as ((r, c), (r2, c2), bytes). ``bottleneck``: the busiest link by time, ramps included.
    ``events``: events processed (stages granted in packet, SimPy events in packet-simpy, 0 in flow).
    ``multicast_arrivals``: message index → cycle each receiver got the whole message.

    Colours (``colours_per_node``, ``colour_budget``): a traffic pattern takes one colour per direction
    of travel, not one per message route (``wsesim.fabric.colours``, the rule the all-to-all kernel and
    the training step's dispatch read too). ``colours_per_node`` is the most directions of travel any
    node sees, a route counting at each node it leaves or enters by a mesh link (at most 4 for one
    pattern). Over ``colour_budget``
    (``fabric.colours`` per PE router; a block's K rows of routers each carry their own, so × K) the
    result is infeasible (``feasible=False`` and ``reason``). ``routes_per_node``, the most routes
    through one node, is reported beside it: what one colour per route would need.
    """

    mode: str
    cycles: float
    max_link_load_bytes: float
    messages: int
    events: int
    bytes_injected: float
    bytes_delivered: float
    link_load: np.ndarray = field(repr=False)
    hottest: tuple[tuple[tuple[int, int], tuple[int, int], float], ...]
    bottleneck: str
    routes_per_node: int
    colours_per_node: int
    colour_budget: int
    feasible: bool
    reason: str
    multicast_arrivals: dict[int, tuple[float, ...]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (the per-link array left out)."""
        return {
            "mode": self.mode, "cycles": self.cycles, "max_link_load_bytes": self.max_link_load_bytes,
            "messages": self.messages, "events": self.events, "bytes_injected": self.bytes_injected,
            "bytes_delivered": self.bytes_delivered, "bottleneck": self.bottleneck,
            "hottest": [{"from": list(a), "to": list(b), "bytes": v} for a, b, v in self.hottest],
            "routes_per_node": self.routes_per_node, "colours_per_node": self.colours_per_node,
            "colour_budget": self.colour_budget,
            "feasible": self.feasible, "reason": self.reason,
            "multicast_arrivals": {str(k): list(v) for k, v in self.multicast_arrivals.items()},
        }


def listed(traffic: AnyTraffic, mesh: Mesh, max_messages: int, fidelity: str, instead: str) -> Traffic:
    """``traffic`` as a checked message list for a fidelity that simulates every message; ``ConfigError``
    (naming the ``fidelity`` and what to use ``instead``) past ``max_messages``."""
    if isinstance(traffic, OuterTraffic):
        traffic = traffic.to_traffic(max_messages)
    traffic.check(mesh)
    if len(traffic) > max_messages:
        raise ConfigError(f"{len(traffic)} messages are too many for the {fidelity} (limit {max_messages}); "
                          f"use {instead}")
    return traffic


def busy_cycles(wavelet_cycles: float | np.ndarray) -> float | np.ndarray:
    """Cycles a link is busy with ``wavelet_cycles`` of load: whole wavelets, so rounded up (with a
    tolerance for summation error, so the same load gives the same answer however it was summed). Takes
    one load (returns a float) or an array of them (returns an array)."""
    x = np.asarray(wavelet_cycles, dtype=np.float64)
    busy = np.ceil(x - 1e-9 * np.maximum(x, 1.0))
    return float(busy) if busy.ndim == 0 else busy


def routes_per_node(mesh: Mesh, route_counts: np.ndarray) -> np.ndarray:
    """Routes through each node, from per-link route counts: every route enters each node of its path
    once, over a link, except at its source, where it enters over the inject ramp."""
    u = route_counts.reshape(mesh.rows, mesh.cols, LINKS_PER_NODE)
    n = u[:, :, INJECT].copy()
    n[:, 1:] += u[:, :-1, EAST]
    n[:, :-1] += u[:, 1:, WEST]
    n[1:, :] += u[:-1, :, SOUTH]
    n[:-1, :] += u[1:, :, NORTH]
    return np.rint(n).astype(np.int64).reshape(-1)


def colours_per_node(mesh: Mesh, route_counts: np.ndarray) -> np.ndarray:
    """Directions of travel (east, west, south, north) of the routes through each node, from per-link
    route counts: a direction counts at a node if a route leaves it, or enters it, by a link that way
    (one colour each, shared by all the pattern's routes: ``wsesim.fabric.colours.direction_colours``)."""
    u = route_counts.reshape(mesh.rows, mesh.cols, LINKS_PER_NODE) > 0.5
    leaving = u[:, :, [EAST, WEST, SOUTH, NORTH]]
    entering = np.zeros_like(leaving)
    entering[:, 1:, 0] = u[:, :-1, EAST]                  # from the west, heading east
    entering[:, :-1, 1] = u[:, 1:, WEST]
    entering[1:, :, 2] = u[:-1, :, SOUTH]
    entering[:-1, :, 3] = u[1:, :, NORTH]
    return direction_colours(leaving, entering).reshape(-1)


def summarise(mesh: Mesh, mode: str, *, cycles: float, link_load: np.ndarray, route_counts: np.ndarray,
              messages: int, events: int, injected: float, delivered: float,
              arrivals: dict[int, tuple[float, ...]] | None = None, top: int = 5) -> FabricResult:
    """Build a ``FabricResult`` from per-link loads and per-link route counts (shared by every fidelity)."""
    par = mesh.link_parallel
    per_pe_link = np.divide(link_load, par, out=np.zeros_like(link_load), where=par > 0)
    busiest = int(np.argmax(per_pe_link)) if len(per_pe_link) else 0
    mesh_links = np.flatnonzero((np.arange(len(link_load)) % LINKS_PER_NODE < INJECT) & (link_load > 0))
    order = mesh_links[np.argsort(-link_load[mesh_links], kind="stable")[:top]]
    hottest = tuple((*mesh.link_ends(i), float(link_load[i])) for i in order)
    routes, colours = routes_per_node(mesh, route_counts), colours_per_node(mesh, route_counts)
    worst = int(np.argmax(colours)) if len(colours) else 0
    need = int(colours[worst]) if len(colours) else 0
    budget = mesh.colour_budget
    reason = over_budget(need, budget, f"node {mesh.node_rc(worst)}", DIRECTION_RULE,
                         f"{mesh.hw.fabric.colours} colours per PE router")
    feasible = not reason
    return FabricResult(
        mode=mode, cycles=float(cycles),
        max_link_load_bytes=float(per_pe_link[busiest]) if len(per_pe_link) else 0.0,
        messages=int(messages), events=int(events), bytes_injected=float(injected),
        bytes_delivered=float(delivered),
        link_load=link_load, hottest=hottest,
        bottleneck=mesh.link_name(busiest) if link_load.any() else "",
        routes_per_node=int(routes.max(initial=0)), colours_per_node=need, colour_budget=budget,
        feasible=feasible, reason=reason, multicast_arrivals=dict(arrivals or {}))


# ------------------------------------------------------------------------------------------------- patterns


def _aggregate(mesh: Mesh, pe_src: tuple[np.ndarray, np.ndarray], pe_dst: tuple[np.ndarray, np.ndarray],
               nbytes: float) -> Traffic:
    """PE-to-PE messages of ``nbytes`` each, summed into one message per (source node, destination node)."""
    s, d = mesh.node_of_pe(*pe_src), mesh.node_of_pe(*pe_dst)
    keys, inverse = np.unique(s * mesh.nodes + d, return_inverse=True)
    total = np.bincount(inverse.reshape(-1), minlength=len(keys)) * float(nbytes)
    return Traffic(keys // mesh.nodes, keys % mesh.nodes, total)


def all_to_all(mesh: Mesh, nbytes: float) -> OuterTraffic:
    """Every PE sends ``nbytes`` to every other PE."""
    pes = mesh.node_pes.astype(np.float64)
    return OuterTraffic(pes * nbytes, pes)


def hotspot(mesh: Mesh, nbytes: float) -> OuterTraffic:
    """Every PE sends ``nbytes`` to the centre PE (row ``pe_rows // 2``, column ``pe_cols // 2``)."""
    target = np.zeros(mesh.nodes)
    target[mesh.node_of_pe(mesh.pe_rows // 2, mesh.pe_cols // 2)] = 1.0
    return OuterTraffic(mesh.node_pes.astype(np.float64) * nbytes, target)


def transpose(mesh: Mesh, nbytes: float) -> Traffic:
    """PE (r, c) sends ``nbytes`` to its mirror across the main diagonal: (c, r) on a square mesh; on an
    R × C mesh, the PE at the same relative position mirrored, (⌊c·R/C⌋, ⌊r·C/R⌋)."""
    r, c = np.divmod(np.arange(mesh.pes), mesh.pe_cols)
    rows, cols = mesh.pe_rows, mesh.pe_cols
    return _aggregate(mesh, (r, c), (c * rows // cols, r * cols // rows), nbytes)


def uniform_random(mesh: Mesh, nbytes: float, rng: np.random.Generator) -> Traffic:
    """Every PE sends ``nbytes`` to one other PE drawn uniformly from ``rng``."""
    p = mesh.pes
    src = np.arange(p)
    dst = (src + rng.integers(1, p, size=p)) % p if p > 1 else src
    return _aggregate(mesh, np.divmod(src, mesh.pe_cols), np.divmod(dst, mesh.pe_cols), nbytes)


def _along_row(mesh: Mesh, hops: int, wavelets: int, multicast: bool) -> Traffic:
    if not (0 < hops < mesh.cols):
        raise ConfigError(f"expected 1 to {mesh.cols - 1} hops along a row of this mesh, got {hops}",
                          path="hops")
    if wavelets <= 0:
        raise ConfigError(f"expected a positive number of wavelets, got {wavelets}", path="wavelets")
    return Traffic([0], [hops], [wavelets * mesh.wavelet_bytes], [multicast])


def single_message(mesh: Mesh, hops: int, wavelets: int) -> Traffic:
    """One message of ``wavelets`` wavelets from node (0, 0) to node (0, ``hops``)."""
    return _along_row(mesh, hops, wavelets, multicast=False)


def row_multicast(mesh: Mesh, hops: int, wavelets: int) -> Traffic:
    """A multicast of ``wavelets`` wavelets from node (0, 0) along row 0, reaching nodes 1..``hops``."""
    return _along_row(mesh, hops, wavelets, multicast=True)


__all__ = ["GOLDEN", "AnyTraffic", "FabricResult", "OuterTraffic", "Traffic", "all_to_all", "busy_cycles",
           "colours_per_node", "routes_per_node",
           "hotspot", "row_multicast", "single_message", "summarise", "transpose", "uniform_random"]


FABRIC_FIELDS: dict[str, tuple[str, ...]] = {
    "hardware": ("", "the hardware's name (`wsesim fabric HARDWARE`)"),
    "pattern": ("", "`--pattern`: the traffic simulated"),
    "routing": ("", "`--routing`: xy or yx dimension order", "§6.1"),
    "mesh_pe_rows": ("PEs", "rows of PEs simulated (`--mesh`, default the wafer's)", "§6.1"),
    "mesh_pe_cols": ("PEs", "columns of PEs simulated", "§6.1"),
    "mesh_granularity": ("", "`--granularity`: one node per PE, or per K × K PEs (block:K)", "§6.1"),
    "mesh_rows": ("nodes", "rows of fabric nodes", "§6.1"),
    "mesh_cols": ("nodes", "columns of fabric nodes", "§6.1"),
    "mode": ("", "`--mode`: the fidelity (flow, packet, packet-simpy)", "§6.2"),
    "cycles": ("cycles", "from the first dispatch to the last wavelet delivered", "§6.2"),
    "max_link_load_bytes": ("B", "bytes over the busiest PE link", "§6.2"),
    "messages": ("count", "messages (source-destination node pairs with bytes)"),
    "events": ("count", "events processed (stages granted in packet, SimPy events in packet-simpy, 0 in "
               "flow)"),
    "bytes_injected": ("B", "bytes the sources sent"),
    "bytes_delivered": ("B", "bytes the destinations received"),
    "bottleneck": ("", "the busiest link by time, ramps included"),
    "routes_per_node": ("count", "the most routes through one node (what one colour per route would need)",
                        "§10.6"),
    "colours_per_node": ("count", "the most directions of travel any node sees: the colours it takes",
                         "§10.6"),
    "colour_budget": ("count", "the colours a node has (`fabric.colours` per router, × K for a block)",
                      "§10.6"),
    "feasible": ("bool", "whether the colours fit the budget"),
    "reason": ("", "why not (empty when they fit)"),
    "multicast_arrivals_<i>": ("cycles", "message/multicast: the cycle each receiver of message i held it "
                               "whole, `; `-joined"),
    "seconds": ("s", "`cycles` at the hardware's clock"),
}
"""The columns of ``fabric.csv`` (``wsesim fabric --out``): the run as one row, ``FabricResult.to_dict``
flattened between the command's own keys (``cli.fabric``: hardware, pattern, routing, mesh_*, seconds);
``hottest`` is ``hottest_links.csv`` (``HOTTEST_FIELDS``). (unit, meaning[, docs/model.md section])."""

HOTTEST_FIELDS: dict[str, tuple[str, ...]] = {
    "from_row": ("", "the link's source node's row"),
    "from_col": ("", "its column"),
    "to_row": ("", "the link's destination node's row"),
    "to_col": ("", "its column"),
    "bytes": ("B", "bytes over the link"),
}
"""The columns of ``hottest_links.csv``, one row per link of the busiest, busiest first."""
