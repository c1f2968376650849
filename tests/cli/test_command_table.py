"""The CLI's one table of commands, ``_COMMAND_MODULES`` in wsesim/cli/main.py: a command is its module
(with ``register``) and its line there, nothing else; running one registers its module alone."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "wsesim" / "cli"


def test_every_command_module_is_in_the_table_and_registers() -> None:
    main = importlib.import_module("wsesim.cli.main")
    with_register = {f"wsesim.cli.{p.stem}" for p in CLI.glob("*.py")
                     if any(isinstance(n, ast.FunctionDef) and n.name == "register"
                            for n in ast.parse(p.read_text(encoding="utf-8")).body)}
    assert set(main._EXTENSION_MODULES) == with_register
    assert len(main._EXTENSION_MODULES) == len(set(main._EXTENSION_MODULES))


def test_the_parser_has_one_command_per_registration() -> None:
    """Each module's ``register`` adds its commands' parsers and handlers; ``main`` dispatches on them."""
    main = importlib.import_module("wsesim.cli.main")
    parser = main.build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert set(commands) == set(main._COMMANDS)
    assert {"validate", "hardware", "memory", "run", "sweep", "tune", "plot", "fabric", "schema"} <= set(commands)


def test_each_command_registers_its_module_alone_and_parses_as_in_the_whole_parser() -> None:
    """``build_parser(command)``: that command's module only (its line in the table), the same parser of
    the command as the whole one's; a name not in the table gets every command."""
    main = importlib.import_module("wsesim.cli.main")

    def choices(parser: object) -> dict[str, object]:
        return next(a for a in parser._actions if a.dest == "command").choices  # type: ignore[attr-defined]

    whole = choices(main.build_parser())
    assert list(whole) == list(main._COMMAND_MODULES)  # --help lists them in the table's order
    for command, module in main._COMMAND_MODULES.items():
        alone = choices(main.build_parser(command))
        assert command in alone
        assert {c for c in alone} == {c for c, m in main._COMMAND_MODULES.items() if m == module}
        assert alone[command].format_help() == whole[command].format_help()
    assert set(choices(main.build_parser("--help"))) == set(whole)
