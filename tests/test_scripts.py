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


def test_a_figure_script_writes_a_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: ``scripts/fig*.py --out`` leaves a manifest.json beside its CSV and figures, as ``wsesim
    sweep --plot`` does, naming the script's command and the wall time. One BTA point (8 experts, top_k 8,
    G=1 and tuned: a few seconds) through the figure scripts' shared runner."""
    import json

    monkeypatch.syspath_prepend(str(SCRIPTS[0].parent))
    from _paper import run_figure

    out = tmp_path / "fig"
    files = run_figure("fig-one", lambda p: p["model.experts"] == 8, str(out), 1,
                       command="python scripts/fig2_experts.py --out fig")
    assert out / "manifest.json" in files and out / "results.csv" in files
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["kind"] == "sweep" and manifest["command"] == "python scripts/fig2_experts.py --out fig"
    assert manifest["wall_s"] > 0 and "results.csv" in manifest["files"] and "figures.json" in manifest["files"]
