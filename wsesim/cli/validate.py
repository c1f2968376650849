"""``wsesim validate``: check any wsesim YAML file (its ``kind:`` says what it is)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    from ..config.loader import validate_file

    for path in args.files:
        kind, spec = validate_file(path)
        name = getattr(spec, "name", "") or ""
        print(f"{path}: ok ({kind}{' ' + name if name else ''})")
    return EXIT_OK


def register(sub: Any, commands: dict[str, Any]) -> None:
    v = sub.add_parser("validate", help="check wsesim YAML files (any kind)")
    v.add_argument("files", nargs="+", metavar="FILE")
    commands["validate"] = _cmd_validate
