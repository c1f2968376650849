"""The colours and markers of every figure that draws series: a training sweep's throughput, a serving
sweep's panels and its throughput–latency figure, tune's candidates and front, a cluster's scaling. The
i-th series is ``colour(i)`` and ``marker(i)`` (a marker and its line style).

``COLOURS`` are 16 hand-picked colours: the first eight are those the figures have always had (red, blue,
green, purple, orange, teal, grey, brown), the other eight are apart from them and from each other by at
least as much as the first eight are among themselves (CIELAB distance, checked by a test), and none is so
light that it fades on white. Past the sixteenth, hues go round by the golden angle at two lightnesses
(no two of the first 500 series share a colour); markers cycle through six (with six line styles), so no
two of 1,000 series share colour and marker (both checked by a test). Serving figures and the cluster
figure begin with the blue (``blue_first``), as they always have.
"""

from __future__ import annotations

import colorsys
from typing import Any

__all__ = ["COLOURS", "MARKERS", "PHASE_COLOURS", "blue_first", "colour", "marker"]

COLOURS = ("#c0392b", "#2471a3", "#27ae60", "#8e44ad", "#d68910", "#17a589", "#7f8c8d", "#a04000",
           "#f48fb1", "#808000", "#ff4081", "#004d40", "#641e16", "#00bcd4", "#33691e", "#1a237e")
MARKERS: tuple[tuple[str, Any], ...] = (("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."),
                                        ("v", (0, (5, 1))), ("P", (0, (4, 1.5, 1, 1.5, 1, 1.5))))
"""Six (marker, line style) pairs, no two styles alike: solid, dashed, dotted, dash-dot, long dashes,
dash-dot-dot (a sixth of sparse dots read as the third's dots: α 0.8 and 1.0 of a speculative sweep,
green and teal, looked one)."""


PHASE_COLOURS = {"attention": "#2471a3", "ffn": "#1a5276", "router": "#7fb3d5", "dispatch": "#f5b041",
                 "expand": "#a9cce3", "experts": "#27ae60", "weighted_sum": "#76d7c4", "combine": "#f8c471",
                 "lm_head": "#8e44ad", "weight_stall": "#c0392b", "gradient_stall": "#e6b0aa",
                 "gradient_drain": "#aab7b8", "reduce_drain": "#5d6d7e", "optimizer_step": "#6e2c00",
                 "other": "#d5d8dc", "gate_up": "#1e8449", "down": "#82e0aa", "weight_wait": "#f5b7b1",
                 "layer_weights": "#5d6d7e", "expert_weights": "#aab7b8"}
"""A step's phases and a layer's ops by name, one colour each wherever they are drawn: the phase bars of a
sweep and the wafer's Gantt chart (brown for the optimizer step: lm_head is the purple)."""


def colour(index: int) -> str:
    """The ``index``-th series' colour: ``COLOURS``, then hues spread by the golden angle (alternately
    darker and lighter)."""
    if index < len(COLOURS):
        return COLOURS[index]
    k = index - len(COLOURS)
    hue = (0.11 + 0.618034 * k) % 1.0
    r, g, b = colorsys.hls_to_rgb(hue, 0.36 if k % 2 else 0.48, 0.65)
    return f"#{round(255 * r):02x}{round(255 * g):02x}{round(255 * b):02x}"


def blue_first(index: int) -> str:
    """``colour`` with the first two swapped: blue, red, green, purple, ... (serving's and the cluster
    figure's order)."""
    return colour((1, 0)[index] if index < 2 else index)


def marker(index: int) -> tuple[str, Any]:
    """The ``index``-th series' (marker, line style)."""
    return MARKERS[index % len(MARKERS)]
