"""Fixtures of the command-line tests: a folder no one can write to."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """An empty folder that refuses new files: mode 555, and for root (whom modes do not stop) the
    immutable attribute (``chattr +i``); skipped where neither holds."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    immutable = False
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        r = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, check=False)
        if r.returncode != 0:
            folder.chmod(0o755)
            pytest.skip("running as root on a file system without chattr +i: nothing is read-only to root")
        immutable = True
    try:
        yield folder
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)
