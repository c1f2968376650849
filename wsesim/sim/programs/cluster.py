"""A cluster of wafers in data parallel (docs/model.md §9, which gives the formulas and their sources): the
broadcast tree that carries every weight chunk from MemoryX to the N wafers, and the reduce tree that sums
their N gradient streams on the way back. Simulated time is in clock cycles, sizes in bytes.

The tree (``Tree``): SwarmX nodes of ``fan_out`` children each, ``depth = ceil(log_fan_out N)`` levels,
whose leaves are the wafers' I/O links (one system has none: its link goes straight to MemoryX). Nodes
forward cut-through, so a chunk or a gradient's sum crosses the tree in ``depth · latency`` plus its own
serialisation once, at ``rate = min(link_bandwidth, io.bandwidth)``. One simulated wafer plus the tree
is the whole cluster: exact when the wafers' steps are identical, as they are since every system is given
the same routing draw. The fast engine uses the closed forms (``Tree.latency``, ``Tree.rate``); the
reference engine runs the tree as SimPy processes (``executors.relay``), and the tests hold the two to
the same cycles.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...config.cluster import ClusterSpec
from ...config.specs import HardwareSpec


@dataclass(frozen=True)
class Tree:
    """The path between MemoryX and one wafer of a cluster of ``systems`` (times in cycles)."""

    systems: int
    fan_out: int
    depth: int  # broadcast-reduce nodes between MemoryX and a wafer: ceil(log_fan_out systems)
    rate: float  # bytes per cycle of the whole path: its slowest port
    hop_cycles: float  # each node's latency, each way

    @property
    def latency(self) -> float:
        """Cycles between a chunk's (or a reduced gradient's) last byte leaving one end and arriving."""
        return self.depth * self.hop_cycles


def tree_depth(systems: int, fan_out: int) -> int:
    """Levels of a tree of ``fan_out``-way nodes with at least ``systems`` leaves (0 for one system)."""
    depth, leaves = 0, 1
    while leaves < systems:
        leaves *= fan_out
        depth += 1
    return depth


def tree_for(hw: HardwareSpec, cluster: ClusterSpec) -> Tree | None:
    """The cluster's tree, or None for one system (its link goes straight to MemoryX: no tree)."""
    if cluster.systems == 1 or cluster.interconnect is None:
        return None
    net = cluster.interconnect
    rate = min(hw.io_bytes_per_cycle, net.link_bandwidth_bytes_per_s / hw.clock_hz)
    return Tree(cluster.systems, net.fan_out, tree_depth(cluster.systems, net.fan_out), rate,
                net.latency_s * hw.clock_hz)


def io_rate(hw: HardwareSpec, tree: Tree | None) -> float:
    """Bytes per cycle a wafer's weights come in and its gradients go out at: its own link, or the slower
    of its link and the tree's ports."""
    return hw.io_bytes_per_cycle if tree is None else tree.rate
