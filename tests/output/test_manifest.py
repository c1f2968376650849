"""manifest.json (wsesim.output.manifest): what it says of the code that ran."""

from __future__ import annotations

from typing import Any

import pytest


def test_version_says_when_the_checkout_is_dirty(monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit alone does not say which code ran when tracked files have changes since it."""
    import subprocess

    from wsesim.output import manifest

    real = subprocess.run

    def fake(cmd: list[str], *args: Any, **kwargs: Any) -> Any:
        if cmd[:2] == ["git", "status"]:
            return subprocess.CompletedProcess(cmd, 0, " M wsesim/cli/run.py\n", "")
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", fake)
    assert manifest.version_text().endswith(", dirty: uncommitted changes)")
    assert manifest.manifest("run", [])["wsesim_dirty"] is True
