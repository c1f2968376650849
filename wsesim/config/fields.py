"""Field types of the specs: quantities written as unit strings within physical bounds, bounded
integers, and text without control characters. Each carries its JSON Schema (``wsesim schema``): a
quantity is a string matching the unit spellings of ``units.unit_pattern`` (a fraction may also be a
bare number), with an example and its range in the description. And the one reader of a grid of PEs
written "PxQ" (``parse_grid``), for the specs and the command line alike.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

from .errors import ConfigError, UnitError, shown, shown_repr
from .units import ARTICLES, parse_quantity, unit_pattern


def quantity(dimension: str, low: str, high: str, example: str, *, below: bool = False) -> Any:
    """A float field written as a unit string of ``dimension`` (a bare number too for a fraction), in
    ``[low, high]`` (``[low, high)`` when ``below``); the bounds are unit strings, parsed once here."""
    lo, hi = parse_quantity(low, dimension), parse_quantity(high, dimension)  # type: ignore[arg-type]
    span = f"from {low} to {'below ' if below else ''}{high}"
    article = ARTICLES[dimension]

    def parse(value: Any) -> float:
        try:
            x = parse_quantity(value, dimension)  # type: ignore[arg-type]
        except UnitError as e:
            raise PydanticCustomError("quantity", "{msg}", {"msg": e.message}) from None
        if not (lo <= x < hi if below else lo <= x <= hi):
            got = f'"{shown(value)}"' if isinstance(value, str) else shown_repr(value)
            raise PydanticCustomError("quantity", "{msg}", {"msg": f"expected {article} {span}, got {got}"})
        return x

    string = {"type": "string", "pattern": unit_pattern(dimension)}  # type: ignore[arg-type]
    description = f'{article}, e.g. "{example}" ({span})'
    if dimension == "fraction":
        number = {"type": "number", "minimum": lo, ("exclusiveMaximum" if below else "maximum"): hi}
        schema: dict[str, Any] = {"anyOf": [number, string], "description": description}
    else:
        schema = {**string, "description": description}
    return Annotated[float, BeforeValidator(parse), WithJsonSchema(schema)]


def count(high: int, low: int = 1) -> Any:
    """An integer field in ``[low, high]`` (pydantic's bounds: its messages say "a value > 0")."""
    return Annotated[int, Field(gt=0, le=high) if low == 1 else Field(ge=low, le=high)]


def text(*, multiline: bool) -> Any:
    """A string field without control characters (tab and newline allowed when ``multiline``): what is
    printed back to a terminal stays what it looks like."""
    ranges = "\\u0000-\\u0008\\u000b-\\u001f" if multiline else "\\u0000-\\u001f"
    bad = re.compile(f"[{ranges}\\u007f-\\u009f]")

    def check(value: str) -> str:
        m = bad.search(value)
        if m:
            message = (f'expected text without control characters, got "{shown(value)}" '
                       f'(U+{ord(m.group()):04X})')
            raise PydanticCustomError("cross_field", "{msg}", {"msg": message})
        return value

    schema = {"type": "string", "pattern": f"^[^{ranges}\\u007f-\\u009f]*$"}
    return Annotated[str, AfterValidator(check), WithJsonSchema(schema)]


Name = text(multiline=False)
Description = text(multiline=True)


GRID_SIDE_DIGITS = 5
"""At most 99,999 PEs a side: far past any wafer (WSE-3's mesh is 755 x 1,170), and short enough that no
side reaches ``int``'s digit limit (a 5,000-digit side was an internal error, not a message)."""
_GRID = re.compile(rf"\s*([0-9]{{1,{GRID_SIDE_DIGITS}}})\s*[xX×]\s*([0-9]{{1,{GRID_SIDE_DIGITS}}})\s*")


def parse_grid(text: object, *, path: str = "grid") -> tuple[int, int]:
    """``"420x420"`` -> (420, 420): a grid of rows × cols PEs, each side a positive integer of ASCII digits
    (``[0-9]``: no "٤" or "²", which ``int`` would read), the sides joined by x, X or ×, spaces around
    them allowed (``" 420 × 420"``). ``format_grid`` writes the one spelling a spec stores. Raises
    ``ConfigError`` at ``path`` for anything else."""
    m = _GRID.fullmatch(text) if isinstance(text, str) else None
    if not m or min(int(m.group(1)), int(m.group(2))) < 1:
        raise ConfigError(f'expected a grid like "420x420" (rows x cols of PEs), got {shown_repr(text)}',
                          path=path)
    return int(m.group(1)), int(m.group(2))


_SHAPE = re.compile(r"^\s*([0-9]+)\s*[xX×]\s*([0-9]+)\s*[xX×]\s*([0-9]+)\s*$", re.ASCII)


def parse_shape(text: object, *, path: str = "shape") -> tuple[int, int, int]:
    """``"1x16384x16384"`` -> (1, 16384, 16384): a GEMM's or GEMV's M × K × N, each a positive integer of
    ASCII digits (at most 15), joined by x, X or ×. Raises ``ConfigError`` at ``path`` for anything else."""
    m = _SHAPE.match(text) if isinstance(text, str) else None
    if not m or min(int(g) for g in m.groups()) <= 0 or max(len(g) for g in m.groups()) > 15:
        raise ConfigError('expected MxKxN of positive integers like "1x16384x16384", '
                          f'got "{shown(str(text))}"', path=path)
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def format_grid(rows: int, cols: int) -> str:
    """(420, 420) -> ``"420x420"``: how a spec writes a grid (``parse_grid`` reads it back)."""
    return f"{rows}x{cols}"
