"""docs/validation.md is what the code gives: its wsesim column is recomputed from the shipped presets
(``scripts/validation.py --check``), so the table cannot drift from the model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_validation_table_matches_the_code(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "validation.py"), "--check"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=600, check=False)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert list(tmp_path.iterdir()) == []
