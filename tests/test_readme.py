"""The README's Quickstart stays true: exactly two commands, and CI runs the second one verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S)]


def test_quickstart_has_exactly_two_commands() -> None:
    commands = _quickstart_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    assert "wsesim sweep workloads/qwen3-30b-a3b/bta-paper.yaml" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _quickstart_commands()[1] in ci.splitlines()


def test_main_job_files_exist() -> None:
    assert (ROOT / "workloads/qwen3-30b-a3b/bta-paper.yaml").is_file()
    assert (ROOT / "workloads/qwen3-30b-a3b/experiment.yaml").is_file()

