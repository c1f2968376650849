"""Error types. Every error wsesim raises on bad input is a ``ConfigError`` whose ``str`` is one line:
``FILE: KEY.PATH: expected …, got …``. The CLI prints that line and exits with code 2."""

from __future__ import annotations


class WsesimError(Exception):
    """Base class of wsesim's own errors."""


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
