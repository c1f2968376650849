"""Whether a drawn figure reads: no two texts overprint, no point label crosses its axes' frame or a line
of its axes, no legend sits on the data. Measured on the figure as matplotlib lays it out (each text's box
after a draw, in display pixels; a rotated text as its rotated rectangle, not the larger box around it).

``problems(fig)`` lists what is wrong in sentences (``[]`` for a figure that reads); the tests over the
figures the sweep, serving and tune plotting code draws ask it for ``[]``, and ``output.labels`` uses
``overlaps`` to leave out a label that would overprint another. matplotlib comes through ``output.mpl``.
"""

from __future__ import annotations

import math
from typing import Any

from .mpl import Annotation, Legend, Text

__all__ = ["Box", "box", "crosses", "labels_off_axes", "labels_over_lines", "legends_over_data",
           "overlapping_text", "overlaps", "problems", "texts"]

TOLERANCE_PX = 0.5  # boxes that meet by less than this (rounding) do not overprint

Box = tuple[float, float, float, float, float]  # centre x, centre y, half width, half height, angle (radians)


def _renderer(fig: Any) -> Any:
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _drawn_tick_labels(ax: Any) -> tuple[set[int], list[Any]]:
    """The ids of every tick label of ``ax`` and the labels drawn (ticks inside the view)."""
    every: set[int] = set()
    drawn: list[Any] = []
    for axis in (ax.xaxis, ax.yaxis):
        for tick in [*axis.majorTicks, *axis.minorTicks]:
            every |= {id(tick.label1), id(tick.label2)}
        for tick in axis._update_ticks():  # the ticks matplotlib draws (inside the view interval)
            drawn += [t for t in (tick.label1, tick.label2) if t.get_visible()]
    return every, drawn


def texts(fig: Any) -> list[Any]:
    """Every text the figure draws with something in it: titles, axis and tick labels, annotations,
    legend entries, figure texts; not those of hidden axes nor ticks outside the view."""
    renderer = _renderer(fig)
    del renderer
    ticks: set[int] = set()
    drawn: list[Any] = []
    for ax in fig.axes:
        every, shown = _drawn_tick_labels(ax)
        ticks |= every
        drawn += shown if ax.get_visible() and ax.axison else []  # (an axes turned off draws no ticks)
    out = []
    for text in fig.findobj(Text):
        if id(text) in ticks or not text.get_visible() or not text.get_text().strip():
            continue
        if text.axes is not None and not text.axes.get_visible():
            continue
        if isinstance(text, Annotation) and text.axes is not None and not _annotation_drawn(text):
            continue
        out.append(text)
    return out + [t for t in drawn if t.get_text().strip()]


def _annotation_drawn(text: Any) -> bool:
    """matplotlib leaves out an annotation whose point is outside its axes (``annotation_clip``)."""
    renderer = text.figure.canvas.get_renderer()
    return bool(text._check_xy(renderer))


def _extent(text: Any, renderer: Any = None) -> Any:
    """The box of a text's letters (an annotation's leader line is not text: it may reach its point)."""
    renderer = renderer or text.figure.canvas.get_renderer()
    if isinstance(text, Annotation):
        text.update_positions(renderer)  # (an offset is placed at a draw, or here)
    return Text.get_window_extent(text, renderer)


def box(text: Any, renderer: Any = None) -> Box:
    """A text's rectangle in display pixels: its centre, half sizes and angle (a rotated text's own
    rectangle, whose axis-aligned box would be larger)."""
    renderer = renderer or text.figure.canvas.get_renderer()
    outer = _extent(text, renderer)
    angle = text.get_rotation()
    if angle % 180 == 0:
        return (outer.x0 + outer.width / 2, outer.y0 + outer.height / 2, outer.width / 2, outer.height / 2,
                0.0)
    text.set_rotation(0)
    plain = _extent(text, renderer)
    text.set_rotation(angle)
    return (outer.x0 + outer.width / 2, outer.y0 + outer.height / 2, plain.width / 2, plain.height / 2,
            math.radians(angle))


def _axes(b: Box) -> list[tuple[float, float]]:
    return [(math.cos(b[4]), math.sin(b[4])), (-math.sin(b[4]), math.cos(b[4]))]


def _radius(b: Box, axis: tuple[float, float]) -> float:
    (ux, uy), (vx, vy) = _axes(b)
    return b[2] * abs(ux * axis[0] + uy * axis[1]) + b[3] * abs(vx * axis[0] + vy * axis[1])


def overlaps(a: Box, b: Box, tolerance: float = TOLERANCE_PX) -> bool:
    """Whether two rectangles share more than ``tolerance`` pixels along every separating axis (the
    separating axis theorem: two convex shapes are apart exactly when one of their edges' normals
    separates them)."""
    for axis in _axes(a) + _axes(b):
        gap = abs((a[0] - b[0]) * axis[0] + (a[1] - b[1]) * axis[1])
        if gap >= _radius(a, axis) + _radius(b, axis) - tolerance:
            return False
    return True


def _name(text: Any) -> str:
    return repr(text.get_text().replace("\n", " ")[:40])


def overlapping_text(fig: Any) -> list[tuple[str, str]]:
    """Every pair of texts whose rectangles overlap (each named by its first 40 characters)."""
    renderer = _renderer(fig)
    shown = texts(fig)
    boxes = [box(t, renderer) for t in shown]
    return [(_name(shown[i]), _name(shown[j])) for i in range(len(shown)) for j in range(i + 1, len(shown))
            if overlaps(boxes[i], boxes[j])]


def _labels(fig: Any) -> list[Any]:
    """The point labels: annotations inside an axes (not titles, ticks or legends)."""
    return [t for t in texts(fig) if isinstance(t, Annotation) and t.axes is not None]


def labels_off_axes(fig: Any) -> list[str]:
    """Point labels that cross their axes' frame (the spine runs through them)."""
    out = []
    for text in _labels(fig):
        inner = text.axes.get_window_extent()
        outer = _extent(text)
        inside = (outer.x0 >= inner.x0 - TOLERANCE_PX and outer.x1 <= inner.x1 + TOLERANCE_PX
                  and outer.y0 >= inner.y0 - TOLERANCE_PX and outer.y1 <= inner.y1 + TOLERANCE_PX)
        apart = (outer.x1 <= inner.x0 or outer.x0 >= inner.x1 or outer.y1 <= inner.y0 or outer.y0 >= inner.y1)
        if not inside and not apart:
            out.append(_name(text))
    return out


def _segment_hits(b: Box, p: tuple[float, float], q: tuple[float, float]) -> bool:
    """Whether the segment p–q passes through the (axis-aligned, inset by the tolerance) rectangle."""
    x0, x1 = b[0] - b[2] + TOLERANCE_PX, b[0] + b[2] - TOLERANCE_PX
    y0, y1 = b[1] - b[3] + TOLERANCE_PX, b[1] + b[3] - TOLERANCE_PX
    t0, t1 = 0.0, 1.0  # Liang–Barsky clipping
    dx, dy = q[0] - p[0], q[1] - p[1]
    for edge_p, edge_q in ((-dx, p[0] - x0), (dx, x1 - p[0]), (-dy, p[1] - y0), (dy, y1 - p[1])):
        if edge_p == 0:
            if edge_q < 0:
                return False
            continue
        t = edge_q / edge_p
        if edge_p < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return False
    return True


def _vertices(line: Any) -> list[tuple[float, float]]:
    xy = line.get_transform().transform(line.get_xydata())
    return [(float(x), float(y)) for x, y in xy if math.isfinite(x) and math.isfinite(y)]


def _marker_box(x: float, y: float, line: Any) -> Box:
    half = line.get_markersize() * line.figure.dpi / 72 / 2
    return (x, y, half, half, 0.0)


def crosses(b: Box, line: Any) -> str:
    """What of ``line`` (display pixels) the rectangle ``b`` covers: "a line", "a marker" or ""."""
    points = _vertices(line)
    if line.get_linestyle() not in ("None", "none", "", " ") and any(
            _segment_hits(b, p, q) for p, q in zip(points, points[1:], strict=False)):
        return "a line"
    if line.get_marker() not in (None, "None", "none", "", " ") and any(
            overlaps(b, _marker_box(x, y, line)) for x, y in points):
        return "a marker"
    return ""


def labels_over_lines(fig: Any) -> list[tuple[str, str]]:
    """Point labels that a line of their axes crosses, or that cover a marker: (label, what)."""
    renderer = _renderer(fig)
    out = []
    for text in _labels(fig):
        b = box(text, renderer)
        if b[4]:
            continue  # a rotated label stands above a cross at the axis's foot, not among the lines
        hit = next((what for line in text.axes.get_lines() if (what := crosses(b, line))), "")
        if hit:
            out.append((_name(text), hit))
    return out


def legends_over_data(fig: Any) -> list[str]:
    """Legends inside an axes that cover a point or a line of it."""
    renderer = _renderer(fig)
    out = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not ax.get_visible() or not isinstance(legend, Legend):
            continue
        outer = legend.get_window_extent(renderer)
        b = (outer.x0 + outer.width / 2, outer.y0 + outer.height / 2, outer.width / 2, outer.height / 2, 0.0)
        line = next((line for line in ax.get_lines() if crosses(b, line)), None)
        if line is not None:
            out.append(f"the legend of {ax.get_title()[:40]!r} covers {line.get_label()[:40]!r}")
    return out


def problems(fig: Any) -> list[str]:
    """What keeps the figure from reading, in sentences; ``[]`` when nothing does."""
    return ([f"{a} overprints {b}" for a, b in overlapping_text(fig)]
            + [f"{t} crosses its axes' frame" for t in labels_off_axes(fig)]
            + [f"{t} is crossed by {what}" for t, what in labels_over_lines(fig)]
            + legends_over_data(fig))
