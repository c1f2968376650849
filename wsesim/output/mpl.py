"""matplotlib for the picture modules: the one module of wsesim that imports it.

The Agg backend is chosen before ``pyplot`` is imported, so that drawing never needs a display (pictures
are files only), and text stays text in SVG and PDF (``svg.fonttype: none``, ``pdf.fonttype: 42``) with a
fixed SVG hash salt, so that the same figure is the same bytes. ``plotting``, ``sweep_figures``,
``wafer_figures`` and ``figure_check`` take ``plt`` from here; nothing else in wsesim imports matplotlib, so
running, tuning and sweeping never load it.
"""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams.update({"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "wsesim"})
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.collections import PolyCollection  # noqa: E402  (sweep_figures: many bars in one artist)
from matplotlib.legend import Legend  # noqa: E402  (figure_check: a legend's box)
from matplotlib.text import Annotation, Text  # noqa: E402  (figure_check: the text a figure draws)
from matplotlib.ticker import (  # noqa: E402  (log axes as plain numbers)
    FuncFormatter,
    Locator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)


class PlainLogLocator(Locator):  # type: ignore[misc]
    """Major ticks of a log axis that always show numbers: decades when the view holds three, else 1-2-5
    steps, else every 1…9 step of a decade, else a linear axis's nice numbers inside the view (a view of
    less than a decade, 2.5 to 4, has no decade in it to label)."""

    def __call__(self) -> list[float]:
        vmin, vmax = self.axis.get_view_interval()
        return self.tick_values(vmin, vmax)

    def tick_values(self, vmin: float, vmax: float) -> list[float]:
        vmin, vmax = sorted((vmin, vmax))
        if not vmax > 0:
            return []
        vmin = vmin if vmin > 0 else vmax / 1e3
        low, high = math.floor(math.log10(vmin)), math.ceil(math.log10(vmax))
        for subs, enough in (((1,), 3), ((1, 2, 5), 2), (range(1, 10), 2)):
            ticks = [s * 10.0**e for e in range(low, high + 1) for s in subs if vmin <= s * 10.0**e <= vmax]
            if len(ticks) >= enough:
                return ticks
        return [v for v in MaxNLocator(4).tick_values(vmin, vmax) if vmin <= v <= vmax]


def plain_log_axis(ax: Any, which: str = "y", **scale: Any) -> None:
    """``ax``'s ``which`` axis (``"x"`` or ``"y"``) on a log scale (``scale``: ``base=2``) labelled with
    plain numbers (``0.6``, ``3``, ``2,000``), never ``3×10⁰`` or ``6×10⁻¹``, with numbers on it however
    short its span (``PlainLogLocator``)."""
    getattr(ax, f"set_{which}scale")("log", **scale)
    axis = getattr(ax, f"{which}axis")
    axis.set_major_locator(PlainLogLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))
    axis.set_minor_formatter(NullFormatter())


def cross(ax: Any, x: float, colour: str, ms: float = 9, zorder: float = 5) -> None:
    """A point with no value (infeasible, failed, not served): a cross at ``x`` on the bottom of ``ax``
    (y 0 of the axes' frame, on a log axis too), not clipped by it."""
    ax.plot(x, 0, "x", color=colour, ms=ms, mew=2, clip_on=False, zorder=zorder,
            transform=ax.get_xaxis_transform())


__all__ = ["Annotation", "Legend", "NullLocator", "PlainLogLocator", "PolyCollection", "Text", "cross",
           "plain_log_axis", "plt"]
