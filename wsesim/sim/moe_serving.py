"""An MoE layer served over several grids (docs/model.md §11.8): what a decode token's trips to the
grids its experts are on cost, and, with sampled routing, how that varies token by token and how
evenly the grids and experts are used.

A stage of MoE layers spans G grids (``sim.mapping``; expert parallelism): grid 0 holds the layers'
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

from ..config.specs import ModelSpec
from ..model.routing import draw_with, popularity, region_load
from ..model.serving import experts_per_grid
from .mapping import Stage

__all__ = ["BatchExperts", "Draw", "ExpertTrips", "balanced_trips", "grid_trips", "sampled_trips"]

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


@dataclass(frozen=True)
class ExpertTrips:
    """One stage's decode tokens under sampled routing. ``extra[request, token − 1]``: cycles a token's
    trips differ from the mean the ``GRID_TRIPS`` kernels are costed at (``mean[layer]``); ``grid_use[g]``:
    the share of the stage's (token, MoE layer) pairs with an expert on grid g; ``expert_load``: the
    busiest expert's draws over the mean, in the stage's busiest MoE layer (``routing.region_load``, an
    expert its own region)."""

    extra: np.ndarray
    mean: dict[int, float]
    grid_use: tuple[float, ...]
    expert_load: float


def sampled_trips(stage: Stage, model: ModelSpec, draw: Callable[[int], np.ndarray], trips: np.ndarray,
                  requests: int, tokens: int) -> ExpertTrips:
    """The stage's ``ExpertTrips`` for ``draw(layer)[request · tokens + token − 1]``, each decode
    token's k experts in that layer (``routing.sample_layer``; drawn once per layer, in layer order); a
    dense stage's are all zero."""
    grids, per_grid, E = len(trips), experts_per_grid(model.experts, len(trips)), model.experts
    moe = [layer for layer in stage.layers if not model.is_dense(layer)]
    n = requests * tokens
    total, use, mean = np.zeros(n), np.zeros(grids), {}
    counts = np.zeros((max(len(moe), 1), max(E, 1)))
    for i, layer in enumerate(moe):
        picks = draw(layer)
        touched = np.zeros((n, grids), dtype=bool)
        touched[np.arange(n)[:, None], picks // per_grid] = True
        cycles = touched @ trips
        total += cycles
        use += touched.sum(axis=0)
        mean[layer] = float(cycles.mean()) if n else 0.0
        counts[i] = np.bincount(picks.ravel(), minlength=E)
    extra = (total - sum(mean.values())).reshape(requests, tokens)
    share = tuple(float(u) for u in use / max(n * len(moe), 1))
    load = float(region_load(counts, np.arange(E), np.ones(E), E).max()) if moe and n else 0.0
    return ExpertTrips(extra, mean, share, load)


class BatchExperts:
    """Sampled routing under continuous batching (docs/model.md §11.8): one stage's MoE layers, each with
    its popularity drawn once for the run (uniform, or Zipf with its ranks permuted), and each decode
    iteration's b tokens drawing their k distinct experts in every layer then, in the stage's order of
    iterations (one generator a stage, so both executors draw the same). An expert is its own region and
    the experts of a layer run at once, so a layer's expert kernels take the busiest expert's tokens
    (``Draw.loads``) where balanced routing takes ⌈b·k / E⌉; the dispatch and combine move each expert's
    drawn tokens (``Draw.counts``)."""

    def __init__(self, model: ModelSpec, layers: int, alpha: float | None, rng: np.random.Generator) -> None:
        self.experts, self.top_k, self.layers, self.rng = model.experts, model.top_k, layers, rng
        with np.errstate(divide="ignore"):  # an underflowed weight: log 0 = −inf, never drawn
            self.log_p = [np.log(popularity(model.experts, model.top_k, alpha, rng)) for _ in range(layers)]

    def loads(self, tokens: int) -> Draw:
        """``tokens`` decode tokens' experts in each of the stage's MoE layers, drawn (``Draw``)."""
        out, counts, most = [], None, -1
        for log_p in self.log_p:
            picks = draw_with(log_p, self.top_k, tokens, self.rng)
            c = np.bincount(picks.ravel(), minlength=self.experts)
            out.append(int(c.max()))
            if out[-1] > most:
                counts, most = c, out[-1]
        return Draw(tuple(out), tuple(counts.tolist()) if counts is not None else ())


@dataclass(frozen=True, eq=False)
class Draw:
    """One decode iteration's experts under sampled routing (``BatchExperts.loads``): ``loads`` the busiest
    expert's tokens in each of the stage's MoE layers, in order; ``counts`` every expert's tokens in the
    layer whose busiest expert has the most (the first of them), at which every MoE layer's dispatch and
    combine are timed (``expert_dispatch.StageDispatch.drawn``: one layer's vector through the fabric
    model an iteration, not each layer's, to keep a run fast; docs/model.md §11.8)."""

    loads: tuple[int, ...]
    counts: tuple[int, ...]
