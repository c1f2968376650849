"""An MoE layer served over several grids (docs/model.md §11.8): what a decode token's trips to the
grids its experts are on cost, and, with sampled routing, how that varies token by token and how
evenly the grids and experts are used.

A stage of MoE layers spans G grids (``sim.programs.mapping``; expert parallelism): grid 0 holds the layers'
attention, router, shared expert and the first ⌈E/G⌉ experts of each layer, grid g the next ⌈E/G⌉.
A token's hidden vector goes from grid 0 to each further grid that holds one of its experts, and that
grid's summed result comes back (H values each way, the move a stage's hand-off makes: the fabric on
one wafer, the I/O links and the interconnect between wafers). The trips leave grid 0 one after
another (they share its edge, or its wafer's I/O), so a token pays the sum of the trips of the grids
it reaches; the experts' GEMVs run at once on their regions, every grid's as long as one expert's
(each expert has a region of its own), so which experts a token draws changes only which grids it
reaches. Cycles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...config.specs import ModelSpec
from ...model.routing import draw_with, popularity, region_load
from ...model.serving import experts_per_grid
from ..programs.mapping import Stage
from ..programs.program import ServeBatches

__all__ = ["BatchExperts", "Draw", "balanced_trips", "grid_trips", "stage_experts"]

Move = Callable[[tuple[int, tuple[int, int]], int], float]
"""Cycles to move ``values`` from a stage's first grid to the grid at (wafer, origin)."""


def grid_trips(stage: Stage, values: int, move: Move) -> np.ndarray:
    """A token's trip to each of the stage's grids and back (``[grids]`` cycles): 0 to its first,
    2 × the move of ``values`` to each further one."""
    return np.array([0.0, *(2.0 * move(place, values) for place in stage.expert_grids)])


def balanced_trips(trips: np.ndarray, grids: int) -> float:
    """The trips to the first ``grids`` − 1 further grids (a balanced decode token's k experts reach
    min(k, G) grids, grid 0 the first of them, the nearest further grids next, in slot order; a prefill
    reaches all G)."""
    return float(trips[1:min(grids, len(trips))].sum())


class BatchExperts:
    """Sampled routing under continuous batching (docs/model.md §11.8): one stage's MoE layers, each with
    its popularity drawn once for the run (uniform, or Zipf with its ranks permuted), and each decode
    iteration's b tokens drawing their k distinct experts in every layer then, in the stage's order of
    iterations (one generator a stage, so both executors draw the same). An expert is its own region and
    the experts of a layer run at once, so a layer's expert kernels take the busiest expert's tokens
    (``Draw.loads``) where balanced routing takes ⌈b·k / E⌉; the dispatch and combine move each expert's
    drawn tokens (``Draw.counts``); with the experts over G grids a token goes to the further grids its
    experts are on, and only those (``Draw.reach``). Over the run it counts each expert's draws per layer
    and the (token, layer) pairs reaching each grid (``use``)."""

    def __init__(self, model: ModelSpec, layers: int, alpha: float | None, rng: np.random.Generator,
                 grids: int = 1) -> None:
        self.experts, self.top_k, self.layers, self.rng = model.experts, model.top_k, layers, rng
        with np.errstate(divide="ignore"):  # an underflowed weight: log 0 = −inf, never drawn
            self.log_p = [np.log(popularity(model.experts, model.top_k, alpha, rng)) for _ in range(layers)]
        self.grids, self.per_grid = grids, experts_per_grid(model.experts, grids)
        self.counts = np.zeros((layers, model.experts), dtype=np.int64)
        self.reached = np.zeros(grids, dtype=np.int64)  # (token, layer) pairs with an expert on each grid

    def loads(self, tokens: int) -> Draw:
        """``tokens`` decode tokens' experts in each of the stage's MoE layers, drawn (``Draw``)."""
        out, reach, counts, most = [], [], None, -1
        for i, log_p in enumerate(self.log_p):
            picks = draw_with(log_p, self.top_k, tokens, self.rng)
            c = np.bincount(picks.ravel(), minlength=self.experts)
            self.counts[i] += c
            out.append(int(c.max()))
            if out[-1] > most:
                counts, most = c, out[-1]
            if self.grids > 1:
                touched = np.zeros((tokens, self.grids), dtype=bool)
                touched[np.arange(tokens)[:, None], picks // self.per_grid] = True
                reached = touched.sum(axis=0)
                self.reached += reached
                reach.append(tuple(int(n) for n in reached[1:]))
            else:
                self.reached[0] += tokens
        return Draw(tuple(out), tuple(counts.tolist()) if counts is not None else (), tuple(reach))

    def use(self) -> tuple[tuple[float, ...], float]:
        """The share of the (token, MoE layer) pairs drawn with an expert on each grid, and the busiest
        expert's draws over the mean in the busiest layer (``routing.region_load``, an expert its own
        region); zeros before any draw."""
        pairs = int(self.counts.sum()) // self.top_k if self.top_k else 0
        share = tuple(float(u) for u in self.reached / max(pairs, 1))
        if not pairs:
            return share, 0.0
        E = self.experts
        return share, float(region_load(self.counts.astype(float), np.arange(E), np.ones(E), E).max())


@dataclass(frozen=True, eq=False)
class Draw:
    """One decode iteration's experts under sampled routing (``BatchExperts.loads``): ``loads`` the busiest
    expert's tokens in each of the stage's MoE layers, in order; ``counts`` every expert's tokens in the
    layer whose busiest expert has the most (the first of them), at which every MoE layer's dispatch and
    combine are timed (``expert_dispatch.StageDispatch.drawn``: one layer's vector through the fabric
    model an iteration, not each layer's, to keep a run fast; docs/model.md §11.8); ``reach``, with the
    experts over G grids, each MoE layer's tokens reaching grid 1 … G − 1 (empty on one grid)."""

    loads: tuple[int, ...]
    counts: tuple[int, ...]
    reach: tuple[tuple[int, ...], ...] = ()


def stage_experts(op: ServeBatches) -> list[BatchExperts | None]:
    """With sampled routing, each stage's ``BatchExperts`` (None for a stage of dense layers, and for every
    stage under balanced routing), each drawing from its own generator spawned from the run's routing
    stream (the seed's second spawned generator, as the one-request pipeline's), new at every call: an
    executor's own."""
    if op.routing is None:
        return [None] * len(op.stages)
    alpha, seed = op.routing
    rngs = np.random.default_rng(seed).spawn(2)[1].spawn(len(op.stages))
    out: list[BatchExperts | None] = []
    for work, rng in zip(op.stages, rngs, strict=True):
        moe = sum(1 for i in work.stage.layers if not op.model.is_dense(i))
        out.append(BatchExperts(op.model, moe, alpha, rng, work.stage.grids) if moe else None)
    return out
