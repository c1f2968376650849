"""Smoke test for every script in scripts/: ``--help`` runs and exits 0 in a fresh interpreter.

``--help`` stops before any work, so the benchmarks and figure scripts (minutes each) are only
imported and parsed here; modules whose name starts with ``_`` are helpers, not scripts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted(p for p in (Path(__file__).resolve().parent.parent / "scripts").glob("*.py")
                 if not p.name.startswith("_"))


def test_there_are_scripts() -> None:
    assert {"bench_engine.py", "bench_sweep.py", "fig2_experts.py", "fig3_topk.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_help(script: Path, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(script), "--help"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, check=False)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.startswith("usage: ")
    assert list(tmp_path.iterdir()) == []  # --help writes nothing
