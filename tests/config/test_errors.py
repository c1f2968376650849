"""Errors by whose fault they are (wsesim.config.errors): ``ConfigError`` is bad input, ``InternalError``
a bug; and what an error line may quote of the input (``shown``)."""

from __future__ import annotations

import pytest

from wsesim.config.errors import (
    SHOWN_MAX,
    ConfigError,
    InternalError,
    UnitError,
    WsesimError,
    shown,
    shown_repr,
)


def test_an_internal_error_is_never_bad_input() -> None:
    assert issubclass(InternalError, WsesimError)
    assert not issubclass(InternalError, ConfigError)
    assert not issubclass(ConfigError, InternalError)
    assert issubclass(UnitError, ConfigError)


@pytest.mark.parametrize(("text", "expected"), [
    ("48 KiB", "48 KiB"),
    ("a\x01b", "a\\x01b"),
    ("line\nbreak\ttab\x7f", "line\\nbreak\\ttab\\x7f"),
    ("\x85\u2028", "\\x85\\u2028"),
    ("é ü 中", "é ü 中"),
])
def test_shown_escapes_control_characters(text: str, expected: str) -> None:
    assert shown(text) == expected


def test_shown_clips_to_200_characters_with_an_ellipsis() -> None:
    assert SHOWN_MAX == 200
    assert shown("x" * 200) == "x" * 200
    assert shown("x" * 201) == "x" * 199 + "…"
    assert shown("x" * 10_000, 50) == "x" * 49 + "…"
    assert len(shown("\x01" * 1000)) == 200  # escapes count towards the limit


def test_shown_repr_of_an_integer_too_long_for_repr() -> None:
    assert shown_repr([1, "a"]) == "[1, 'a']"
    assert shown_repr(10**5000) == "an integer of about 5000 digits"  # repr() refuses past 4300 digits
