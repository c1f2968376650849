"""The flow rule's path latency (wsesim.fabric.latency): u_min + t* per link, from routes walked one by one,
from the vectorised route segments and from the product form; and the rule's two promises: a lone
message exact, never more than the former rule (busiest link plus the longest route anywhere)."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.loader import load_hardware
from wsesim.fabric import FlowFabric, OuterTraffic, Traffic, link_loads
from wsesim.fabric.flow import _Segments, link_busy
from wsesim.fabric.grouped import grouped_path
from wsesim.fabric.latency import NONE, RouteIndex, decode, outer_latency
from wsesim.fabric.mesh import EJECT, INJECT, LINKS_PER_NODE, Mesh


def walked(m: Mesh, src: np.ndarray, dst: np.ndarray, routing: str, multicast: np.ndarray | None = None) -> np.ndarray:
    """u_min + t* per link from each route's stages: u hops behind at each stage (inject 0; the j-th mesh
    link j − 1; a receiver's eject, the hops to it), t = h − u; t* is the largest t among the routes with
    the largest u."""
    u_min = np.full(m.nodes * LINKS_PER_NODE, np.inf)
    last: dict[int, tuple[int, int]] = {}
    for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
        if s == d:
            continue
        mc = multicast is not None and multicast[i]
        route = m.multicast_route(s, d) if mc else m.route(s, d, routing)
        behind = 0
        for link in route.links:
            kind = link % LINKS_PER_NODE
            u = 0 if kind == INJECT else behind
            if kind not in (INJECT, EJECT):
                behind += 1
            u_min[link] = min(u_min[link], u)
            last[link] = max(last.get(link, (-1, -1)), (u, route.hops - u))
    out = np.full(len(u_min), NONE)
    for link, (_, t) in last.items():
        out[link] = u_min[link] + t
    return out


def random_traffic(m: Mesh, rng: np.random.Generator, multicast: bool) -> Traffic:
    n = int(rng.integers(1, 200))
    src, dst = rng.integers(0, m.nodes, n), rng.integers(0, m.nodes, n)
    mc = None
    if multicast:
        mc = rng.random(n) < 0.4
        r, c = np.divmod(src, m.cols)
        rd, cd = np.divmod(dst, m.cols)
        dst = np.where(mc & (rng.random(n) < 0.5), r * m.cols + cd, np.where(mc, rd * m.cols + c, dst))
    return Traffic(src, dst, rng.integers(0, 3, n) * 40.0, mc)


MESHES = [("pe", (9, 13)), ("block:3", (20, 11)), ("pe", (1, 7)), ("pe", (6, 1))]


@pytest.mark.parametrize("routing", ["xy", "yx"])
@pytest.mark.parametrize(("granularity", "shape"), MESHES)
def test_segments_and_product_form_equal_routes_walked(routing: str, granularity: str, shape: tuple[int, int]) -> None:
    m = Mesh.from_hardware(load_hardware("wse2"), granularity, shape)
    rng = np.random.default_rng([routing == "xy", *shape])
    for trial in range(12):
        t = random_traffic(m, rng, multicast=trial % 3 == 2)
        live = t.nbytes > 0
        got = decode(*_Segments(m, t.src, t.dst, routing, t.multicast).path(live)[:2])
        mc = None if t.multicast is None else t.multicast[live]
        np.testing.assert_array_equal(got, walked(m, t.src[live], t.dst[live], routing, mc))
        # product traffic: every pair of an active source and an active destination
        a = rng.random(m.nodes) * (rng.random(m.nodes) < rng.random())
        b = rng.random(m.nodes) * (rng.random(m.nodes) < rng.random())
        s, d = np.divmod(np.arange(m.nodes ** 2), m.nodes)
        pair = (s != d) & (a[s] * b[d] > 0)
        np.testing.assert_array_equal(outer_latency(m, a, b, routing), walked(m, s[pair], d[pair], routing))


@pytest.mark.parametrize("routing", ["xy", "yx"])
@pytest.mark.parametrize(("granularity", "shape"), MESHES)
def test_route_index_gives_each_groups_path_and_the_longest_route_bounds_it(routing: str, granularity: str,
                                                                            shape: tuple[int, int]) -> None:
    """RouteIndex, asked for every link, and the grouped pass over all links equal the segments' (u_min,
    key) of each group's messages alone (the dispatch model's per-region latencies); the segments' longest route is the most hops of any
    route walked over the link, and no group's u_min + t* exceeds it."""
    m = Mesh.from_hardware(load_hardware("wse2"), granularity, shape)
    rng = np.random.default_rng([7, routing == "xy", *shape])
    links = np.flatnonzero(m.link_parallel > 0)
    for _ in range(6):
        n, groups = int(rng.integers(1, 300)), int(rng.integers(1, 6))
        src, dst, group = rng.integers(0, m.nodes, n), rng.integers(0, m.nodes, n), rng.integers(0, groups, n)
        segments = _Segments(m, src, dst, routing, None)
        u_min, key = RouteIndex(m, src, dst, group, groups, routing).query(links)
        all_u, all_key = grouped_path(m, src, dst, group, groups, routing)
        for g in range(groups):
            u, k, _ = segments.path(group == g)
            np.testing.assert_array_equal(u_min[:, g], u[links])
            np.testing.assert_array_equal(key[:, g], k[links])
            np.testing.assert_array_equal(all_u[g], u)
            np.testing.assert_array_equal(all_key[g], k)
        longest = np.zeros(m.nodes * LINKS_PER_NODE)
        for s, d in zip(src.tolist(), dst.tolist(), strict=True):
            if s != d:
                route = m.route(s, d, routing)
                on = list(route.links)
                longest[on] = np.maximum(longest[on], route.hops)
        np.testing.assert_array_equal(segments.path(np.ones(n, dtype=bool), numbers="longest")[2], longest)
        hops = decode(u_min.min(axis=1), key.max(axis=1))
        assert np.all(hops[hops > NONE] <= longest[links][hops > NONE])


@pytest.mark.parametrize("routing", ["xy", "yx"])
def test_flow_never_exceeds_the_former_rule(routing: str) -> None:
    """u_min + t* ≤ u* + t* = the hops of one route over the link ≤ the longest route anywhere."""
    m = Mesh.from_hardware(load_hardware("wse2"), "pe", (12, 10))
    rng = np.random.default_rng(3)
    for _ in range(20):
        t = random_traffic(m, rng, multicast=False)
        r = FlowFabric(m, routing).simulate(t)
        live = (t.nbytes > 0) & (t.src != t.dst)
        if not live.any():
            assert r.cycles == 0
            continue
        busy, _ = link_busy(m, link_loads(m, t.src, t.dst, t.nbytes, routing))
        hops = np.abs(t.src // m.cols - t.dst // m.cols) + np.abs(t.src % m.cols - t.dst % m.cols)
        former = busy.max() - 1 + m.injection_cycles + hops[live].max() * m.hop_cycles
        assert 0 < r.cycles <= former


@pytest.mark.parametrize("granularity", ["pe", "block:4"])
def test_a_lone_message_is_exact_whatever_its_route(granularity: str) -> None:
    """injection + h·hop + (L − 1), L the wavelets per parallel link, for routes of every shape."""
    m = Mesh.from_hardware(load_hardware("wse2"), granularity, (24, 20))
    rng = np.random.default_rng(0)
    for _ in range(30):
        s, d = (int(x) for x in rng.integers(0, m.nodes, 2))
        if s == d:
            continue
        nbytes = float(rng.integers(1, 5000))
        h = abs(s // m.cols - d // m.cols) + abs(s % m.cols - d % m.cols)
        lanes = min(m.link_parallel[link] for link in m.route(s, d).links)
        expected = m.injection_cycles + h * m.hop_cycles + np.ceil(nbytes / (4 * lanes)) - 1
        assert FlowFabric(m).simulate(Traffic([s], [d], [nbytes])).cycles == expected


def test_product_form_and_its_listing_time_the_same() -> None:
    m = Mesh.from_hardware(load_hardware("wse2"), "block:2", (14, 10))
    rng = np.random.default_rng(9)
    for _ in range(5):
        outer = OuterTraffic(rng.random(m.nodes) * (rng.random(m.nodes) < 0.5), rng.random(m.nodes))
        assert FlowFabric(m).simulate(outer).cycles == FlowFabric(m).simulate(outer.to_traffic()).cycles


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_range_max_is_the_largest_value_of_the_ranges_covering_each_cell(dtype: type) -> None:
    """Against the cell-by-cell maximum, empty ranges (start == stop) included: they cover no cell."""
    from wsesim.fabric.latency import EMPTY, range_max

    rng = np.random.default_rng(3)
    for _ in range(60):
        rows, width, n = int(rng.integers(1, 6)), int(rng.integers(1, 40)), int(rng.integers(1, 30))
        line, a, b = rng.integers(0, rows, n), rng.integers(0, width, n), rng.integers(0, width, n)
        lo, hi = (line * width + np.minimum(a, b)).astype(np.int32), (line * width + np.maximum(a, b)).astype(np.int32)
        w = rng.integers(-1000, 1000, (n, 2)).astype(dtype)
        want = np.full((rows * width, 2), NONE if dtype is np.float64 else EMPTY, dtype=dtype)
        for i in range(n):
            want[lo[i]:hi[i]] = np.maximum(want[lo[i]:hi[i]], w[i])
        np.testing.assert_array_equal(range_max((lo, hi), w, rows, width).reshape(-1, 2), want)
