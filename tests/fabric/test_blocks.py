"""The dispatch model's memory savers give the numbers of the plain computation, bit for bit: index arrays
as narrow as their largest value allows (int32 below 2³¹, int64 from there), passes over a block of
groups at a time, and a basis put into its row order in place."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from wsesim.config.loader import load_hardware
from wsesim.fabric import DispatchModel, dispatch_traffic
from wsesim.fabric import flow as flow_module
from wsesim.fabric import grouped as grouped_module
from wsesim.fabric.dispatch import _dispatch_plan, _take_rows
from wsesim.fabric.dispatch_plan import region_plan
from wsesim.fabric.flow import _Segments
from wsesim.fabric.grouped import group_blocks, grouped_links, grouped_loads, grouped_longest, grouped_path
from wsesim.fabric.indices import INT32_LIMIT, as_index, index_dtype
from wsesim.fabric.mesh import Mesh
from wsesim.fabric.placement import place


def test_index_dtype_is_int32_below_two_to_the_31_and_int64_from_there() -> None:
    assert index_dtype(0) is np.int32
    assert index_dtype(INT32_LIMIT - 1) is np.int32
    assert index_dtype(INT32_LIMIT) is np.int64
    assert index_dtype(np.int64(2**40)) is np.int64
    # a flat index node · groups + group past 2³¹ (a PE-level mesh with thousands of groups) stays exact
    node, groups = np.array([745_000], dtype=np.int32), 4_000
    flat = as_index(node, 745_001 * groups) * groups + 3
    assert flat.dtype == np.int64 and int(flat[0]) == 2_980_000_003
    assert (as_index(node, 2_000_000) * 1_000 + 3).dtype == np.int32
    small = np.arange(5, dtype=np.int32)
    assert as_index(small, 10) is small  # no copy when it already fits


@pytest.mark.parametrize("block", [1, 2, 3, 256])
def test_take_rows_in_place_equals_the_gather(block: int) -> None:
    rng = np.random.default_rng(block)
    for n, k in ((1, 1), (9, 9), (40, 31), (200, 7), (300, 300)):
        a = rng.random((n, 5))
        rows = rng.permutation(n)[:k]
        if k == n and n > 1:
            rows[: n // 3] = np.arange(n // 3)  # some fixed points among the cycles
            rows = np.r_[rows[: n // 3], rng.permutation(np.arange(n // 3, n))]
        want = a[rows]
        got = _take_rows(a, rows, block, gather_bytes=0)  # in place, however small
        np.testing.assert_array_equal(got, want)
        assert np.shares_memory(got, a)


def test_take_rows_gathers_a_small_basis_into_a_new_array() -> None:
    a = np.arange(12.0).reshape(4, 3)
    got = _take_rows(a, np.array([2, 0]))
    np.testing.assert_array_equal(got, [[6, 7, 8], [0, 1, 2]])
    assert not np.shares_memory(got, a) and a[0, 0] == 0.0  # the source left as it was


def test_group_blocks_cover_the_groups_in_order() -> None:
    assert group_blocks(5, 10, per_block=100) == [(0, 5)]
    assert group_blocks(4, 1000, per_block=10) == [(0, 1), (1, 2), (2, 3), (3, 4)]  # never split a group
    blocks = group_blocks(512, 1_500_000, per_block=1 << 17)
    assert blocks[0][0] == 0 and blocks[-1][1] == 512 and len(blocks) == 12
    assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(blocks, blocks[1:], strict=False))


@pytest.mark.parametrize("routing", ["xy", "yx"])
def test_grouped_passes_by_block_equal_one_pass_bit_for_bit(routing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    m = Mesh.from_hardware(load_hardware("wse2"), "block:3", (20, 17))
    rng = np.random.default_rng(routing == "xy")
    n, groups = 3_000, 23
    src, dst, group = rng.integers(0, m.nodes, n), rng.integers(0, m.nodes, n), rng.integers(0, groups, n)
    weight = rng.random(n) * 1e3
    one = grouped_links(m, src, dst, weight, group, groups, routing), grouped_path(m, src, dst, group, groups, routing)
    assert len(group_blocks(groups, n)) == 1
    monkeypatch.setattr(grouped_module, "BLOCK_MESSAGES", 97)  # ~31 blocks of one group or so
    assert len(group_blocks(groups, n, grouped_module.BLOCK_MESSAGES)) == groups
    blocked = (grouped_links(m, src, dst, weight, group, groups, routing),
               grouped_path(m, src, dst, group, groups, routing))
    for want, got in zip((*one[0], *one[1]), (*blocked[0], *blocked[1]), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(grouped_loads(m, src, dst, weight, group, groups, routing), one[0][0])
    # and the sums themselves: each group's loads and the all-groups path are those of its messages alone
    segments = _Segments(m, src, dst, routing, None)
    for g in (0, groups - 1):
        np.testing.assert_allclose(one[0][0][:, g], segments.loads(np.where(group == g, weight, 0.0)), rtol=1e-12)
    for want, got in zip(segments.path(np.ones(n, dtype=bool), numbers="all"), one[0][1:], strict=True):
        np.testing.assert_array_equal(got, want)
    # the longest route alone (the dispatch model's bound, found when first needed) and the latency alone
    np.testing.assert_array_equal(grouped_longest(m, src, dst, group, groups, routing), one[0][3])
    latency = grouped_links(m, src, dst, weight, group, groups, routing, longest=False)
    for want, got in zip(one[0][:3], latency[:3], strict=True):
        np.testing.assert_array_equal(got, want)
    assert not latency[3].any()


def test_dispatch_plan_indices_are_int32_and_the_model_still_equals_flow(monkeypatch: pytest.MonkeyPatch) -> None:
    m = Mesh.from_hardware(load_hardware("wse2"), "block:4", (40, 36))
    p = place(m, 12, "random", np.random.default_rng(5))
    src, dst, region, share = _dispatch_plan(m, p)
    assert src.dtype == dst.dtype == region.dtype == np.int32 and share.dtype == np.float64
    monkeypatch.setattr(grouped_module, "BLOCK_MESSAGES", 50)  # the model built a few regions at a time
    x = np.random.default_rng(1).random(12) * 1e5
    for reverse in (False, True):
        flow = flow_module.FlowFabric(m).simulate(dispatch_traffic(m, p, x, reverse=reverse))
        model = DispatchModel(m, p, reverse=reverse)
        assert model.cycles(x)[0] == flow.cycles
        np.testing.assert_allclose(model.link_load(x), flow.link_load, rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize(("granularity", "shape", "experts", "per_block"),
                         [("block:16", None, 512, 1 << 17), ("block:16", None, 128, 20_000), ("pe", (30, 41), 12, 1),
                          ("block:3", (40, 37), 7, 2_000)])
def test_region_plan_is_the_issue_order_sorted_by_region(granularity: str, shape: tuple[int, int] | None,
                                                         experts: int, per_block: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """What the dispatch model is built from: each region's messages in their issue order, whatever the
    block of regions planned at once (``per_block`` messages: 1 gives one region a block), and whether the
    blocks are built one after the other or by two threads (each written in its place, then moved down
    over the slivers dropped before it)."""
    hw = load_hardware("wse2")
    m = Mesh.from_hardware(hw, granularity, shape) if shape else Mesh.from_hardware(hw, granularity)
    p = place(m, experts, "random", np.random.default_rng(experts))
    monkeypatch.setattr("wsesim.fabric.dispatch_plan.BLOCK_MESSAGES", per_block)
    issued = _dispatch_plan(m, p)
    by_region = np.argsort(issued[2], kind="stable")
    with ThreadPoolExecutor(max_workers=2) as pool:
        for plan in (region_plan(m, p), region_plan(m, p, pool)):
            for want, got in zip(issued, plan, strict=True):
                np.testing.assert_array_equal(got, want[by_region])
                assert got.dtype == want.dtype
    assert not np.array_equal(issued[2], issued[2][by_region])  # the two orders differ
