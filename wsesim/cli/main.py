"""Command-line interface: the only place that chooses paths and prints.

Every ``ConfigError`` becomes one line on stderr and exit code 2; nothing is written on error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence

from ..config.errors import ConfigError
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, Parser

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


# ------------------------------------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="wsesim", description="Simulate MoE training on wafer-scale processors.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    for module in _EXTENSION_MODULES:
        importlib.import_module(module).register(sub, _COMMANDS)
    return p


# Each command group lives in its own module with ``register(subparsers, commands)``, which adds its
# parser and its handler ``f(args) -> exit code``; a handler imports what it needs when it runs.
_EXTENSION_MODULES: list[str] = ["wsesim.cli.validate", "wsesim.cli.hardware", "wsesim.cli.memory", "wsesim.cli.run",
                                 "wsesim.cli.sweep", "wsesim.cli.fabric"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except ConfigError as e:
        sys.stderr.write(f"wsesim: {e}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("wsesim: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # a bug, not bad input: one line, the traceback on request
        if os.environ.get("WSESIM_DEBUG"):
            raise
        sys.stderr.write(f"wsesim: internal error: {type(e).__name__}: {e} (set WSESIM_DEBUG=1 for the traceback; "
                         "please report it)\n")
        return EXIT_FAIL
