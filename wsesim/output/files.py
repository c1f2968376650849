"""Writing output files atomically: a reader (or a killed run) never sees half a file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and an atomic rename, with
    the permissions a plain ``open(path, "w")`` would give."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """``atomic_write_bytes`` of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def prepare_dir(path: str | Path) -> Path:
    """Create the output folder (and parents); a file in the way is a clear error."""
    from ..config.errors import ConfigError

    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError("expected a folder for the output, got an existing file", source=str(path))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot create the output folder ({e.strerror or type(e).__name__})",
                          source=str(path)) from None
    return path
