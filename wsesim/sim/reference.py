"""The reference engine (placeholder: being written)."""

from __future__ import annotations

from .engine import simulate

__all__ = ["simulate"]
