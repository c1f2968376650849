"""``manifest.json``: what made an output folder, so that a result can be traced back and re-made.

Every command that writes a folder (``wsesim run --out/--png``, ``wsesim sweep``, ``wsesim plot``) leaves
one: the wsesim version (and the git commit when run from a checkout), the command line, the overrides as
given, the fully resolved hardware, model and experiment (after presets and overrides, every default
filled in, in the specs' unit-named fields: ``sram_bytes``, ``clock_hz``), the Python and package
versions, and when it was made. The timestamp and the host's wall-clock time live here only: the result
files beside it are a function of the inputs and the seed, the same bytes every time.

A folder that already holds another command's manifest (``wsesim plot`` into a sweep's folder) keeps it:
the new one is added under ``also.<kind>``.
"""

from __future__ import annotations

import json
import platform
import shlex
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from ..config.version import __version__
from .files import atomic_write_text

MANIFEST = "manifest.json"
PACKAGES = ("numpy", "simpy", "pydantic", "networkx", "pint", "pyyaml", "matplotlib", "dask", "distributed",
            "pandas")


def _git(*args: str) -> str | None:
    """What ``git ARGS`` prints in the checkout wsesim runs from (2 s at most), or None: an installed copy,
    no git, not a repository, or git failed."""
    # local: keeps subprocess out of output.manifest's import
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=2,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_commit() -> str | None:
    """The short commit of the checkout wsesim runs from (``git rev-parse --short HEAD``), or None."""
    commit = _git("rev-parse", "--short", "HEAD")
    return commit if commit and all(c in "0123456789abcdef" for c in commit) else None


def git_dirty() -> bool | None:
    """Whether the checkout wsesim runs from has uncommitted changes to tracked files (``git status
    --porcelain --untracked-files=no``): then its commit alone does not say which code ran. None where git
    does not answer."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


def version_text() -> str:
    """``wsesim --version``: the version, and the commit when run from a checkout (``, dirty`` when it has
    uncommitted changes)."""
    commit = git_commit()
    dirty = ", dirty: uncommitted changes" if commit and git_dirty() else ""
    return f"wsesim {__version__}" + (f" (commit {commit}{dirty})" if commit else "")


def command_line(argv: list[str] | None) -> str:
    """The command as typed (``wsesim sweep s.yaml --out o``), quoted where a shell would need it."""
    return shlex.join(["wsesim", *(argv if argv is not None else sys.argv[1:])])


def environment() -> dict[str, Any]:
    """The Python, the platform and the version of each package wsesim uses (installed ones only)."""
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "platform": platform.platform(), "packages": packages}


def resolved(spec: Any) -> dict[str, Any]:
    """An experiment spec as plain data: hardware, model, and the rest of the experiment; a request
    trace's SHA-256 beside its path (``trace_sha256``: the path alone does not say what was served)."""
    data = spec.model_dump(mode="json")
    out = {"hardware": data.pop("hardware"), "model": data.pop("model"), "experiment": data}
    if trace := getattr(getattr(spec, "inference", None), "trace_file", None):
        # local: keeps numpy out of output.manifest's import
        from ..config.request_trace import trace_digest

        out["trace_sha256"] = trace_digest(trace)
    return out


def manifest(kind: str, argv: list[str] | None, **content: Any) -> dict[str, Any]:
    """A manifest of ``kind`` (run, sweep, plot) with ``content`` (resolved specs, overrides, files...)."""
    return {"kind": kind, "wsesim_version": __version__, "wsesim_commit": git_commit(),
            "wsesim_dirty": git_dirty(),
            "command": command_line(argv),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), **content, **environment()}


def write_manifest(folder: str | Path, kind: str, argv: list[str] | None, files: list[Any], *,
                   loaded: Any = None, **content: Any) -> Path:
    """Write ``folder/manifest.json`` (atomically), the one composer of every command's manifest: its
    ``kind``, the command line ``argv``, the names of the ``files`` written beside it, the ``loaded``
    experiment (its sources and the specs resolved) when there is one, and ``content`` (overrides, a
    sweep's points, ``wall_s``...). One of another kind already there is kept, with this one added under
    ``also``. Returns its path."""
    specs = {} if loaded is None else {"sources": loaded.sources, **resolved(loaded.spec)}
    data = manifest(kind, argv, **specs, files=[Path(p).name for p in files], **content)
    existing = read_manifest(folder)
    if existing is not None and existing.get("kind") not in (None, data["kind"]):
        existing.setdefault("also", {})[data["kind"]] = data
        data = existing
    path = Path(folder) / MANIFEST
    atomic_write_text(path, json.dumps(data, indent=1, default=str) + "\n")
    return path


def read_manifest(folder: str | Path, kind: str | None = None) -> dict[str, Any] | None:
    """``folder``'s manifest.json (of command ``kind``, when given), or None: none there, unreadable, not a
    JSON object, or another command's."""
    path = Path(folder) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and (kind is None or data.get("kind") == kind) else None


def sweep_settings(folder: str | Path) -> dict[str, Any]:
    """The ``--set`` overrides a sweep in ``folder`` ran with (its manifest's ``base_overrides``), so that a
    re-plot titles its figures as the sweep's own plot did; {} when the folder holds no sweep manifest."""
    data = read_manifest(folder, "sweep")
    if data is None:
        return {}
    settings = data.get("base_overrides")
    return dict(settings) if isinstance(settings, dict) else {}
