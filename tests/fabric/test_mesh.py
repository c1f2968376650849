"""The mesh (wsesim.fabric.mesh): granularity, link capacities, routes, the lazy graph, regions and placement."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.errors import ConfigError, InternalError
from wsesim.config.loader import load_hardware
from wsesim.config.specs import HardwareSpec, parse_granularity
from wsesim.fabric.mesh import EAST, EJECT, INJECT, NORTH, SOUTH, WEST, Mesh, Region
from wsesim.fabric.placement import PLACEMENTS, place


@pytest.fixture(scope="module")
def wse2() -> HardwareSpec:
    return load_hardware("wse2")


# ------------------------------------------------------------------------------------------- granularity


@pytest.mark.parametrize(("text", "block"), [("pe", 1), ("block:1", 1), ("block:16", 16)])
def test_granularity_parses(text: str, block: int) -> None:
    assert parse_granularity(text) == block


@pytest.mark.parametrize("text", ["block", "block:0", "block:-2", "blk:4", "PE", "block:4x4", ""])
def test_bad_granularity_is_a_config_error_naming_the_forms(text: str) -> None:
    with pytest.raises(ConfigError, match=r'expected "pe" or "block:<K>"'):
        parse_granularity(text)


def test_pe_mesh_of_tiny8(tiny8: HardwareSpec) -> None:
    m = Mesh.from_hardware(tiny8)
    assert (m.rows, m.cols, m.nodes, m.block) == (8, 8, 64, 1)
    assert m.node_pes.sum() == 64 and set(m.node_pes) == {1}
    # 1 cycle a hop; both ramps charged at injection, fabric.latency(0) = 2·T_R = 2·2
    assert m.hop_cycles == 1 and m.injection_cycles == 4 and m.wavelet_bytes == 4


def test_block_mesh_with_partial_blocks(tiny8: HardwareSpec) -> None:
    """8 × 8 PEs in 3 × 3 blocks: node rows/cols of 3, 3, 2 PEs; the corner node holds 2 × 2 PEs."""
    m = Mesh.from_hardware(tiny8, "block:3")
    assert (m.rows, m.cols) == (3, 3)
    assert list(m.node_pe_rows) == [3, 3, 2]
    assert m.node_pes.reshape(3, 3).tolist() == [[9, 9, 6], [9, 9, 6], [6, 6, 4]]
    assert m.node_pes.sum() == 64
    par = m.link_parallel.reshape(3, 3, 6)
    # east link of node (2, 0) crosses the 2 PE rows of the last block row; south of (0, 2) its 2 PE cols
    assert par[2, 0, EAST] == 2 and par[0, 0, EAST] == 3 and par[0, 2, SOUTH] == 2
    # links that would leave the mesh do not exist
    assert par[0, 2, EAST] == 0 and par[0, 0, WEST] == 0 and par[0, 0, NORTH] == 0 and par[2, 0, SOUTH] == 0
    assert par[1, 1, INJECT] == par[1, 1, EJECT] == 9
    assert m.link_bytes_per_cycle.reshape(3, 3, 6)[0, 0, EAST] == 12.0  # 3 links × 4 B
    assert m.hop_cycles == 3  # a block hop crosses 3 PEs at 1 cycle each


def test_sub_mesh_keeps_the_links_and_refuses_to_outgrow_the_wafer(wse2: HardwareSpec) -> None:
    m = Mesh.from_hardware(wse2, "pe", (16, 16))
    assert (m.pe_rows, m.pe_cols, m.nodes) == (16, 16, 256)
    assert m.hop_cycles == wse2.fabric.hop_latency_cycles
    with pytest.raises(ConfigError, match="at most 750 x 994"):
        Mesh.from_hardware(wse2, "pe", (751, 10))
    with pytest.raises(ConfigError):
        Mesh.from_hardware(wse2, "pe", (0, 10))


def test_full_wafer_at_block_granularity(wse2: HardwareSpec) -> None:
    """47 × 63 blocks of 16 × 16 PEs (the last row and column partial: 750 = 46·16 + 14, 994 = 62·16 + 2)."""
    m = Mesh.from_hardware(wse2, "block:16")
    g = m.graph
    assert (m.rows, m.cols) == (47, 63)
    assert m.node_pes.sum() == 745_500
    assert g.number_of_nodes() == 47 * 63
    # directed mesh edges: 2 per neighbouring pair, (cols-1)·rows horizontal + (rows-1)·cols vertical pairs
    assert g.number_of_edges() == 2 * (62 * 47 + 46 * 63)


def test_graph_attributes(tiny8: HardwareSpec) -> None:
    m = Mesh.from_hardware(tiny8, "block:4")
    g = m.graph
    assert g.nodes[(1, 0)]["pes"] == 16
    assert g.nodes[(1, 0)]["sram_bytes"] == 16 * 48 * 1024
    assert g.nodes[(1, 0)]["flops_per_cycle"] == 16 * 8
    edge = g.edges[(0, 0), (0, 1)]
    assert edge["links"] == 4 and edge["bytes_per_cycle"] == 16.0 and edge["latency_cycles"] == 4.0  # 4 PEs at 1 cycle a hop


def test_pe_graph_of_64x64(wse2: HardwareSpec) -> None:
    g = Mesh.from_hardware(wse2, "pe", (64, 64)).graph
    assert g.number_of_nodes() == 4096 and g.number_of_edges() == 2 * 2 * 63 * 64


# ------------------------------------------------------------------------------------------------ routes


def test_xy_goes_along_the_row_first_and_yx_along_the_column(tiny8: HardwareSpec) -> None:
    m = Mesh.from_hardware(tiny8)
    src, dst = m.node_id(1, 1), m.node_id(3, 4)
    xy = m.route(src, dst, "xy")
    assert [m.node_rc(n) for n in xy.nodes] == [(1, 1), (1, 2), (1, 3), (1, 4), (2, 4), (3, 4)]
    yx = m.route(src, dst, "yx")
    assert [m.node_rc(n) for n in yx.nodes] == [(1, 1), (2, 1), (3, 1), (3, 2), (3, 3), (3, 4)]
    assert xy.hops == yx.hops == 5
    assert xy.links[0] == m.link_id(src, INJECT) and xy.links[-1] == m.link_id(dst, EJECT)
    assert xy.links[1] == m.link_id(src, EAST) and xy.links[4] == m.link_id(m.node_id(1, 4), SOUTH)
    assert xy.receivers == (dst,)


def test_route_westward_and_northward(tiny8: HardwareSpec) -> None:
    m = Mesh.from_hardware(tiny8)
    r = m.route(m.node_id(5, 5), m.node_id(2, 3))
    assert [m.link_ends(lk) for lk in r.links[1:-1]] == [((5, 5), (5, 4)), ((5, 4), (5, 3)), ((5, 3), (4, 3)),
                                                          ((4, 3), (3, 3)), ((3, 3), (2, 3))]


def test_route_to_self_uses_no_link(tiny8: HardwareSpec) -> None:
    r = Mesh.from_hardware(tiny8).route(9, 9)
    assert r.links == () and r.hops == 0 and r.receivers == ()


def test_multicast_route_ejects_at_every_node_after_the_source(tiny8: HardwareSpec) -> None:
    m = Mesh.from_hardware(tiny8)
    r = m.multicast_route(m.node_id(2, 1), m.node_id(2, 4))
    assert [m.node_rc(n) for n in r.receivers] == [(2, 2), (2, 3), (2, 4)]
    assert sum(lk % 6 == EJECT for lk in r.links) == 3
    column = m.multicast_route(m.node_id(5, 0), m.node_id(3, 0))
    assert [m.node_rc(n) for n in column.receivers] == [(4, 0), (3, 0)]
    with pytest.raises(InternalError, match="one row or column"):
        m.multicast_route(m.node_id(0, 0), m.node_id(1, 1))


def test_unknown_routing_lists_the_valid_ones(tiny8: HardwareSpec) -> None:
    with pytest.raises(ConfigError, match="xy, yx"):
        Mesh.from_hardware(tiny8).route(0, 5, "zigzag")


# ----------------------------------------------------------------------------------------------- regions


def test_region_nodes_count_the_overlap(tiny8: HardwareSpec) -> None:
    m = Mesh.from_hardware(tiny8, "block:3")
    nodes, pes = m.region_nodes(Region(2, 2, 4, 5))  # PE rows 2..5, cols 2..6
    assert [m.node_rc(n) for n in nodes] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert pes.tolist() == [1, 3, 1, 3, 9, 3] and pes.sum() == 20
    with pytest.raises(InternalError, match="outside"):
        m.region_nodes(Region(6, 6, 3, 3))


# --------------------------------------------------------------------------------------------- placement


def _check_tiling(p, pe_rows: int, pe_cols: int) -> None:
    regions = p.regions
    for i, a in enumerate(regions):
        assert a.row0 + a.rows <= pe_rows and a.col0 + a.cols <= pe_cols
        for b in regions[i + 1:]:
            assert not a.overlaps(b)
    assert sum(r.pes for r in regions) == pe_rows * pe_cols
    assert p.attention == Region(0, 0, pe_rows, pe_cols)


@pytest.mark.parametrize("strategy", sorted(PLACEMENTS))
@pytest.mark.parametrize("experts", [1, 4, 6, 8, 128])
def test_placement_tiles_the_wafer(wse2: HardwareSpec, strategy: str, experts: int) -> None:
    p = place(wse2, experts, strategy, np.random.default_rng(0))
    _check_tiling(p, 750, 994)
    assert len(p.regions) == experts and len(p.experts) == experts
    assert sorted(p.expert_region_index) == list(range(experts))


def test_grid_is_near_square_and_row_major(wse2: HardwareSpec) -> None:
    """128 experts on 750 × 994: 8 tile rows × 16 tile cols (tiles ~94 × 62, aspect 1.5) beats 16 × 8
    (47 × 124, aspect 2.6); tile rows are 93 or 94 PEs, tile cols 62 or 63."""
    p = place(wse2, 128, "grid")
    assert {r.rows for r in p.regions} == {93, 94} and {r.cols for r in p.regions} == {62, 63}
    assert [(r.row0, r.col0) for r in p.regions[:2]] == [(0, 0), (0, 62)]
    assert p.regions[16].row0 > 0 and p.regions[16].col0 == 0


def test_snake_reverses_every_other_tile_row(tiny8: HardwareSpec) -> None:
    grid, snake = place(tiny8, 4, "grid"), place(tiny8, 4, "snake")
    assert [(r.row0, r.col0) for r in grid.regions] == [(0, 0), (0, 4), (4, 0), (4, 4)]
    assert [(r.row0, r.col0) for r in snake.regions] == [(0, 0), (0, 4), (4, 4), (4, 0)]


def test_random_is_deterministic_per_seed_and_differs_across_seeds(wse2: HardwareSpec) -> None:
    a = place(wse2, 64, "random", np.random.default_rng(7))
    b = place(wse2, 64, "random", np.random.default_rng(7))
    c = place(wse2, 64, "random", np.random.default_rng(8))
    assert a == b
    assert a.regions != c.regions
    assert set(a.regions) == set(c.regions) == set(place(wse2, 64, "grid").regions)


def test_more_experts_than_nodes_share_regions(tiny8: HardwareSpec) -> None:
    """128 experts on a 2 × 2 block mesh: 4 tiles, experts round-robin, 32 per tile."""
    p = place(Mesh.from_hardware(tiny8, "block:4"), 128, "grid")
    assert len(p.regions) == 4 and len(p.experts) == 128
    assert p.expert_region_index[:6] == (0, 1, 2, 3, 0, 1)
    assert np.bincount(p.expert_region_index).tolist() == [32] * 4
    assert p.experts[5] == p.regions[1]
    _check_tiling(p, 8, 8)


def test_placement_on_a_block_mesh_is_block_aligned(wse2: HardwareSpec) -> None:
    m = Mesh.from_hardware(wse2, "block:16")
    p = place(m, 128, "grid")
    _check_tiling(p, 750, 994)
    for r in p.regions:
        assert r.row0 % 16 == 0 and r.col0 % 16 == 0


def test_unknown_placement_and_bad_counts_are_config_errors(tiny8: HardwareSpec) -> None:
    with pytest.raises(ConfigError, match="grid, snake, random"):
        place(tiny8, 4, "spiral")
    with pytest.raises(ConfigError, match="positive integer"):
        place(tiny8, 0)
    with pytest.raises(InternalError, match="rng"):  # the runner always passes one
        place(tiny8, 4, "random")
