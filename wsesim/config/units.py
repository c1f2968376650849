"""Unit strings at the boundary: "48 KiB", "850 MHz", "1.2 Tbit/s", "2 cycles", "25 %".

Every quantity is fixed once, here, into a float in a base unit named by its dimension:

==============  ==================  ============================
dimension       base unit           example
==============  ==================  ============================
``size``        bytes               "48 KiB" -> 49152.0
``frequency``   hertz               "850 MHz" -> 8.5e8
``bandwidth``   bytes per second    "1.2 Tbit/s" -> 1.5e11
``time``        seconds             "2 ns" -> 2e-9
``cycles``      clock cycles        "7 cycles" -> 7.0
``fraction``    dimensionless       "25 %" -> 0.25 (a bare 0.25 too)
``energy``      joules              "0.3 pJ" -> 3e-13
``power``       watts               "23 kW" -> 23000.0
==============  ==================  ============================

A bare number is refused for every dimension but ``fraction``: "48" is not a size.
Simulated time inside wsesim is always in clock cycles.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Literal

from .errors import InternalError, UnitError, shown, shown_repr

Dimension = Literal["size", "frequency", "bandwidth", "time", "cycles", "fraction", "energy", "power"]

# root unit (as pint reports it), the factor from that root to our base unit, and an example for errors
_DIMENSIONS: dict[str, tuple[str, float, str]] = {
    "size": ("bit", 1 / 8, '"48 KiB"'),
    "frequency": ("1 / second", 1.0, '"850 MHz"'),
    "bandwidth": ("bit / second", 1 / 8, '"1.2 Tbit/s"'),
    "time": ("second", 1.0, '"2 ns"'),
    "fraction": ("dimensionless", 1.0, '"25 %"'),
    # pint's root of mass is the gram: a joule is 1000 g·m²/s²
    "energy": ("gram * meter ** 2 / second ** 2", 1e-3, '"0.3 pJ"'),
    "power": ("gram * meter ** 2 / second ** 3", 1e-3, '"23 kW"'),
}
ARTICLES = {"size": "a size", "frequency": "a frequency", "bandwidth": "a bandwidth", "time": "a time",
            "cycles": "a cycle count", "fraction": "a fraction", "energy": "an energy",
            "power": "a power"}
_CYCLES = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(cycles?|cyc)\s*$")


@lru_cache(maxsize=1)
def _registry() -> Any:
    # imported lazily: building pint's registry is slow, and only units outside ``_fast_units`` need it
    import pint

    return pint.UnitRegistry()


def _fast_units() -> dict[str, tuple[str, float]]:
    """The unit symbols presets use, with their dimension and factor to our base unit. Parsed without
    pint (whose registry is slow to build); a test checks every entry against pint."""
    table: dict[str, tuple[str, float]] = {"B": ("size", 1.0), "bit": ("size", 1 / 8),
                                           "%": ("fraction", 0.01), "Hz": ("frequency", 1.0),
                                           "s": ("time", 1.0)}
    decimal = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
    binary = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
    for prefix, scale in {**decimal, **binary}.items():
        table[f"{prefix}B"] = ("size", scale)
        table[f"{prefix}bit"] = ("size", scale / 8)
        table[f"{prefix}B/s"] = ("bandwidth", scale)
        table[f"{prefix}bit/s"] = ("bandwidth", scale / 8)
    for prefix, scale in {"k": 1e3, "M": 1e6, "G": 1e9}.items():
        table[f"{prefix}Hz"] = ("frequency", scale)
    table.update({"B/s": ("bandwidth", 1.0), "bit/s": ("bandwidth", 1 / 8), "ms": ("time", 1e-3),
                  "us": ("time", 1e-6), "ns": ("time", 1e-9)})
    for prefix, scale in {"f": 1e-15, "p": 1e-12, "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0}.items():
        table[f"{prefix}J"] = ("energy", scale)
    for prefix, scale in {"": 1.0, "k": 1e3, "M": 1e6}.items():
        table[f"{prefix}W"] = ("power", scale)
    del table["KB"], table["Kbit"], table["KB/s"], table["Kbit/s"]  # pint reads "K" as kelvin
    return table


FAST_UNITS = _fast_units()
_NUMBER = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"


def unit_pattern(dimension: Dimension) -> str:
    """A regular expression, valid in Python and in JSON Schema (ECMA-262), for the unit strings of
    ``dimension`` that the fast path reads (``FAST_UNITS``, "N cycles", "N %"): every string it matches
    parses to that dimension (a test checks). pint reads more spellings ("850 megahertz"); those are
    accepted too, but an editor checking against this pattern will flag them."""
    if dimension == "cycles":
        units = ["cycles", "cycle", "cyc"]
    else:
        units = sorted((u for u, (d, _) in FAST_UNITS.items() if d == dimension), key=lambda u: (-len(u), u))
    alternatives = "|".join(re.escape(u).replace("\\%", "%") for u in units)
    return rf"^\s*{_NUMBER}\s*(?:{alternatives})\s*$"


MAX_TEXT = 10_000
"""The longest quantity string read (a number and a unit need a few dozen characters; a long number is
still a number, past a double's range one that is not finite)."""
# no backtracking: linear in its length
_LINEAR_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
# a number and a unit, nothing else: the unit one word, a word per word ("Tbit/s") or "%". Read by this
# pattern alone, never evaluated: "9**9**9 KiB", "48 KiB + 1 B" and "25 % %" do not match it
_QUANTITY = re.compile(rf"^([-+]?(?:{_LINEAR_NUMBER}|(?i:nan|inf(?:inity)?)))?\s*"
                       r"([A-Za-z]+(?:\s*/\s*[A-Za-z]+)?|%)?$")
# "Tb/s" is a terabit per second (README, SwarmX); pint alone would read "b" as a barn
_BIT_ALIASES = {f"{p}b/s": f"{p}bit/s" for p in ("", "k", "M", "G", "T", "P")}


@lru_cache(maxsize=4096)
def _parse_string(text: str, dimension: str) -> float:
    if dimension == "cycles":
        m = _CYCLES.match(text)
        if not m:
            raise UnitError(f'expected a cycle count like "2 cycles", got "{shown(text)}"')
        return float(m.group(1))
    _, _, example = _DIMENSIONS[dimension]
    expected = f"expected {ARTICLES[dimension]} like {example}"
    if len(text) > MAX_TEXT:
        raise UnitError(f'{expected}, got "{shown(text, 40)}" (a string of {len(text):,} characters, '
                        'not a quantity)')
    m = _QUANTITY.match(text)
    if not m or m.group(1) is None:
        raise UnitError(f'{expected}, got "{shown(text)}" (not a number and a unit)')
    number, unit = m.group(1), re.sub(r"\s+", "", m.group(2) or "")
    unit = _BIT_ALIASES.get(unit, unit)
    if not unit:
        if dimension == "fraction":
            return float(number)
        raise UnitError(f'{expected}, got "{shown(text)}" (no unit)')
    fast = FAST_UNITS.get(unit)
    if fast is not None and fast[0] == dimension:
        return float(number) * fast[1]
    return float(number) * _unit_factor(unit, dimension, text)


def _unit_factor(unit: str, dimension: str, text: str) -> float:
    """The factor from ``unit`` (one unit word, or a word per word: never an expression) to the base unit
    of ``dimension``, by pint, which reads more spellings ("megahertz", "Gbps")."""
    root, factor, example = _DIMENSIONS[dimension]
    ureg = _registry()
    try:
        units = ureg.parse_units(unit)
    except Exception:
        raise UnitError(f'expected {ARTICLES[dimension]} like {example}, got "{shown(text)}" (unknown unit '
                        f'"{shown(unit)}")') from None
    mag, root_units = ureg.get_root_units(units)
    if str(root_units) != root or (dimension != "fraction" and str(units) == "dimensionless"):
        q = ureg.Quantity(1.0, units)
        raise UnitError(f'expected {ARTICLES[dimension]} like {example}, got "{shown(text)}" '
                        f'(a {q.units:~P} quantity)')
    return float(mag) * factor


def parse_quantity(value: Any, dimension: Dimension) -> float:
    """Parse ``value`` as a quantity of ``dimension`` into its base unit (see the module table).

    Raises ``UnitError`` (one line, no key path: the caller adds it) for a bare number where a unit
    is needed, an unparseable string, a wrong dimension, a bool, or a non-finite value.
    """
    if dimension not in ARTICLES:
        raise InternalError(f"unknown dimension {dimension!r}")  # wsesim's own call sites name it
    if isinstance(value, bool):
        raise UnitError(f"expected {ARTICLES[dimension]}, got {shown_repr(value)} (a bool)")
    try:
        if isinstance(value, (int, float)):
            if dimension != "fraction":
                example = '"2 cycles"' if dimension == "cycles" else _DIMENSIONS[dimension][2]
                raise UnitError(f"expected {ARTICLES[dimension]} like {example}, got {shown_repr(value)} "
                                "(a bare number)")
            result = float(value)
        elif isinstance(value, str):
            result = _parse_string(value.strip(), dimension)
        else:
            raise UnitError(f"expected {ARTICLES[dimension]}, got {shown_repr(value)} "
                            f"(a {type(value).__name__})")
    except OverflowError:  # an integer beyond float's range ("1000…000 B", or a YAML integer that long)
        result = math.inf
    if not math.isfinite(result):
        raise UnitError(f"expected {ARTICLES[dimension]}, got {shown_repr(value)} (not finite)")
    return result


def format_bytes(n: float, *, binary: bool = True) -> str:
    """Human-readable size: 49152 -> "48 KiB" (binary) or "49.152 kB" (decimal)."""
    base, units = (1024.0, ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]) if binary else (
        1000.0, ["B", "kB", "MB", "GB", "TB", "PB"])
    x = float(n)
    for unit in units:
        if abs(x) < base or unit == units[-1]:
            return f"{x:.4g} {unit}"
        x /= base
    raise AssertionError("unreachable")
