"""The README's speculative decoding and split prefill examples print what the README says (issue 28's
"Done when"), and their bad inputs are one line each, exit code 2, nothing written."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from wsesim import cli

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "scripts"))  # (scripts/_readme_pairs.py)
from _readme_pairs import pairs  # noqa: E402


def test_the_readme_examples_are_the_draft_and_the_split_prefill() -> None:
    """Both examples quote their printout; tests/test_readme_blocks.py runs them and checks each line."""
    found = [p for p in pairs()[0] if p.name.startswith("Speculative decoding and split prefill")]
    assert [len(p.commands) for p in found] == [1, 1]
    assert "inference.speculative.draft=llama3.2-1b" in found[0].commands[0]
    assert "inference.disaggregation.prefill_systems=1" in found[1].commands[0]
    assert found[0].quoted[1].startswith("speculative decoding") and found[1].quoted[0].startswith("split prefill")


@pytest.mark.parametrize(("sets", "message"), [
    (["inference.speculative.draft=llama3.2-1b"],
     "inference.speculative.acceptance: required key is missing"),
    (["inference.speculative.draft=llama3.2-1b", "inference.speculative.acceptance=1.5"],
     "inference.speculative.acceptance: expected a value ≤ 1.0, got 1.5"),
    (["inference.speculative.draft=tiny-moe", "inference.speculative.acceptance=0.8"],
     "expected a speculative draft with the target's vocabulary (128,256 tokens"),
    (["inference.speculative.draft=nope", "inference.speculative.acceptance=0.8"],
     "inference.speculative.draft: expected a model preset"),
    (["inference.disaggregation.prefill_systems=1", "inference.scheduler.batch=4", "inference.scheduler.batching=none"],
     "inference.disaggregation.prefill_systems: expected batching: auto or continuous with prefill_systems"),
    (["inference.disaggregation.prefill_systems=0"], "inference.disaggregation.prefill_systems: expected a value > 0"),
])
def test_bad_input_is_one_line_and_exit_2(sets: list[str], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = ["infer", "--out", str(out)] + [a for s in sets for a in ("--set", s)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not out.exists()
