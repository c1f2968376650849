"""An MoE layer's expert dispatch and combine on a serving stage's grid (docs/model.md §11.8): an iteration's
tokens to the regions of their experts and back, timed by the flow model training times its dispatch with
(``fabric.DispatchModel``: the mesh, the expert placement, link loads along XY paths, bytes per expert).

The stage's grid is a mesh (``dispatch_mesh``: the coarsest block of PEs, up to ``BLOCK`` a side, at which
each of the grid's experts gets a tile of its own) tiled by ``fabric.placement.place`` with one tile per
expert the grid holds (training's grid placement). Before the experts the tokens sit spread over the grid
(a GEMV leaves its output on every PE of a row), so each expert's bytes go from every node in proportion
to its PEs (``fabric.dispatch_traffic``); combine is the same bytes back. An expert's bytes are its
tokens × hidden size × bytes per value. Cycles.

* **Balanced routing**: ``tokens`` spread evenly, each expert taking tokens · top_k / experts of them (a
  mean, not whole tokens), kept by token count (``balanced``).
* **Sampled routing** (``drawn``): the tokens each expert drew, one vector a call (a new draw each time:
  nothing kept). With the
  experts over G grids (``inference.moe.expert_grids``) each grid dispatches its own experts' tokens at once,
  so the slowest grid's dispatch counts; every grid's is timed as the first's (the tokens that came from
  the first grid on a trip, ``moe_serving``, are spread over it as the first grid's are).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...config.specs import HardwareSpec, ModelSpec
from ...fabric.dispatch import DispatchModel
from ...fabric.mesh import INJECT, LINKS_PER_NODE, Mesh
from ...fabric.placement import Placement, place
from ...model.serving import experts_per_grid

__all__ = ["BLOCK", "StageDispatch", "dispatch_mesh"]

BLOCK = 64
"""The coarsest mesh node serving's dispatch is timed on, in PEs a side: a node of a 755 × 1,170 grid
of 128 experts' tiles then is about a tile, so each call of the model is a few numpy operations on about
1,300 links (at training's 16, about 21,000: 50 times longer, an iteration at a time)."""


def dispatch_mesh(hw: HardwareSpec, rows: int, cols: int, experts: int) -> tuple[Mesh, Placement]:
    """The mesh of a ``rows`` × ``cols`` grid and its placement of ``experts`` tiles, at the coarsest power
    of two up to ``BLOCK`` PEs a node side at which every expert has a tile of its own (a grid of fewer PEs
    than experts: one PE a node, experts sharing tiles round-robin)."""
    for size in (BLOCK >> i for i in range(BLOCK.bit_length())):
        mesh = Mesh(hw, rows, cols, size)
        placement = place(mesh, experts)
        if len(placement.regions) == experts:
            break
    return mesh, placement


@lru_cache(maxsize=16)
def _models(hw: HardwareSpec, rows: int, cols: int,
            experts: int) -> tuple[Mesh, tuple[DispatchModel, DispatchModel]]:
    """The mesh and the (dispatch, combine) models of a grid, built once per process for the last few
    shapes (the mapper costs many stages of a few shapes)."""
    mesh, placement = dispatch_mesh(hw, rows, cols, experts)
    return mesh, DispatchModel.pair(mesh, placement)


@lru_cache(maxsize=16)
def _hops_per_byte(hw: HardwareSpec, rows: int, cols: int, experts: int) -> float:
    """PE hops per byte of a balanced dispatch's wavelets (``StageDispatch.wavelet_hops``): its bytes over
    the mesh's links (ramps aside), each node hop ``block`` PE hops, in wavelets; the loads grow with the
    bytes, so one vector's sum serves every count."""
    mesh, models = _models(hw, rows, cols, experts)
    y = np.ones(experts)
    load = models[0].link_load(y).reshape(-1, LINKS_PER_NODE)[:, :INJECT].sum()
    return float(load) / float(y.sum()) * mesh.block / mesh.wavelet_bytes


class StageDispatch:
    """One stage's dispatch and combine (see the module's docstring): ``balanced(tokens, reverse)`` and
    ``drawn(counts, reverse)`` in cycles, ``wavelet_hops(tokens)`` the PE hops of a balanced one's
    wavelets (for its energy)."""

    def __init__(self, hw: HardwareSpec, rows: int, cols: int, model: ModelSpec, grids: int) -> None:
        self.per_grid = experts_per_grid(model.experts, grids)
        self._key = (hw, rows, cols, self.per_grid)
        self.mesh, self.models = _models(*self._key)
        self.placement = self.models[0].placement
        self.token_bytes = float(model.hidden_size * model.bytes_per_value)
        self.share = model.top_k / model.experts  # an expert's tokens per token, spread evenly
        self._balanced: dict[tuple[float, bool], float] = {}

    def balanced(self, tokens: float, reverse: bool = False) -> float:
        """Cycles to send ``tokens`` tokens to their experts (``reverse``: their results back), each expert
        taking tokens · top_k / experts of them."""
        key = (tokens, reverse)
        c = self._balanced.get(key)
        if c is None:
            y = np.full(self.per_grid, tokens * self.share * self.token_bytes)
            c = self._balanced[key] = self.models[reverse].cycles_whole(y)
        return c

    def drawn(self, counts: tuple[int, ...], reverse: bool = False) -> float:
        """Cycles to send each expert e its ``counts[e]`` tokens (every expert of the stage, grid by grid in
        order; ``reverse``: back): the slowest grid's."""
        y = np.asarray(counts, dtype=np.float64) * self.token_bytes
        grids = -(-len(y) // self.per_grid)
        if grids > 1:
            y = np.concatenate([y, np.zeros(grids * self.per_grid - len(y))]).reshape(grids, self.per_grid)
            return max(self.models[reverse].cycles_whole(g) for g in y)
        return self.models[reverse].cycles_whole(y)

    def wavelet_hops(self, tokens: float) -> float:
        """PE hops of the wavelets a balanced dispatch (or combine: the same loads reversed) of ``tokens``
        tokens makes."""
        return tokens * self.share * self.per_grid * self.token_bytes * _hops_per_byte(*self._key)
