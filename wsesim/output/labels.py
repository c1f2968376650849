"""Point labels that never overprint: each tried at a few places around its point (right and up first),
kept at the first where it covers no other text, no marker or line of its axes and stays inside the
frame, else left out — and the caller says which were left out. Tick labels that would run into each
other are thinned the same way (every other one kept). Call these after the figure's layout is final
(``tight_layout``): they measure the labels where they will be drawn.
"""

from __future__ import annotations

from typing import Any

from .figure_check import box, crosses, overlaps, texts

__all__ = ["ABOVE_FIRST", "OFFSETS", "place_labels", "some", "thin_ticks"]

OFFSETS = ((4, 4, "left", "bottom"), (4, -4, "left", "top"), (-4, 4, "right", "bottom"),
           (-4, -4, "right", "top"), (0, 7, "center", "bottom"), (0, -7, "center", "top"))
"""Where a label may go: its offset from the point (points) and its alignment."""
ABOVE_FIRST = ((0, 6, "center", "bottom"), (0, -6, "center", "top"), (0, 11, "center", "bottom"),
               (0, -11, "center", "top"), (0, 16, "center", "bottom"), (-4, 4, "right", "bottom"),
               (4, 4, "left", "bottom"), (-4, -4, "right", "top"), (4, -4, "left", "top"))
"""The same, centred above the point first (the sweep figures' G, B and speedup labels)."""


def _inside(ax: Any, text: Any, renderer: Any) -> bool:
    inner, outer = ax.get_window_extent(renderer), text.get_window_extent(renderer)
    return outer.x0 >= inner.x0 and outer.x1 <= inner.x1 and outer.y0 >= inner.y0 and outer.y1 <= inner.y1


def place_labels(ax: Any, labels: list[tuple[float, float, str, str]], fontsize: float = 7,
                 offsets: tuple[tuple[float, float, str, str], ...] = OFFSETS
                 ) -> list[tuple[float, float, str, str]]:
    """Annotate ``ax`` with each (x, y, text, colour) where it overprints nothing (``offsets`` in turn);
    the labels that found no such place, which are left out."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    taken = [box(t, renderer) for t in texts(fig)]
    lines = ax.get_lines()
    dropped = []
    for label in labels:
        x, y, text, colour = label
        for dx, dy, ha, va in offsets:
            note = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), ha=ha, va=va,
                               fontsize=fontsize, color=colour)
            b = box(note, renderer)
            if (_inside(ax, note, renderer) and not any(overlaps(b, t) for t in taken)
                    and not any(crosses(b, line) for line in lines)):
                taken.append(b)
                break
            note.remove()
        else:
            dropped.append(label)
    return dropped


def some(items: list[str], n: int) -> str:
    """The first ``n`` of ``items`` joined by commas, and how many more: a note that names what a figure
    left out stays one line however many there are."""
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def thin_ticks(ax: Any, axis: str = "x") -> None:
    """Blank the tick labels of ``ax``'s ``axis`` that would overprint the one kept before them."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    which = ax.xaxis if axis == "x" else ax.yaxis
    ticks = list(which.get_ticklocs())
    labels = [t.get_text() for t in which.get_ticklabels()]
    kept = []
    shown = list(labels)
    for i, label in enumerate(which.get_ticklabels()):
        if not label.get_text().strip():
            continue
        b = box(label, renderer)
        if kept and overlaps(b, kept[-1]):
            shown[i] = ""
        else:
            kept.append(b)
    if shown != labels:
        (ax.set_xticks if axis == "x" else ax.set_yticks)(ticks, shown)
