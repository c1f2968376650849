"""mlsysim 0.3.0's ``AttentionTilingScenario``, reproduced exactly: one head's attention memory at
``seq_len`` tokens, standard (S×S matrices) or tiled/flash (row statistics), with decimal KB/MB/GB and
whole tiles by floor division. Quantities are plain floats in bytes; ``mlsysim_units()`` gives
mlsysim's units. ``wsesim.model.memory`` generalises it to a batch, GQA and the backward pass
(docs/model.md §5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config.errors import ConfigError, shown_repr
from ..config.units import parse_quantity

# the bounds of the matching spec keys (config.specs: seq_len and the flash tile 2^24 tokens,
# head_dim 65,536, heads 16,384); at most 1,024 stored tensors of a kind (mlsysim stores 2-4);
# 64 B per value is 8x fp64
_MOST = {"seq_len": 2**24, "head_dim": 65_536, "tile": 2**24, "heads": 16_384, "io_tensors": 1024,
         "stored_square_matrices": 1024, "row_statistics": 1024}
_MOST_BYTES_PER_VALUE = 64.0


@dataclass(frozen=True)
class AttentionTiling:
    """One head's attention memory at ``seq_len`` tokens, standard (S×S matrices) or tiled (row stats).

    ``bytes_per_value`` is a size: "4 B", "16 bit", or a number of bytes given as a float/int by code
    (the CLI and YAML always pass a unit string). Raises ``ConfigError`` for seq_len, head_dim or
    tile ≤ 0, negative counts, a unitless string, a value past its bound (``_MOST``: those of the specs),
    or a tiled kernel that stores nothing (io_tensors and row_statistics both 0: ``stored_ratio`` would
    divide by zero).
    """

    seq_len: int
    head_dim: int
    tile: int
    heads: int
    bytes_per_value: float
    io_tensors: int = 4
    stored_square_matrices: int = 2
    row_statistics: int = 2

    def __post_init__(self) -> None:
        if isinstance(self.bytes_per_value, str):
            object.__setattr__(self, "bytes_per_value", _size(self.bytes_per_value, "bytes_per_value"))
        for name in ("seq_len", "head_dim", "tile", "heads", "io_tensors", "stored_square_matrices",
                     "row_statistics"):
            value, least = getattr(self, name), 1 if name in ("seq_len", "head_dim", "tile") else 0
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                kind = "a positive integer" if least else "a non-negative integer"
                raise ConfigError(f"expected {kind}, got {shown_repr(value)}", path=name)
            if value > _MOST[name]:
                raise ConfigError(f"expected at most {_MOST[name]}, got {shown_repr(value)}", path=name)
        if self.io_tensors == 0 and self.row_statistics == 0:  # stored_flash would be 0 B
            raise ConfigError("expected a positive count when io_tensors is 0, got 0", path="row_statistics")
        bpv = self.bytes_per_value
        if isinstance(bpv, bool) or not isinstance(bpv, (int, float)) or not (math.isfinite(bpv) and bpv > 0):
            raise ConfigError(f"expected a positive size, got {shown_repr(bpv)}", path="bytes_per_value")
        if bpv > _MOST_BYTES_PER_VALUE:
            raise ConfigError(f"expected at most 64 B per value, got {bpv:g} B", path="bytes_per_value")

    @property
    def score_matrix(self) -> float:
        """One head's S×S score matrix (bytes)."""
        return self.seq_len**2 * self.bytes_per_value

    @property
    def all_heads_scores(self) -> float:
        return self.heads * self.score_matrix

    @property
    def tile_bytes(self) -> float:
        return self.tile**2 * self.bytes_per_value

    @property
    def tiles_per_side(self) -> int:
        return self.seq_len // self.tile  # whole tiles only: a partial tile is dropped

    @property
    def tile_count(self) -> int:
        return self.tiles_per_side**2

    @property
    def qkv_bytes(self) -> float:
        return 3 * self.seq_len * self.head_dim * self.bytes_per_value

    @property
    def io_bytes(self) -> float:
        return self.io_tensors * self.seq_len * self.head_dim * self.bytes_per_value

    @property
    def stored_standard(self) -> float:
        return self.io_bytes + self.stored_square_matrices * self.score_matrix

    @property
    def stored_flash(self) -> float:
        return self.io_bytes + self.row_statistics * self.seq_len * self.bytes_per_value

    @property
    def stored_ratio(self) -> float:
        return self.stored_standard / self.stored_flash

    def as_dict(self) -> dict[str, float]:
        """mlsysim's property names; bytes for sizes, plain numbers for counts and the ratio."""
        return {name: getattr(self, name) for name in ATTENTION_PROPERTIES}

    def mlsysim_units(self) -> dict[str, tuple[float, str]]:
        """Each property in the unit mlsysim reports it in (decimal KB/MB/GB)."""
        return {name: (getattr(self, name) / scale, unit) for name, (scale, unit) in _MLSYSIM_UNITS.items()}


_MLSYSIM_UNITS = {
    "score_matrix": (1e6, "MB"), "all_heads_scores": (1e9, "GB"), "tile_bytes": (1e3, "KB"),
    "tiles_per_side": (1, "count"), "tile_count": (1, "count"), "qkv_bytes": (1e6, "MB"),
    "io_bytes": (1e6, "MB"), "stored_standard": (1e6, "MB"), "stored_flash": (1e6, "MB"),
    "stored_ratio": (1, "dimensionless"),
}
"""mlsysim's properties, in its order, with the (scale, unit) it reports each in."""
ATTENTION_PROPERTIES = tuple(_MLSYSIM_UNITS)


def _size(text: str, name: str) -> float:
    try:
        return parse_quantity(text, "size")
    except ConfigError as e:
        raise e.located(path_prefix=name) from None
