"""The README's "Energy and cost" example runs as written and prints what the README quotes (issue 28's
"joules per token each have a README example whose output a test checks")."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from wsesim import cli

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("## Energy and cost", 1)[1].split("\n## ", 1)[0]


def _squeezed(text: str) -> str:
    return " ".join(text.split())


def test_the_readme_energy_example_prints_the_lines_it_quotes(capsys: pytest.CaptureFixture[str]) -> None:
    (sh, commands), (plain, quoted) = [(kind, body.strip().splitlines())
                                       for kind, body in re.findall(r"```(\w*)\n(.*?)```", _section(), flags=re.S)]
    assert (sh, plain) == ("sh", "")
    assert [c.split()[1] for c in commands] == ["infer", "run"] and len(quoted) == 5
    printed = []
    for command in commands:
        assert cli.main(shlex.split(command)[1:]) == 0, command
        printed.append(capsys.readouterr().out)
    for line, out in zip(quoted, [printed[0]] * 3 + [printed[1]] * 2, strict=True):
        assert _squeezed(line) in _squeezed(out), line
