"""The CLI's one table of commands, ``_EXTENSION_MODULES`` in wsesim/cli/main.py: a command is its module
(with ``register``) and its line there, nothing else."""

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
