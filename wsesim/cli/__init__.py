"""The ``wsesim`` command: one module per command group; the only layer (with ``wsesim.output``) that
chooses paths and prints."""

from .main import command, main

__all__ = ["command", "main"]
