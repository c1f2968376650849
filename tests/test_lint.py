"""The package passes ``ruff check`` with the project's own settings (pyproject.toml ``[tool.ruff]``).

This test is how CI runs the linter: CI runs only the README's test command (``.ci/run``), so a lint
rule the package breaks, such as a line longer than ``line-length``, fails the suite here rather than
being noticed later. ruff comes with the test extra.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_passes_on_the_package() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                             "wsesim"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"ruff check wsesim failed:\n{result.stdout}{result.stderr}"
