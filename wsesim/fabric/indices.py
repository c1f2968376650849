"""Index arrays no wider than they need be.

The dispatch model's flat indices run up to (nodes × regions) or (links × groups): int32 holds them on a
block mesh, but not on a PE-level mesh with thousands of groups, so the width follows the largest index.
"""

from __future__ import annotations

import numpy as np

INT32_LIMIT = 2**31  # the first value int32 cannot hold


def index_dtype(largest: int) -> type[np.signedinteger]:
    """``np.int32`` when every index is at most ``largest`` and that is below 2³¹, else ``np.int64``."""
    return np.int32 if int(largest) < INT32_LIMIT else np.int64


def as_index(x: np.ndarray, largest: int) -> np.ndarray:
    """``x`` as ``index_dtype(largest)`` integers, without a copy when it already is."""
    return np.asarray(x).astype(index_dtype(largest), copy=False)


__all__ = ["INT32_LIMIT", "as_index", "index_dtype"]
