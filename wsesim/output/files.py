"""Writing output files so that nothing is lost or half-written: whole files replaced atomically,
lines appended whole, and a folder held by one writer at a time.

* ``atomic_write_bytes``/``atomic_write_text``: a reader (or a killed run) never sees half a file.
* ``LineAppender``: one complete line per ``write`` call, flushed to disk (``fdatasync``) before it
  returns; a crash can leave at most an incomplete last line, which readers must ignore (one without
  its ``\\n``: see ``complete_lines``).
* ``folder_lock``: an exclusive ``flock`` on ``DIR/.wsesim.lock`` that records its holder's pid and
  command; a second writer gets a one-line ``ConfigError`` naming the holder. The kernel drops the lock
  when its holder dies, however it dies.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..config.errors import ConfigError

LOCK_NAME = ".wsesim.lock"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and an atomic rename, with
    the permissions a plain ``open(path, "w")`` would give."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:200]}.", suffix=".tmp")
    except OSError as e:
        raise refused(e, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise refused(e, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def refused(error: OSError, path: str | Path) -> Exception:
    """What the operating system refused (a full disk, a name too long, a folder where a file should go),
    as a one-line ``ConfigError`` naming the file: the user's to fix, not a bug."""
    if error.errno == errno.EISDIR or (error.errno in (errno.EEXIST, errno.ENOTEMPTY)
                                       and Path(path).is_dir()):
        return ConfigError(f"expected to write the file {Path(path).name}, got a folder in its place",
                           source=str(path))
    return ConfigError(f"cannot write {Path(path).name} ({error.strerror or type(error).__name__})",
                       source=str(path))


def atomic_write_text(path: str | Path, text: str) -> None:
    """``atomic_write_bytes`` of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def prepare_dir(path: str | Path) -> Path:
    """Create the output folder (and parents); a file in the way is a clear error."""
    path = Path(path)
    try:
        if path.exists() and not path.is_dir():
            raise ConfigError("expected a folder for the output, got an existing file", source=str(path))
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot create the output folder ({e.strerror or type(e).__name__})",
                          source=str(path)) from None
    return path


NAME_MAX = 255  # bytes in one file or folder name (Linux, macOS)


def check_names(path: str | Path) -> None:
    """Raise ``ConfigError`` if a name in ``path`` is longer than the file system takes (checked before
    anything runs, so that a long ``--out`` or sweep ``name:`` costs no time and writes nothing)."""
    for part in Path(path).parts:
        size = len(part.encode("utf-8", "surrogateescape"))
        if size > NAME_MAX:
            raise ConfigError(f"expected file and folder names of at most {NAME_MAX} bytes, got one of "
                              f"{size:,}", source=str(path)[:120] + "…")


def check_output_files(folder: str | Path, names: Sequence[str]) -> None:
    """Raise ``ConfigError`` if one of the files a command will write in ``folder`` is a folder (checked
    before anything runs or is written)."""
    for name in names:
        if (Path(folder) / name).is_dir():
            raise ConfigError(f"expected to write the file {name}, got a folder in its place",
                              source=str(Path(folder) / name))


def complete_lines(data: bytes) -> bytes:
    """``data`` up to and including its last ``\\n``: what a reader may trust of a file written by
    ``LineAppender`` (a crash mid-write leaves a last line without its newline)."""
    return data[: data.rfind(b"\n") + 1]


class LineAppender:
    """Appends whole lines to an existing file: each ``write`` is one ``os.write`` of the complete line
    (``O_APPEND``) followed by ``fdatasync``, so a row on disk is either whole or, after a crash, a
    last line without its newline. O(1) per line, however long the file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as e:
            raise refused(e, self.path) from None

    def write(self, line: str) -> None:
        if not line.endswith("\n"):
            line += "\n"
        data = memoryview(line.encode("utf-8", "surrogateescape"))
        try:
            while data:  # a regular file takes it all at once; a short write is finished, never dropped
                data = data[os.write(self._fd, data):]
            (getattr(os, "fdatasync", None) or os.fsync)(self._fd)
        except OSError as e:
            # a full disk: the rows so far are whole, this one is at most a last partial line
            raise refused(e, self.path) from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> LineAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def command_line() -> str:
    """This process's command, as a lock records it (``wsesim sweep s.yaml --resume``)."""
    argv = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]]
    if argv[0] in ("__main__.py", "-m", "-c"):
        argv[0] = "wsesim"
    return " ".join(argv)


@contextmanager
def folder_lock(folder: str | Path, command: str | None = None) -> Iterator[Path]:
    """Hold ``folder`` for writing: an exclusive, non-blocking ``flock`` on ``folder/.wsesim.lock``,
    which holds ``pid <pid>: <command>`` while held and is removed on release. Raises ``ConfigError``
    (one line, naming the holder) if another process holds it. Where ``fcntl`` is missing (Windows)
    nothing is locked."""
    try:  # local: POSIX only (elsewhere nothing is locked)
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield Path(folder)
        return
    path = Path(folder) / LOCK_NAME
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise ConfigError(f"cannot create the lock file {LOCK_NAME} ({e.strerror or type(e).__name__})",
                              source=str(folder)) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise ConfigError(f"another wsesim is writing to this folder ({holder}); wait for it to finish, "
                              "or give another --out", source=str(folder)) from None
        try:  # a holder that just released it removed the file: lock the new one instead
            current = os.stat(path).st_ino
        except FileNotFoundError:
            current = -1
        if current == os.fstat(fd).st_ino:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}: {command if command is not None else command_line()}\n".encode())
        yield Path(folder)
    finally:
        path.unlink(missing_ok=True)  # still locked: whoever opens the old file next sees it is gone
        os.close(fd)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 1000, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text.splitlines()[0] if text else "a process that has not yet written its pid"


def holder_of(folder: str | Path) -> str | None:
    """Who holds ``folder``'s lock now (``pid <pid>: <command>``), or None: checked without taking it or
    creating anything (a reader's check on a folder it does not write, which may be read-only)."""
    try:  # local: POSIX only (elsewhere nothing is locked)
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    try:
        fd = os.open(Path(folder) / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _holder(fd)
    finally:
        os.close(fd)
    return None


OWNING_KINDS = ("run", "infer", "tune", "sweep")
"""Commands whose folder is theirs: another of these refuses it (``plot`` and ``kernel --png`` add their
files to any folder, their manifest under ``also``)."""


def folder_owner(folder: str | Path) -> str | None:
    """The command whose output ``folder`` holds: ``sweep`` if it has a sweep's ``sweep.json``, else its
    ``manifest.json``'s kind if that is one of ``OWNING_KINDS``; None for an empty or unknown folder."""
    folder = Path(folder)
    if (folder / "sweep.json").exists():
        return "sweep"
    path = folder / "manifest.json"
    try:
        if not path.is_file() or path.stat().st_size > 2**24:
            return None
        kind = json.loads(path.read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return kind if kind in OWNING_KINDS else None


@contextmanager
def command_folder(folder: str | Path, kind: str, command: str | None = None) -> Iterator[Path]:
    """Hold ``folder`` (``folder_lock``) for command ``kind`` and refuse it, under the lock, when it holds
    another command's output (``folder_owner``): one line, before anything is written."""
    with folder_lock(folder, command) as held:
        check_folder_owner(held, kind)
        yield held


def check_folder_owner(folder: str | Path, kind: str) -> None:
    """Refuse ``folder`` to command ``kind`` if it holds another command's output (``folder_owner``); a
    command that runs long checks this before it runs, and again under the lock (``command_folder``)."""
    owner = folder_owner(folder) if Path(folder).is_dir() else None
    if kind in OWNING_KINDS and owner is not None and owner != kind:
        raise ConfigError(f"this folder holds the output of wsesim {owner}, not of wsesim {kind}: give "
                          "another folder (or delete it to reuse it)", source=str(folder))
