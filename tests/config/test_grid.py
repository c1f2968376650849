"""The one reader of a grid of PEs written "PxQ" (wsesim.config.fields.parse_grid), and the serving spec's
``inference.grid``, which also requires the one spelling ``format_grid`` writes. The command line's
``kernel --grid`` and ``fabric --mesh`` read it too, each error in its flag's words: tests/cli."""

from __future__ import annotations

import pytest

from wsesim.config.errors import ConfigError
from wsesim.config.fields import format_grid, parse_grid
from wsesim.config.inference import InferenceSpec

EXPECTED = 'grid: expected a grid like "420x420" (rows x cols of PEs), got '


@pytest.mark.parametrize(("text", "grid"), [
    ("420x420", (420, 420)), ("1x8", (1, 8)), ("750x994", (750, 994)), ("99999x1", (99999, 1)),
    (" 4x4", (4, 4)), ("4X4", (4, 4)), ("4 × 4", (4, 4)), ("4x4 ", (4, 4)), ("04x4", (4, 4))])
def test_a_grid_reads_as_rows_and_cols(text: str, grid: tuple[int, int]) -> None:
    assert parse_grid(text) == grid


@pytest.mark.parametrize("text", [
    "0x1", "1x0", "0x0", "4x", "x4", "4", "", "x", "4x4x4", "4 by 4", "4*4", "-4x4", "+4x4", "4.0x4", "1e3x4",
    "٤x٤", "²x2", "4x²", "４x４", "4\u200bx4", "123456x1", "1" * 5000 + "x1", "auto"])
def test_anything_else_is_refused_with_the_one_message(text: str) -> None:
    """Unicode digits (Arabic-Indic, superscript, full-width), which ``int`` would read, are not digits
    of a grid; nor is a side past five digits (a 5,000-digit one once reached ``int``'s digit limit)."""
    with pytest.raises(ConfigError) as e:
        parse_grid(text)
    assert str(e.value).startswith(EXPECTED)


@pytest.mark.parametrize("value", [None, 4, 4.0, (4, 4), b"4x4"])
def test_a_grid_is_a_string(value: object) -> None:
    with pytest.raises(ConfigError) as e:
        parse_grid(value)
    assert str(e.value) == EXPECTED + repr(value)


def test_the_error_is_at_the_callers_path_and_format_grid_writes_what_it_reads() -> None:
    with pytest.raises(ConfigError) as e:
        parse_grid("4x", path="--grid")
    assert e.value.path == "--grid"
    assert format_grid(420, 994) == "420x994" and parse_grid(format_grid(420, 994)) == (420, 994)


@pytest.mark.parametrize(("grid", "ok"), [
    ("auto", True), ("420x420", True), ("1x8", True), ("99999x99999", True), ("4X4", False), (" 4x4", False),
    ("4 x 4", False), ("4×4", False), ("04x4", False), ("4x4\n", False), ("0x1", False), ("٤x٤", False),
    ("²x2", False), ("123456x1", False)])
def test_the_serving_spec_stores_one_spelling(grid: str, ok: bool) -> None:
    """``inference.grid`` takes what ``parse_grid`` reads only in ``format_grid``'s spelling, since results,
    CSV columns and figures read the stored string ("4x4\\n" is refused too: a trailing newline once
    slipped through ``$``)."""
    if ok:
        assert InferenceSpec(grid=grid).grid == grid
        return
    with pytest.raises(ValueError, match='expected a grid like "420x420" \\(rows x cols of PEs\\) or "auto", got '):
        InferenceSpec(grid=grid)
