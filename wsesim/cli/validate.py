"""``wsesim validate``: check any wsesim YAML file (its ``kind:`` says what it is)."""

from __future__ import annotations

import argparse
from typing import Any

from ..config.loader import validate_file
from .common import EXIT_OK, add_json_argument, print_json


def _cmd_validate(args: argparse.Namespace) -> int:
    # local: keeps the engine (SimPy) and serving's specs out of every command's start; importing them
    # registers the inference and sweep kinds
    from ..config import inference  # noqa: F401
    from ..experiments import sweep  # noqa: F401

    checked = []
    for path in args.files:
        kind, spec = validate_file(path)  # the first bad file ends the command (exit 2)
        name = getattr(spec, "name", "") or ""
        checked.append({"file": path, "kind": kind, "name": name})
        if not args.json:
            print(f"{path}: ok ({kind}{' ' + name if name else ''})")
    if args.json:
        print_json(checked)
    return EXIT_OK


def register(sub: Any, commands: dict[str, Any]) -> None:
    v = sub.add_parser("validate", help="check wsesim YAML files (any kind)")
    v.add_argument("files", nargs="+", metavar="FILE",
                   help="YAML files of any kind (hardware, model, experiment, sweep)")
    add_json_argument(v, 'print [{"file", "kind", "name"}, ...] for the files, all valid')
    commands["validate"] = _cmd_validate
