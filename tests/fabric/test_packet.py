"""The packet fidelity (wsesim.fabric.packet) against its SimPy reference (wsesim.fabric.packet_simpy):
the same semantics, so the same cycles, to the cycle, on every pattern and mesh where both run; both of
its methods (vectorised windows, one stage at a time from a heap) and both routings.

Meshes: tiny8 at PE granularity, WSE-2's links on 16 × 16 PEs, and reduced WSE-2 meshes at block
granularity (64 × 64 at block:8; 60 × 45 at block:7, whose last row and column of blocks are partial).
"""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.loader import load_hardware
from wsesim.fabric import (
    FABRICS,
    PacketFabric,
    SimPyPacketFabric,
    Traffic,
    all_to_all,
    dispatch_traffic,
    hotspot,
    make_fabric,
    row_multicast,
    transpose,
    uniform_random,
)
from wsesim.fabric.mesh import Mesh
from wsesim.fabric.placement import place

MESHES = {
    "tiny8": ("tiny8", "pe", None),
    "16x16": ("wse2", "pe", (16, 16)),
    "64x64 block:8": ("wse2", "block:8", (64, 64)),
    "60x45 block:7": ("wse2", "block:7", (60, 45)),
}


def zipf_bytes(experts: int, per_expert: float, alpha: float = 1.2) -> np.ndarray:
    w = 1 / np.arange(1, experts + 1) ** alpha
    return per_expert * experts * w / w.sum()


def pattern(name: str, m: Mesh):
    experts = 8
    return {
        "all-to-all": lambda: all_to_all(m, 256 if m.nodes <= 64 else 64),
        "transpose": lambda: transpose(m, 1024),
        "hotspot": lambda: hotspot(m, 256),
        "uniform-random": lambda: uniform_random(m, 1024, np.random.default_rng(3)),
        "multicast": lambda: row_multicast(m, m.cols - 1, 5),
        "dispatch": lambda: dispatch_traffic(m, place(m, experts), zipf_bytes(experts, 4096.0 * m.pes / experts)),
        "combine": lambda: dispatch_traffic(m, place(m, experts), zipf_bytes(experts, 4096.0 * m.pes / experts),
                                            reverse=True),
        "uniform dispatch": lambda: dispatch_traffic(m, place(m, experts), np.full(experts, 1024.0 * m.pes)),
    }[name]()


def same(reference, fast) -> None:
    assert fast.cycles == reference.cycles
    assert fast.multicast_arrivals == reference.multicast_arrivals
    assert fast.bytes_delivered == pytest.approx(reference.bytes_delivered, rel=1e-12)
    np.testing.assert_array_equal(fast.link_load, reference.link_load)
    assert (fast.routes_per_node, fast.colours_per_node, fast.feasible) == (
        reference.routes_per_node, reference.colours_per_node, reference.feasible)


@pytest.mark.parametrize("mesh_name", sorted(MESHES))
@pytest.mark.parametrize("name", ["all-to-all", "transpose", "hotspot", "uniform-random", "multicast", "dispatch",
                                  "combine", "uniform dispatch"])
def test_packet_equals_simpy_packet(mesh_name: str, name: str) -> None:
    hw, granularity, shape = MESHES[mesh_name]
    if (mesh_name, name) == ("16x16", "all-to-all"):
        pytest.skip("65,280 messages: ~20 s in SimPy (the 8 x 8 and block cases cover all-to-all)")
    m = Mesh.from_hardware(load_hardware(hw), granularity, shape)
    traffic = pattern(name, m)
    reference = SimPyPacketFabric(m).simulate(traffic)
    assert reference.cycles > 0
    for method in ("windows", "heap"):
        same(reference, PacketFabric(m, method=method).simulate(traffic))


@pytest.mark.parametrize("granularity", ["pe", "block:3"])
def test_yx_routing_and_mixed_traffic_equal_simpy(granularity: str) -> None:
    """Random messages (some of no bytes, some to their own node, repeated pairs) with and without
    multicasts mixed in, under both routings, on a mesh of partial blocks."""
    m = Mesh.from_hardware(load_hardware("wse2"), granularity, (13, 9) if granularity == "pe" else (40, 28))
    rng = np.random.default_rng(7)
    n = 300
    src, dst = rng.integers(0, m.nodes, n), rng.integers(0, m.nodes, n)
    nbytes = rng.integers(0, 400, n) * rng.integers(0, 2, n).astype(float)
    mc = rng.random(n) < 0.3
    r, c = np.divmod(src, m.cols)
    rd, cd = np.divmod(dst, m.cols)
    dst = np.where(mc & (rng.random(n) < 0.5), r * m.cols + cd, np.where(mc, rd * m.cols + c, dst))
    for traffic in (Traffic(src, dst, nbytes), Traffic(src, dst, nbytes, mc)):
        for routing in ("xy", "yx"):
            reference = SimPyPacketFabric(m, routing).simulate(traffic)
            for method in ("windows", "heap"):
                same(reference, PacketFabric(m, routing, method=method).simulate(traffic))


def test_ties_follow_the_order_heads_were_granted() -> None:
    """Heads that reach one link in the same cycle: three messages from (0, 0) and (0, 1) toward (0, 2)
    and (0, 3), in every issue order. Which goes first decides the cycles; the SimPy reference says which,
    and the fast model agrees in every order."""
    m = Mesh.from_hardware(load_hardware("wse2"), "pe", (4, 4))
    seen = set()
    for order in ([0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]):
        traffic = Traffic(np.array([0, 0, 1])[order], np.array([3, 2, 3])[order], np.array([40.0, 8.0, 12.0])[order])
        reference = SimPyPacketFabric(m).simulate(traffic)
        seen.add(reference.cycles)
        for method in ("windows", "heap"):
            assert PacketFabric(m, method=method).simulate(traffic).cycles == reference.cycles
    assert len(seen) > 1  # the order matters here


def test_registry_and_cli_names() -> None:
    """``packet`` is the fast model, ``packet-simpy`` its reference; both are fidelities by name."""
    m = Mesh.from_hardware(load_hardware("tiny8"))
    assert isinstance(make_fabric("packet", m), PacketFabric)
    assert isinstance(make_fabric("packet-simpy", m, "yx"), SimPyPacketFabric)
    assert set(FABRICS) == {"flow", "packet", "packet-simpy"}
    with pytest.raises(ConfigError, match="auto, windows, heap"):
        PacketFabric(m, method="fastest")


def test_events_count_the_stages_granted() -> None:
    """One 3-hop message of 10 wavelets at block:2 is 2 stripes of 5 wavelets, each granted inject, three
    mesh links and eject: 10 stages; 4 (2·T_R) + 3 block hops·2 (2 PEs at 1 cycle) + (5 − 1) = 14 cycles."""
    m = Mesh.from_hardware(load_hardware("wse2"), "block:2", (8, 8))
    for method in ("windows", "heap"):
        r = PacketFabric(m, method=method).simulate(Traffic([0], [3], [40.0]))
        assert (r.cycles, r.events) == (14.0, 10)
