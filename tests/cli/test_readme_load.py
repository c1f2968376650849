"""The README's "Serving many users" example (its first command, without ``--out``) prints the lines the
README quotes, TTFT, TPOT, inter-token latency and end to end among them (issue 29: the true numbers)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from wsesim import cli

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_load_example_prints_the_lines_it_quotes(capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Serving many users", 1)[1].split("\n### ", 1)[0]
    (sh, commands), (kind, quoted) = [(kind, body.strip()) for kind, body in
                                      re.findall(r"```(\w*)\n(.*?)```", section, flags=re.S)[:2]]
    assert (sh, kind) == ("sh", "text")
    command = commands.replace("\\\n", " ").splitlines()[0]
    args = shlex.split(command)[1:]
    assert args[0] == "infer" and args[-2] == "--out"
    assert cli.main(args[:-2]) == 0
    printed = capsys.readouterr().out.splitlines()
    lines = quoted.splitlines()
    assert any(line.startswith("inter-token latency") for line in lines)
    assert any(line.startswith("end to end per request") for line in lines)
    for line in lines:
        assert line in printed, line
