"""Error types, by whose fault they are.

* ``ConfigError``: bad input — what the user wrote (a file, a key, a value, an option). Its ``str`` is
  one line, ``FILE: KEY.PATH: expected …, got …``; the CLI prints it and exits with code 2.
* ``InternalError``: a broken invariant inside wsesim — a bug, never the user's fault. The CLI reports
  it (like any other unexpected exception) as ``wsesim: internal error: …`` and exits with code 1.

``shown(text)`` is how an error quotes what came from a file or the command line: control characters
escaped (the line stays one line) and at most ``SHOWN_MAX`` characters (an ellipsis marks the cut).
"""

from __future__ import annotations

import re

SHOWN_MAX = 200
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def shown(text: object, limit: int = SHOWN_MAX) -> str:
    """``text`` as an error line may quote it: control characters as ``\\xNN`` escapes, at most
    ``limit`` characters, ending in "…" when cut."""
    s = _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def shown_repr(value: object) -> str:
    """``repr(value)`` as an error may quote it (``shown``); an integer too long for ``repr`` (past
    4300 digits) by its size."""
    try:
        return shown(repr(value))
    except ValueError:
        bits = value.bit_length() if isinstance(value, int) else 0
        return f"an integer of about {int(bits * 0.30103)} digits"


class WsesimError(Exception):
    """Base class of wsesim's own errors."""


class InternalError(WsesimError):
    """A broken invariant inside wsesim (a wrong-length vector passed between its own modules, an
    unknown dimension name): a bug to report, never bad input. Not a ``ConfigError``, so the CLI says
    "internal error" and exits with code 1."""


class ConfigError(WsesimError):
    """Bad input: a file, key or value that does not describe a valid configuration.

    ``source`` names the file (or ``--set``, or ``<inline>``), ``path`` the dotted key path.
    """

    def __init__(self, message: str, *, source: str | None = None, path: str | None = None) -> None:
        self.message = message
        self.source = source
        self.path = path
        super().__init__(self.__str__())

    def __str__(self) -> str:
        parts = [p for p in (self.source, self.path) if p]
        return ": ".join([*parts, self.message])

    def located(self, *, source: str | None = None, path_prefix: str | None = None) -> ConfigError:
        """The same error with a file and/or a key-path prefix filled in."""
        path = self.path
        if path_prefix:
            path = f"{path_prefix}.{path}" if path else path_prefix
        return ConfigError(self.message, source=self.source or source, path=path)


class UnitError(ConfigError, ValueError):
    """A quantity string that does not parse, or has the wrong dimension."""
