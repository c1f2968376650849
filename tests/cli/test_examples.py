"""Every command's help and the examples it ends with (wsesim.cli.examples, attached by
wsesim.cli.main.build_parser): what wsesim does, examples that parse, no reStructuredText."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wsesim import cli


def _parsers() -> dict[str, Any]:
    """Every parser of the command line by its command words ("" the top level, "memory training")."""
    import argparse

    from wsesim.cli.main import build_parser

    found: dict[str, Any] = {}

    def walk(name: str, p: argparse.ArgumentParser) -> None:
        found[name] = p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(f"{name} {sub}".strip(), child)

    walk("", build_parser())
    return found


def test_the_help_says_what_wsesim_does_and_run_names_its_keys() -> None:
    parsers = _parsers()
    top = parsers[""].format_help()
    assert "Simulate MoE training on wafer-scale processors." not in top
    assert all(word in top for word in ("training step", "serving", "kernels", "clusters"))
    run = parsers["run"].format_help()
    assert all(word in run for word in ("training.global_batch", "cluster.systems", "simulation.moe_mapping",
                                        "config.json"))


def test_every_command_shows_an_example_that_parses() -> None:
    """Each command (and the top level) ends its help with examples; each is a command line the parser
    takes as it stands."""
    import shlex

    from wsesim.cli.main import build_parser

    parsers = _parsers()
    commands = [name for name in parsers if " " not in name]
    for name in commands:
        text = parsers[name].format_help()
        assert "\nexample:\n  wsesim " in text or "\nexamples:\n  wsesim " in text, name
        block = text.split("example", 1)[1].split("\n", 1)[1]
        for line in (ln.strip() for ln in block.splitlines() if ln.startswith("  wsesim ")):
            words = shlex.split(line)[1:]
            assert not name or words[0] == name, line
            build_parser().parse_args(words)  # a usage error exits


def test_no_help_or_schema_text_shows_rst_and_pdf_is_named_with_svg(tmp_path: Path) -> None:
    for name, p in _parsers().items():
        text = p.format_help()
        assert "``" not in text, name
        assert "SVG" not in text or "PDF" in text, name
    assert cli.main(["schema", "--out", str(tmp_path)]) == 0
    for path in tmp_path.glob("*.schema.json"):
        assert "``" not in path.read_text(encoding="utf-8"), path.name
