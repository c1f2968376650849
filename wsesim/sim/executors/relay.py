"""A cluster's broadcast-reduce tree (``programs.cluster.Tree``, docs/model.md §9) as SimPy processes, the
reference engine's: one process per level, passing each chunk or reduced gradient on cut-through. The fast
engine uses the tree's closed forms; the tests hold the two to the same cycles."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from ..programs.cluster import Tree


def relay(env: simpy.Environment, tree: Tree, deliver: Callable[[Any], None]) -> simpy.Store:
    """The tree as processes: one per level, each taking what the level above (or an end of the tree)
    hands it and passing it on ``hop_cycles`` later, in order, without holding the next back (cut-through:
    the bytes stream through, only their last one's delay counts). Returns the store to put items into;
    ``deliver(item)`` is called at the other end, ``depth · hop_cycles`` after the put."""
    stores = [simpy.Store(env) for _ in range(tree.depth)] + [None]

    def level(k: int) -> Generator[Any, Any, None]:
        while True:
            item = yield stores[k].get()
            env.timeout(tree.hop_cycles).callbacks.append(lambda _, item=item: hand_on(k + 1, item))

    def hand_on(k: int, item: Any) -> None:
        if stores[k] is None:
            deliver(item)
        else:
            stores[k].put(item)

    for k in range(tree.depth):  # (a cluster's tree has depth ≥ 1: one system has none)
        env.process(level(k))
    return stores[0]
