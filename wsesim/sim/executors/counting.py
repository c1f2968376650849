"""The SimPy environment both engines run in: it counts the events it processes (``RunResult.events``)."""

from __future__ import annotations

import simpy


class CountingEnvironment(simpy.Environment):
    """A SimPy environment that counts the events it processes."""

    def __init__(self) -> None:
        super().__init__()
        self.processed = 0

    def step(self) -> None:
        self.processed += 1
        super().step()
