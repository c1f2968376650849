"""The one palette (wsesim.output.palette): the first eight colours are the figures' old ones (a training
figure's first series keep theirs), the sixteen are apart in CIELAB at least as far as the old eight were
among themselves, no two of 500 series share a colour nor two of 1,000 colour and marker, and a serving
figure of 25 series no longer draws its ninth in the first one's colour, nor its 25th as the first."""

from __future__ import annotations

import itertools

from wsesim.analysis.serving_plans import ServingPanel, ServingPlan, ServingSeries
from wsesim.output.mpl import plt
from wsesim.output.palette import COLOURS, MARKERS, blue_first, colour, marker
from wsesim.output.serving_figures import serving_figure

OLD = ["#c0392b", "#2471a3", "#27ae60", "#8e44ad", "#d68910", "#17a589", "#7f8c8d", "#a04000"]


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """sRGB (D65) to CIELAB."""
    rgb = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb)
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def _distance(a: str, b: str) -> float:
    return sum((p - q) ** 2 for p, q in zip(_lab(a), _lab(b), strict=True)) ** 0.5


def test_the_first_eight_are_the_old_ones() -> None:
    assert list(COLOURS[:8]) == OLD
    assert [colour(i) for i in range(8)] == OLD
    assert [blue_first(i) for i in range(3)] == [OLD[1], OLD[0], OLD[2]]


def test_sixteen_colours_apart_and_none_faint() -> None:
    """The old eight's closest pair is 19.9 apart (ΔE*ab); the sixteen keep at least that, and each is at
    least 25 from white (not faded on the page)."""
    old = min(_distance(a, b) for a, b in itertools.combinations(OLD, 2))
    assert 19.8 < old < 20.0
    assert len(COLOURS) == 16
    assert min(_distance(a, b) for a, b in itertools.combinations(COLOURS, 2)) >= old
    assert min(_distance(c, "#ffffff") for c in COLOURS) > 25


def test_no_two_series_share_a_colour_nor_a_colour_and_marker() -> None:
    assert len({colour(i) for i in range(500)}) == 500
    assert len({blue_first(i) for i in range(500)}) == 500
    assert len({(colour(i), marker(i)) for i in range(1000)}) == 1000
    assert marker(6) == MARKERS[0]  # markers cycle; colours do not


def test_a_serving_figure_of_many_series_draws_each_its_own_look() -> None:
    """25 series (a swept key of 25 values beside the x key): before the palette the ninth series was drawn
    in the first one's blue and the 25th as the first, a blue circle (8 colours, 6 markers); now each line
    has its own colour."""
    series = [ServingSeries(f"batch {i}", {"inference.scheduler.batch": str(i)}, i,
                            [{"x": "1", "x_index": 0, "y": float(i + 1), "status": "ok", "reason": "",
                              "mapping": "1 × 8², 1 wafer", "point": i, "row": {}}]) for i in range(25)]
    plan = ServingPlan("serving_vs_rate", "inference.load.rate", "rate", ["1"], "Serving vs rate\nm on h", {},
                       ["inference.scheduler.batch"], [ServingPanel("tokens_per_s", "tokens/s", 1.0, series)], "1 × 8²")
    fig = serving_figure(plan)
    looks = [(line.get_color(), line.get_marker()) for line in fig.axes[0].lines]
    assert len(looks) == 25 and len({c for c, _ in looks}) == 25
    assert looks[8][0] != looks[0][0] and looks[24] != looks[0]
    plt.close(fig)
