"""matplotlib for the picture modules: the one module of wsesim that imports it.

The Agg backend is chosen before ``pyplot`` is imported, so that drawing never needs a display (pictures
are files only), and text stays text in SVG and PDF (``svg.fonttype: none``, ``pdf.fonttype: 42``) with a
fixed SVG hash salt, so that the same figure is the same bytes. ``plotting``, ``sweep_figures`` and
``wafer_figures`` take ``plt`` from here; nothing else in wsesim imports matplotlib, so running, tuning
and sweeping never load it.
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams.update({"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "wsesim"})
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.collections import PolyCollection  # noqa: E402  (sweep_figures: many bars in one artist)
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402  (log axes as plain numbers)


def plain_log_axis(axis: Any) -> None:
    """A log axis labelled with plain numbers (``0.6``, ``3``, ``200``), never ``3×10⁰`` or ``6×10⁻¹``."""
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.6g}"))
    axis.set_minor_formatter(NullFormatter())


__all__ = ["PolyCollection", "plain_log_axis", "plt"]
