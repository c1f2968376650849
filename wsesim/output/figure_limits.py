"""How much a sweep's plot draws at most, readable without matplotlib (the CLI's ``--help`` says it)."""

from __future__ import annotations

from typing import Any

MAX_FIGURES = 60
"""A sweep's figures drawn at most (``plot --max-figures``): the rest are named in figures.json's
``left_out`` and on stderr, never dropped silently (a 4-key sweep once drew 1,290 files for 233 s)."""
MAX_PIXELS = 16_000
"""A figure's side at most, in pixels at 150 dpi: a larger one (hundreds of series stacked) is left out
with its reason rather than written (a 10,000-row sweep once drew a 1,672 × 219,343 px PNG)."""

class FigureTooLarge(Exception):
    """A figure ``save_figure`` did not write: its size, and why (the message)."""


def capped(plans: list[Any], cap: int, left_out: dict[str, str]) -> list[Any]:
    """The first ``cap`` of ``plans``; the others' stems into ``left_out`` with the reason."""
    for plan in plans[cap:]:
        left_out[plan.stem] = (f"more than {cap:,} figures ({len(plans):,} planned; --max-figures "
                               f"{len(plans)} draws them all)")
    return plans[:cap]


__all__ = ["MAX_FIGURES", "MAX_PIXELS", "FigureTooLarge", "capped"]
