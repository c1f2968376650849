"""The README's "Energy and cost" example: a serving run and a training step, whose joules per token the
README quotes (issue 28's "joules per token each have a README example whose output a test checks").
tests/test_readme_blocks.py runs both commands and checks every quoted line verbatim; here, that the
example is still both kinds of run and quotes both energies."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "scripts"))  # (scripts/_readme_pairs.py)
from _readme_pairs import pairs  # noqa: E402


def test_the_readme_energy_example_quotes_a_serving_run_and_a_training_step() -> None:
    [pair] = [p for p in pairs()[0] if p.name.startswith("Energy and cost")]
    assert [args[0] for args in pair.commands] == ["infer", "run"] and len(pair.quoted) == 5
    starts = [" ".join(line.split()[:3]) for line in pair.quoted]
    assert starts[0] == "energy per token" and "energy per step" in starts[3] and starts[4] == "energy per token"
    assert pair.quoted[2].startswith("$ per million tokens")
