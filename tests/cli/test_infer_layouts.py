"""The README's speculative decoding and split prefill examples print what the README says (issue 28's
"Done when"), and their bad inputs are one line each, exit code 2, nothing written."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from wsesim import cli

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("### Speculative decoding and split prefill", 1)[1].split("\n## ", 1)[0]


def _commands() -> list[list[str]]:
    block = _section().split("```sh\n", 1)[1].split("```", 1)[0]
    return [shlex.split(c)[1:] for c in block.replace("\\\n", " ").strip().splitlines()]


def _quoted() -> list[list[str]]:
    return [b.split("```", 1)[0].strip("\n").splitlines() for b in _section().split("```text\n")[1:]]


def test_the_readme_examples_print_what_the_readme_says(capsys: pytest.CaptureFixture[str]) -> None:
    commands, quoted = _commands(), _quoted()
    assert len(commands) == len(quoted) == 2
    assert "inference.speculative.draft=llama3.2-1b" in commands[0]
    assert "inference.prefill_systems=1" in commands[1]
    for args, lines in zip(commands, quoted, strict=True):
        assert cli.main(args) == 0
        out = capsys.readouterr().out.splitlines()
        for line in lines:
            assert line in out, line


@pytest.mark.parametrize(("sets", "message"), [
    (["inference.speculative.draft=llama3.2-1b"],
     "inference.speculative.acceptance: required key is missing"),
    (["inference.speculative.draft=llama3.2-1b", "inference.speculative.acceptance=1.5"],
     "inference.speculative.acceptance: expected a value ≤ 1.0, got 1.5"),
    (["inference.speculative.draft=tiny-moe", "inference.speculative.acceptance=0.8"],
     "expected a speculative draft with the target's vocabulary (128,256 tokens"),
    (["inference.speculative.draft=nope", "inference.speculative.acceptance=0.8"],
     "inference.speculative.draft: expected a model preset"),
    (["inference.prefill_systems=1", "inference.batch=4", "inference.batching=none"],
     "inference.prefill_systems: expected batching: auto or continuous with prefill_systems"),
    (["inference.prefill_systems=0"], "inference.prefill_systems: expected a value > 0"),
])
def test_bad_input_is_one_line_and_exit_2(sets: list[str], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = ["infer", "--out", str(out)] + [a for s in sets for a in ("--set", s)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not out.exists()
