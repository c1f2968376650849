"""The dispatch model's grouped passes of the flow fidelity (docs/model.md §6.4): link loads and path data
of unicast messages in groups (one group per expert region), a block of groups at a time, so that their
scratch stays tens of MB however large the traffic, with the numbers of one pass over all the messages,
bit for bit (each group's sums run over its own messages in their order). Units: bytes, cycles, hops."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .flow import _Segments
from .latency import NONE
from .mesh import LINKS_PER_NODE, Mesh

BLOCK_MESSAGES = 1 << 17
"""Messages per pass of the grouped functions: their scratch is a few hundred bytes a message, so a pass
over a block of groups holds tens of MB however large the traffic (a full-wafer dispatch to 512 regions
is 1.5 M messages)."""


def group_blocks(groups: int, messages: int, per_block: int | None = None) -> list[tuple[int, int]]:
    """Consecutive ranges [lo, hi) of ``groups`` groups, each with about ``per_block`` (by default
    ``BLOCK_MESSAGES``) of the ``messages`` when the groups are about equal (a dispatch's regions are)."""
    blocks = max(1, min(groups, -(-messages // (per_block or BLOCK_MESSAGES))))
    return [(groups * i // blocks, groups * (i + 1) // blocks) for i in range(blocks)]


def _by_block(mesh: Mesh, src: np.ndarray, dst: np.ndarray, group: np.ndarray, groups: int,
              routing: str) -> Iterator[tuple[int, int, np.ndarray | slice, _Segments]]:
    """(lo, hi, which messages, their segments) for each block of groups [lo, hi): each block's messages
    alone, in their order (a slice when the messages come sorted by group). A link's sum for a group adds
    that group's messages in the same order as one pass over all of them, so the blocks give the same
    numbers, bit for bit, with scratch for one block."""
    src, dst, group = np.asarray(src), np.asarray(dst), np.asarray(group)
    blocks = group_blocks(groups, len(src))
    ends = np.searchsorted(group, [hi for _, hi in blocks]) if np.all(group[1:] >= group[:-1]) else None
    for i, (lo, hi) in enumerate(blocks):
        if ends is not None:
            mine: np.ndarray | slice = slice(int(ends[i - 1]) if i else 0, int(ends[i]))
        else:
            mine = (group >= lo) & (group < hi) if len(blocks) > 1 else np.ones(len(src), dtype=bool)
        yield lo, hi, mine, _Segments(mesh, src[mine], dst[mine], routing, None)


def grouped_loads(mesh: Mesh, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, group: np.ndarray,
                  groups: int, routing: str = "xy") -> np.ndarray:
    """For unicast messages in ``groups`` groups: the link loads of ``weight`` per group, shape
    ``(nodes * 6, groups)`` (a link's groups side by side), computed a block of groups at a time."""
    out = np.empty((mesh.nodes * LINKS_PER_NODE, groups))
    group = np.asarray(group)
    for lo, hi, mine, segments in _by_block(mesh, src, dst, group, groups, routing):
        segments.loads(np.asarray(weight)[mine], group[mine] - lo, hi - lo, out=out[:, lo:hi])
    return out


def grouped_links(mesh: Mesh, src: np.ndarray, dst: np.ndarray, weight: np.ndarray, group: np.ndarray,
                  groups: int, routing: str = "xy",
                  longest: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``grouped_loads`` and, over all the messages together, the (u_min, key) the path latency comes
    from (``_Segments.path``; ``decode`` gives the hops the flow rule charges) and (unless ``longest`` is
    False: then 0) the most hops of any route over each link, each of shape ``(nodes * 6,)``: per block,
    then the minimum (u_min) or maximum of the blocks'. The per-group path data of chosen links comes
    from ``latency.RouteIndex``."""
    links = mesh.nodes * LINKS_PER_NODE
    loads = np.empty((links, groups))
    u_min, key, most = np.full(links, np.inf), np.full(links, NONE), np.zeros(links)
    group = np.asarray(group)
    for lo, hi, mine, segments in _by_block(mesh, src, dst, group, groups, routing):
        segments.loads(np.asarray(weight)[mine], group[mine] - lo, hi - lo, out=loads[:, lo:hi])
        u, k, h = segments.path(numbers="all" if longest else "latency")
        np.minimum(u_min, u, out=u_min)
        np.maximum(key, k, out=key)
        np.maximum(most, h, out=most)
    return loads, u_min, key, most


def grouped_longest(mesh: Mesh, src: np.ndarray, dst: np.ndarray, group: np.ndarray, groups: int,
                    routing: str = "xy") -> np.ndarray:
    """The most hops of any of the messages' routes over each directed link (0 where none), shape
    ``(nodes * 6,)``, a block of groups at a time: ``grouped_links``'s ``longest``, on its own."""
    most = np.zeros(mesh.nodes * LINKS_PER_NODE)
    for _, _, _, segments in _by_block(mesh, src, dst, np.asarray(group), groups, routing):
        np.maximum(most, segments.path(numbers="longest")[2], out=most)
    return most


def grouped_path(mesh: Mesh, src: np.ndarray, dst: np.ndarray, group: np.ndarray, groups: int,
                 routing: str = "xy") -> tuple[np.ndarray, np.ndarray]:
    """(u_min, key) of every directed link per ``group`` of unicast messages, shape ``(groups, nodes * 6)``
    each (``_Segments.path``), a block of groups at a time: what ``latency.RouteIndex`` gives for chosen
    links, for all at once."""
    links = mesh.nodes * LINKS_PER_NODE
    u_min, key = np.empty((groups, links)), np.empty((groups, links))
    group = np.asarray(group)
    for lo, hi, mine, segments in _by_block(mesh, src, dst, group, groups, routing):
        u_min[lo:hi], key[lo:hi], _ = segments.path(None, group[mine] - lo, hi - lo)
    return u_min, key
