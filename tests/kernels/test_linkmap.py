"""Every kernel's link map (wsesim.kernels.linkmap): wavelets over each directed mesh link out of each PE
(east, west, south, north) over the whole kernel, on tiny8 (fp16: 2 values a wavelet; fp32: 1). The
summary a result reports (busiest link, links used, wavelet-hops) is the map's; the collectives' maps
are checked against the flow fidelity's routing of the same streams; a few maps are derived by hand."""

from __future__ import annotations

import numpy as np
import pytest

from wsesim.config.loader import load_hardware
from wsesim.fabric.flow import link_loads
from wsesim.fabric.mesh import EAST, LINKS_PER_NODE, NORTH, SOUTH, WEST, Mesh
from wsesim.kernels import run_kernel
from wsesim.kernels.kinds import KernelKind, algorithms
from wsesim.kernels.lines import ring_order, topology

HW = load_hardware("tiny8")
GRIDS = [(2, 2), (4, 4), (1, 8), (8, 1), (3, 5)]
CASES = [(kind, algorithm) for kind in KernelKind for algorithm in algorithms(kind)]


def run(kind: str, grid: tuple[int, int], algorithm: str, b: int = 3):
    shape = {"gemm": (8, 16, 8), "gemv": (1, 16, 16)}.get(kind)
    return run_kernel(HW, kind, *grid, dtype="fp16" if shape else "fp32", algorithm=algorithm, shape=shape,
                      wavelets=b)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize(("kind", "algorithm"), CASES)
def test_the_summary_is_the_maps(kind: str, algorithm: str, grid: tuple[int, int]) -> None:
    """The reported max, links used and wavelet-hops equal the expanded map's; no load on a link that
    leaves the grid; every kernel loads some link but Cannon and MeshGEMM on a non-square grid (not
    run) and a GEMV on one column (each row's allreduce is over one PE)."""
    r = run(kind, grid, algorithm)
    load = r.link_map.load
    assert load.shape == (*grid, 4)
    s = r.links
    assert (s.max_wavelets, s.links_used, s.wavelet_hops) == (load.max(), np.count_nonzero(load), load.sum())
    assert not load[:, -1, EAST].any() and not load[:, 0, WEST].any()
    assert not load[-1, :, SOUTH].any() and not load[0, :, NORTH].any()
    idle = (grid[0] != grid[1] and algorithm in ("cannon", "meshgemm")) or (kind == "gemv" and grid[1] == 1)
    assert (s.wavelet_hops > 0) != idle
    assert np.array_equal(r.link_map.busiest, load.max(axis=-1))


def _flow(grid: tuple[int, int], src: list[int], dst: list[int], w: list[float]) -> np.ndarray:
    mesh = Mesh.from_hardware(HW, "pe", grid)
    loads = link_loads(mesh, np.array(src), np.array(dst), np.array(w, dtype=np.float64))
    return loads.reshape(-1, LINKS_PER_NODE)[:, :4].reshape(*grid, 4)


def _streams(kind: str, algorithm: str, rows: int, cols: int, b: int) -> tuple[list[int], ...]:
    """The collective's streams as (src, dst, wavelets) node ids, written out independently of the kernels'
    line arithmetic: trees child → parent, ring edges, all pairs, and the multicast as one message along
    row 0 plus one down each column."""
    src: list[int] = []
    dst: list[int] = []
    w: list[float] = []
    if algorithm == "ktree":  # every row's tree toward its centre and the multicast both ways, then every column's
        for n, node, lines in ((cols, lambda k, i: k * cols + i, rows), (rows, lambda k, i: i * cols + k, cols)):
            parent = topology(algorithm, n)[0]
            root = int(np.flatnonzero(parent < 0)[0])
            for k in range(lines if n > 1 else 0):
                for i in range(n):
                    if parent[i] >= 0:
                        src, dst, w = src + [node(k, i)], dst + [node(k, int(parent[i]))], w + [b]
                for end in {0, n - 1} - {root}:
                    src, dst, w = src + [node(k, root)], dst + [node(k, end)], w + [b]
        return src, dst, w
    if kind in ("reduce", "allreduce") and algorithm != "ring":
        row_parent, col_parent = topology(algorithm, cols)[0], topology(algorithm, rows)[0]
        for r in range(rows):
            for c in range(1, cols):
                src, dst, w = src + [r * cols + c], dst + [r * cols + int(row_parent[c])], w + [b]
        for r in range(1, rows):
            src, dst, w = src + [r * cols], dst + [int(col_parent[r]) * cols], w + [b]
    if kind == "broadcast" or (kind == "allreduce" and algorithm != "ring"):
        src, dst, w = src + [0], dst + [cols - 1], w + [b]
        for c in range(cols):
            src, dst, w = src + [c], dst + [(rows - 1) * cols + c], w + [b]
    if algorithm == "ring":
        for n, node, lines in ((cols, lambda k, i: k * cols + i, rows), (rows, lambda k, i: i * cols + k, cols)):
            order = ring_order(n)
            for k in range(lines if n > 1 else 0):
                for i in range(n):
                    src, dst = src + [node(k, order[i])], dst + [node(k, order[(i + 1) % n])]
                    w.append(2 * (n - 1) * -(-b // n))
    if kind == "alltoall":
        for n, node, lines in ((cols, lambda k, i: k * cols + i, rows), (rows, lambda k, i: i * cols + k, cols)):
            for k in range(lines):
                for i in range(n):
                    for j in range(n):
                        if i != j:
                            src, dst, w = src + [node(k, i)], dst + [node(k, j)], w + [-(-b // n)]
    return src, dst, w


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize(("kind", "algorithm"), [c for c in CASES if c[0] not in ("gemm", "gemv")])
def test_collective_maps_equal_the_flow_fidelitys_routing(kind: str, algorithm: str, grid: tuple[int, int]) -> None:
    r = run(kind, grid, algorithm, b=5)
    assert np.array_equal(r.link_map.load, _flow(grid, *_streams(kind, algorithm, *grid, 5)))


def test_maps_by_hand() -> None:
    """1×8, B = 1 (fp32). Chain reduce: every west link out of PE 1 … 7 carries one wavelet: (1, 7, 7).
    Binary tree (1→0, 2→0, 3→2, 4→0, 5→4, 6→4, 7→6): the link out of x carries the streams with
    parent < x ≤ child: x = 1: 1, 2, 4; x = 2: 2, 4; x = 3: 3, 4; x = 4: 4; x = 5: 5, 6; x = 6: 6;
    x = 7: 7 → [0, 3, 2, 2, 1, 2, 1, 1], 12 = Σ lowbit. Chain allreduce: those 7 west links and the
    multicast's 7 east links, one wavelet each: (1, 14, 14)."""
    west = run_kernel(HW, "reduce", 1, 8, dtype="fp32", algorithm="chain").link_map.load[0, :, WEST]
    assert west.tolist() == [0, 1, 1, 1, 1, 1, 1, 1]
    tree = run_kernel(HW, "reduce", 1, 8, dtype="fp32", algorithm="tree").link_map.load[0, :, WEST]
    assert tree.tolist() == [0, 3, 2, 2, 1, 2, 1, 1]
    s = run_kernel(HW, "allreduce", 1, 8, dtype="fp32", algorithm="chain").links
    assert (s.max_wavelets, s.links_used, s.wavelet_hops) == (1, 14, 14)


def test_gemm_and_gemv_maps_by_hand() -> None:
    """8×8×8 fp16 on 4×4 (blocks 2×2 = 2 wavelets). SUMMA: 4 steps, panel s owned by column (and row) s,
    2 wavelets a panel: the east link out of column c carries the panels of owners ≤ c (c ≤ 2):
    2, 4, 6, 0; west out of c those of owners ≥ c (c ≥ 1): 0, 6, 4, 2; the same south and north.
    Busiest 6; all 48 links; 4 rows × 24 × 2 directions = 192.
    Cannon: the skew moves line i's block j to (j − i) mod 4: line 1 east [1, 1, 1, 0] (0 → 3), west
    [0, 1, 1, 1]; line 2 east [1, 2, 1, 0] (0 → 2, 1 → 3), west [0, 1, 2, 1]; line 3 east [1, 1, 1, 0],
    west [0, 1, 1, 1] (3 → 0): 20 block-hops; then 3 shifts, each j → j − 1 with 0 → 3 wrapping east:
    every east link out of 0 … 2 and west link out of 1 … 3 one block, 18 a line. Row 2's east link out
    of column 1: 2 + 3 blocks = 10 wavelets, the busiest; (20 + 4 · 18) · 2 wavelets · 2 (A and B) = 368.
    MeshGEMV 1×16×16 on 4×4 (2 wavelets a row; its K-tree: groups of 2 with roots at 1 and 3, the line's
    at 3: 0 → 1, 2 → 3, 1 → 3 over 2 hops): east [1, 1, 2, 0] streams, west (the multicast from 3 to 0)
    [0, 1, 1, 1]: busiest 4, 24 links, 4 · 7 · 2 = 56."""
    s = run_kernel(HW, "gemm", 4, 4, dtype="fp16", algorithm="summa", shape=(8, 8, 8))
    load = s.link_map.load
    assert load[2, :, EAST].tolist() == [2, 4, 6, 0] and load[3, :, WEST].tolist() == [0, 6, 4, 2]
    assert load[:, 1, SOUTH].tolist() == [2, 4, 6, 0] and load[:, 0, NORTH].tolist() == [0, 6, 4, 2]
    assert (s.links.max_wavelets, s.links.links_used, s.links.wavelet_hops) == (6, 48, 192)
    c = run_kernel(HW, "gemm", 4, 4, dtype="fp16", algorithm="cannon", shape=(8, 8, 8))
    assert c.link_map.load[2, :, EAST].tolist() == [8, 10, 8, 0]
    assert c.link_map.load[:, 2, SOUTH].tolist() == [8, 10, 8, 0]
    assert (c.links.max_wavelets, c.links.links_used, c.links.wavelet_hops) == (10, 48, 368)
    g = run_kernel(HW, "gemv", 4, 4, dtype="fp16", algorithm="meshgemv", shape=(1, 16, 16))
    assert g.link_map.load[1, :, WEST].tolist() == [0, 2, 2, 2] and g.link_map.load[3, :, EAST].tolist() == [2, 2, 4, 0]
    assert (g.links.max_wavelets, g.links.links_used, g.links.wavelet_hops) == (4, 24, 56)
