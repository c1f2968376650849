"""A cluster of wafers in data parallel (docs/model.md §9): the broadcast tree that carries every weight
chunk from MemoryX to the N wafers, and the reduce tree that sums their N gradient streams on the way
back. Simulated time is in clock cycles, sizes in bytes.

The tree (``Tree``): MemoryX's port feeds a tree of broadcast-reduce nodes (SwarmX) of ``fan_out``
children each, ``depth = ceil(log_fan_out N)`` levels deep, whose leaves are the wafers' I/O links. Every
port carries ``link_bandwidth`` per direction; every node adds ``latency`` each way. One system has no
tree: its link goes straight to MemoryX, as a single wafer's always has.

* **Cut-through**, not store-and-forward per chunk: a node forwards a chunk as its bytes arrive (SwarmX
  nodes reduce "at line-rate"), so a chunk crosses the tree in ``depth · latency`` plus its own
  serialisation once, ``bytes / rate``, at the slowest port on the path: ``rate = min(link_bandwidth,
  io.bandwidth)``. (Store-and-forward would add ``bytes / rate`` per level: seconds for a large chunk.)
* **Broadcast**: MemoryX sends each chunk once; every node copies it to its ``fan_out`` children, so all
  N wafers receive it at the same cycle. A chunk leaves MemoryX when its root port is free and when every
  wafer has room for it (credit-based flow control: the room is reserved on the wafer when the chunk
  leaves the root, since it must be there when the bytes arrive): that is the single wafer's rule, with
  ``depth · latency`` between a chunk's last byte leaving MemoryX and arriving.
* **Reduce**: each wafer sends its gradients up its link as a single wafer does; every node adds its
  children's streams element by element as they arrive, so the sum of a gradient reaches MemoryX
  ``depth · latency`` after its last byte left the wafers. The step ends when the last reduced gradient
  has arrived; MemoryX then steps the optimizer (not timed, as for one wafer).

**Lock-step by symmetry.** Every wafer runs the same plan on its own share of the batch, so one simulated
wafer plus the tree is the whole cluster. This is exact when the wafers' steps are identical: dense layers
always, and MoE layers because every system is given the same routing draw (wsesim routes once). With
independent draws per system, the slowest system's experts would pace the broadcast (its staging buffer
frees room last) and the reduce (its gradients arrive last); the shortcut then misses the spread of the
per-system step times and is optimistic by it.

The fast engine uses the closed forms (``Tree.latency``, ``Tree.rate``); the reference engine runs the
tree as SimPy processes (``executors.relay``), one per level, and the tests hold the two to the same cycles.
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
