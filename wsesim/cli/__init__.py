"""The ``wsesim`` command: one module per command group; the only layer (with ``wsesim.output``) that
chooses paths and prints."""

from .main import main

__all__ = ["main"]
