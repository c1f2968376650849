"""Unit strings fixed at the boundary (wsesim.config.units): sizes, frequencies, bandwidths, times, cycles and
fractions parse into base-unit floats; bare numbers, wrong dimensions, bools and non-finite values are
refused with a one-line ``UnitError``."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wsesim.config import units
from wsesim.config.errors import ConfigError, InternalError, UnitError
from wsesim.config.units import format_bytes, parse_quantity

DIMENSIONS = ("size", "frequency", "bandwidth", "time", "cycles", "fraction")


@pytest.mark.parametrize(
    ("text", "dimension", "expected"),
    [
        # sizes: binary prefixes are powers of 1024, decimal ones powers of 1000; 8 bit = 1 B
        ("48 KiB", "size", 48 * 1024),
        ("48 kB", "size", 48_000),
        ("1 MiB", "size", 1024**2),
        ("4 GB", "size", 4e9),
        ("2 B", "size", 2),
        ("1 byte", "size", 1),
        ("16 bit", "size", 2),
        ("32 bit", "size", 4),
        ("1 kbit", "size", 125),
        ("  48 KiB  ", "size", 49152),  # surrounding blanks are ignored
        # frequency in hertz
        ("850 MHz", "frequency", 850e6),
        ("1 GHz", "frequency", 1e9),
        ("1.1 GHz", "frequency", 1.1e9),
        # bandwidth in bytes per second: 1.2 Tbit/s = 1.2e12 / 8 = 1.5e11 B/s (WSE-2's I/O)
        ("1.2 Tbit/s", "bandwidth", 1.5e11),
        ("150 GB/s", "bandwidth", 1.5e11),
        ("4 GB/s", "bandwidth", 4e9),
        ("100 Gbit/s", "bandwidth", 12.5e9),
        # time in seconds
        ("2 ns", "time", 2e-9),
        ("1.5 us", "time", 1.5e-6),
        # cycles: a count with a cycle word
        ("7 cycles", "cycles", 7),
        ("1 cycle", "cycles", 1),
        ("0 cycles", "cycles", 0),
        ("2.5 cycles", "cycles", 2.5),
        ("1e3 cycles", "cycles", 1000),
        # fraction: a percentage or a bare number
        ("25 %", "fraction", 0.25),
        ("25%", "fraction", 0.25),
        ("0.25", "fraction", 0.25),
        (0.25, "fraction", 0.25),
        (0, "fraction", 0.0),
    ],
)
def test_parses_into_the_base_unit(text: object, dimension: str, expected: float) -> None:
    result = parse_quantity(text, dimension)  # type: ignore[arg-type]
    assert isinstance(result, float)
    assert result == pytest.approx(expected, rel=1e-12, abs=0)


def test_binary_and_decimal_prefixes_differ() -> None:
    """KiB = 1024 B and kB = 1000 B: 48 KiB - 48 kB = 48 · 24 = 1152 B."""
    assert parse_quantity("48 KiB", "size") - parse_quantity("48 kB", "size") == 1152


def test_bits_are_an_eighth_of_bytes() -> None:
    assert parse_quantity("1 Tbit/s", "bandwidth") * 8 == parse_quantity("1 TB/s", "bandwidth")
    assert parse_quantity("64 bit", "size") == parse_quantity("8 B", "size") == 8


@pytest.mark.parametrize("dimension", [d for d in DIMENSIONS if d != "fraction"])
@pytest.mark.parametrize("value", [48, 48.0, 0])
def test_bare_number_is_refused_where_a_unit_is_needed(value: object, dimension: str) -> None:
    with pytest.raises(UnitError, match=r"\(a bare number\)$") as e:
        parse_quantity(value, dimension)  # type: ignore[arg-type]
    assert str(e.value).startswith(f"expected a {'cycle count' if dimension == 'cycles' else dimension}")


@pytest.mark.parametrize("dimension", [d for d in DIMENSIONS if d not in ("fraction", "cycles")])
def test_number_string_without_unit_is_refused(dimension: str) -> None:
    with pytest.raises(UnitError, match=r'got "48" \(no unit\)$'):
        parse_quantity("48", dimension)  # type: ignore[arg-type]


def test_cycles_need_the_cycle_word() -> None:
    with pytest.raises(UnitError, match=r'^expected a cycle count like "2 cycles", got "2"$'):
        parse_quantity("2", "cycles")


@pytest.mark.parametrize(
    ("text", "dimension"),
    [
        ("48 KiB", "frequency"),
        ("48 KiB", "bandwidth"),
        ("1 GHz", "size"),
        ("1.2 Tbit/s", "size"),
        ("150 GB/s", "frequency"),
        ("2 ns", "size"),
        ("850 MHz", "bandwidth"),
        ("3 KiB", "fraction"),
        ("2 cycles", "time"),
        ("1 s", "cycles"),
        ("1 m", "size"),
    ],
)
def test_wrong_dimension_is_refused(text: str, dimension: str) -> None:
    with pytest.raises(UnitError) as e:
        parse_quantity(text, dimension)  # type: ignore[arg-type]
    message = str(e.value)
    assert message.startswith("expected a ")
    assert f'got "{text}"' in message


def test_wrong_dimension_message_names_what_came() -> None:
    with pytest.raises(UnitError) as e:
        parse_quantity("48 KiB", "frequency")
    assert str(e.value) == 'expected a frequency like "850 MHz", got "48 KiB" (a KiB quantity)'


@pytest.mark.parametrize("dimension", DIMENSIONS)
@pytest.mark.parametrize("value", [True, False])
def test_bool_is_refused(value: bool, dimension: str) -> None:
    """YAML reads ``yes``/``true`` as a bool; it is never a quantity (not even the fraction 1)."""
    with pytest.raises(UnitError, match=r"\(a bool\)$"):
        parse_quantity(value, dimension)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "dimension"),
    [
        (math.nan, "fraction"),
        (math.inf, "fraction"),
        (-math.inf, "fraction"),
        ("nan", "fraction"),
        ("inf B", "size"),
        ("NaN KiB", "size"),
        ("nan GHz", "frequency"),
        ("inf Tbit/s", "bandwidth"),
        ("1e400 cycles", "cycles"),
        ("1e400 B", "size"),
        (10**400, "fraction"),  # a YAML integer too long for a float
        ("1" + "0" * 400 + " B", "size"),
    ],
)
def test_non_finite_is_refused(value: object, dimension: str) -> None:
    with pytest.raises(UnitError, match=r"\(not finite\)$"):
        parse_quantity(value, dimension)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["abc", "", "48 KB", "0x10 B", "1 B + 1 Hz", None, [48], {"value": 48}])
def test_unparseable_is_refused(value: object) -> None:
    """"KB" is ambiguous (1000 or 1024) and refused: say "kB" or "KiB"."""
    with pytest.raises(UnitError) as e:
        parse_quantity(value, "size")
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("expected a size")


def test_unit_error_is_a_one_line_config_error_and_value_error() -> None:
    with pytest.raises(UnitError) as e:
        parse_quantity(48, "size")
    assert isinstance(e.value, ConfigError)
    assert isinstance(e.value, ValueError)
    assert e.value.source is None and e.value.path is None  # the caller adds file and key path
    assert str(e.value) == 'expected a size like "48 KiB", got 48 (a bare number)'


def test_unknown_dimension_is_a_programming_error() -> None:
    """wsesim's own modules name the dimension: a wrong one is an InternalError (exit 1), not bad input."""
    with pytest.raises(InternalError, match="unknown dimension") as e:
        parse_quantity("1 B", "mass")  # type: ignore[arg-type]
    assert not isinstance(e.value, ConfigError)


# ------------------------------------------------------------------------------------------ properties


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=0, max_value=2**40))
def test_kib_is_1024_bytes(n: int) -> None:
    assert parse_quantity(f"{n} KiB", "size") == n * 1024


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=0, max_value=2**40))
def test_bits_and_bytes_agree(n: int) -> None:
    assert parse_quantity(f"{8 * n} bit", "size") == parse_quantity(f"{n} B", "size") == n


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=1, max_value=10**6))
def test_gbit_per_s_is_an_eighth_of_a_gigabyte(n: int) -> None:
    assert parse_quantity(f"{n} Gbit/s", "bandwidth") == pytest.approx(n * 1e9 / 8, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(p=st.integers(min_value=0, max_value=100))
def test_percent_is_a_hundredth(p: int) -> None:
    assert parse_quantity(f"{p} %", "fraction") == pytest.approx(p / 100, rel=1e-12, abs=1e-15)


# --------------------------------------------------------------------------------------------- format


@pytest.mark.parametrize(
    ("n", "binary", "expected"),
    [
        (49152, True, "48 KiB"),
        (49152, False, "49.15 kB"),
        (0, True, "0 B"),
        (1023, True, "1023 B"),
        (1024, True, "1 KiB"),
        (36_642_816_000, False, "36.64 GB"),
        (2**60, True, "1024 PiB"),  # beyond the largest unit the number keeps growing
    ],
)
def test_format_bytes(n: float, binary: bool, expected: str) -> None:
    assert format_bytes(n, binary=binary) == expected


@pytest.mark.parametrize("symbol", sorted(units.FAST_UNITS))
def test_fast_path_agrees_with_pint(symbol: str) -> None:
    """Every unit the fast path parses without pint gives pint's value, to 1e-12 relative."""
    dimension, _ = units.FAST_UNITS[symbol]
    text = f"3.5 {symbol}"
    pint_symbol = "percent" if symbol == "%" else symbol
    by_pint = 3.5 * units._unit_factor(pint_symbol, dimension, text)
    assert units._parse_string(text, dimension) == pytest.approx(by_pint, rel=1e-12)


@pytest.mark.parametrize(("text", "dimension"), [("9**9**9 KiB", "size"), ("10**10**10 B", "size"),
                                                  ("48 KiB + 1 B", "size"), ("25 % %", "fraction"),
                                                  ("2 * 3 GHz", "frequency"), ("(1) ns", "time"),
                                                  ("1 B/s/s", "bandwidth"), ("1 KiB**2", "size")])
def test_a_quantity_is_a_number_and_a_unit_never_an_expression(text: str, dimension: str) -> None:
    """Issue 22 #2: pint once evaluated the string ("9**9**9 KiB" hung every tool that read it)."""
    with pytest.raises(UnitError, match="not a number and a unit"):
        parse_quantity(text, dimension)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "expected"), [("1.2 Tb/s", 1.5e11), ("1.2 Tbit/s", 1.5e11), ("100 Gb/s", 12.5e9),
                                                ("220 Pb/s", 220e15 / 8), ("100 Gbps", 12.5e9)])
def test_bit_per_second_spellings(text: str, expected: float) -> None:
    """README writes "1.2 Tb/s" (a terabit per second; pint alone reads "b" as a barn)."""
    assert parse_quantity(text, "bandwidth") == pytest.approx(expected, rel=1e-12)


# ------------------------------------------------------------------------------- JSON Schema patterns


@pytest.mark.parametrize("dimension", ["size", "frequency", "bandwidth", "time", "cycles", "fraction"])
def test_every_string_the_unit_pattern_admits_parses_to_its_dimension(dimension: str) -> None:
    """The pattern ``wsesim schema`` puts on a quantity never admits what wsesim refuses (no wrong
    dimension, no unknown unit); shipped spellings ("48 KiB", "1.2 Tbit/s", "25 %") all match."""
    pattern = re.compile(units.unit_pattern(dimension))  # type: ignore[arg-type]
    symbols = [u for u, (d, _) in units.FAST_UNITS.items() if d == dimension] or ["cycles", "cycle", "cyc"]
    for symbol in symbols:
        for number in ("48", "1.2", ".5", "1e3", "0"):
            for text in (f"{number} {symbol}", f"{number}{symbol}", f"  {number}  {symbol} "):
                assert pattern.match(text), text
                assert parse_quantity(text, dimension) >= 0  # type: ignore[arg-type]
    others = [u for u, (d, _) in units.FAST_UNITS.items() if d != dimension]
    for text in ["48", "KiB", "48 KiBs", "-1 B", "1 K", "48 kelvin", "1..2 B", *[f"1 {u}" for u in others]]:
        assert not pattern.match(text), text


def test_the_unit_patterns_cover_the_shipped_presets() -> None:
    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[2]
    seen = 0
    for path in [*repo.glob("hardware/*.yaml")]:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if data["kind"] == "gpu":  # a GPU's keys: test_the_unit_patterns_cover_the_gpu_presets
            continue
        for section, key, dimension in [(None, "clock", "frequency"), ("pe", "sram", "size"),
                                        ("fabric", "link_width", "size"), ("fabric", "hop_latency", "cycles"),
                                        ("io", "bandwidth", "bandwidth"), ("runtime", "gemm_efficiency", "fraction")]:
            value = data[key] if section is None else data[section][key]
            assert re.match(units.unit_pattern(dimension), value), (path.name, key, value)  # type: ignore[arg-type]
            seen += 1
    assert seen >= 18


def test_the_unit_patterns_cover_the_gpu_presets() -> None:
    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[2]
    seen = 0
    for path in repo.glob("hardware/*.yaml"):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if data["kind"] != "gpu":
            continue
        for section, key, dimension in [(None, "clock", "frequency"), ("hbm", "bandwidth", "bandwidth"),
                                        ("hbm", "capacity", "size"), (None, "l2", "size"),
                                        ("node", "nvlink", "bandwidth"), ("node", "network_latency", "time"),
                                        ("power", "gpu", "power"), ("runtime", "tensor_efficiency", "fraction")]:
            value = data[key] if section is None else data[section][key]
            assert re.match(units.unit_pattern(dimension), value), (path.name, key, value)  # type: ignore[arg-type]
            seen += 1
    assert seen == 3 * 8  # h100, h200, b200
