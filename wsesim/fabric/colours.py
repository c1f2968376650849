"""The colour rule of a traffic pattern, one home for every reader (docs/model.md §6.1 and §10.6).

A colour is a virtual channel on the mesh's physical links. At each router a colour has one route: the
inputs it accepts (the PE's ramp, one or more mesh directions) and the outputs it forwards to. Routes
that the router can merge into one such configuration, switched from one input to the next as their
senders finish (as Luczynski et al.'s star reduce does), share a colour however many PEs feed them.

A pattern whose routes are dimension-ordered takes **one colour per direction of travel** through a
router: every route heading east through it shares the pattern's east colour (each receiver keeps its
share of what passes, as a phase relays its data), and likewise west, south and north. So a router needs
the directions in which some route leaves or enters it, at most 4 for one pattern. The same rule decides
the feasibility of ``wsesim fabric`` (``traffic.summarise``), of the training step's MoE dispatch and
combine (``DispatchModel.colours``) and of the all-to-all kernel (``wsesim.kernels.routes``).
"""

from __future__ import annotations

import numpy as np

DIRECTION_RULE = "one per direction of travel, wsesim.fabric.colours"
"""How a reason or a note names this rule."""


def direction_colours(leaving: np.ndarray, entering: np.ndarray) -> np.ndarray:
    """Colours at each router under the direction rule: with ``leaving[..., d]`` (a route leaves the
    router heading d) and ``entering[..., d]`` (one enters it heading d) over the directions of the last
    axis, Σ_d (leaving_d ∨ entering_d)."""
    return (np.asarray(leaving, dtype=bool) | np.asarray(entering, dtype=bool)).sum(axis=-1)


def line_directions(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(leaving, entering) of a pattern along a line of n routers in both directions (forward, backward):
    forward leaves routers 0 … n − 2 and enters 1 … n − 1, backward the mirror."""
    x = np.arange(n)
    leaving = np.stack([x < n - 1, x > 0], axis=-1)
    return leaving, leaving[:, ::-1]


def over_budget(need: int, budget: int, where: str, rule: str, limit: str) -> str:
    """'' when ``need`` colours fit ``budget``; else the reason: "{where} needs {need} colours ({rule}),
    over its budget of {budget} ({limit})"."""
    if need <= budget:
        return ""
    return f"{where} needs {need} colours ({rule}), over its budget of {budget} ({limit})"
