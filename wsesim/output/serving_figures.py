"""The serving figures: against one varied key (batch, grid, prompt length, ...), tokens/s per request,
tokens/s of all requests, and the time to first token, one line per combination of the other varied
keys; a point that does not fit is a cross at the bottom of its panel, its reason in figures' data.

matplotlib comes through ``output.mpl`` (the one module that imports it); this module only draws.
"""

from __future__ import annotations

from typing import Any

from ..analysis.serving import serving_series
from .mpl import plt

_PANELS = (("tokens_per_s_per_request", "tokens/s per request"), ("tokens_per_s", "tokens/s, all requests"),
           ("ttft_s", "time to first token (s)"))
_COLOURS = ["#2471a3", "#c0392b", "#27ae60", "#8e44ad", "#d68910", "#17a589", "#7f8c8d", "#a04000"]


def _x(value: Any) -> float:
    """A grid "420x420" as its PEs; numbers as they are."""
    if isinstance(value, str) and "x" in value:
        r, c = value.split("x")
        return float(int(r) * int(c))
    return float(value)


def _tick(key: str, x: float) -> str:
    """A tick's label: a grid as its side (a square's), anything else as the number it is."""
    if key.endswith("grid"):
        side = round(x ** 0.5)
        return f"{side}²" if side * side == x else f"{x:,.0f}"
    return f"{x:,.0f}" if x == int(x) else f"{x:g}"


def serving_figure(rows: list[dict[str, Any]], key: str, keys: list[str]) -> Any:
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 3.8))
    label = "PEs per stage grid" if key.endswith("grid") else key.split(".")[-1].replace("_", " ")
    for ax, (field, title) in zip(axes, _PANELS, strict=True):
        for i, s in enumerate(serving_series(rows, key, field, keys)):
            points = sorted(s["points"], key=lambda p: _x(p["x"]))
            ok = [p for p in points if p["y"] is not None]
            colour = _COLOURS[i % len(_COLOURS)]
            ax.plot([_x(p["x"]) for p in ok], [p["y"] for p in ok], "o-", color=colour, label=s["label"] or None)
            bad = [_x(p["x"]) for p in points if p["y"] is None]
            if bad:
                ax.plot(bad, [0.0] * len(bad), "x", color=colour, markersize=9, clip_on=False)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(label)
        ax.set_ylim(bottom=0)
        xs = sorted({_x(r[key]) for r in rows})
        if len(xs) > 2 and key.endswith(("batch", "grid", "prompt_len", "output_len")):
            ax.set_xscale("log", base=2)
            ax.minorticks_off()
        ax.set_xticks(xs, [_tick(key, x) for x in xs], fontsize=8)
        ax.grid(alpha=0.3)
    if any(s["label"] for s in serving_series(rows, key, "tokens_per_s", keys)):
        axes[0].legend(fontsize=8)
    fig.suptitle(f"{rows[0]['model']} on {rows[0]['hardware']}: serving against {label}"
                 "  (x: does not fit)", fontsize=11)
    fig.tight_layout()
    return fig
