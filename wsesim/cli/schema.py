"""``wsesim schema [KIND] [--out DIR]``: the JSON Schema of each YAML kind, for an editor.

``wsesim schema hardware`` prints one schema; ``--out DIR`` writes ``DIR/<kind>.schema.json`` for the
kind given, or for every kind ``wsesim validate`` knows (hardware, model, experiment, sweep, ...), and
prints the paths written. The README says how to point VS Code's YAML extension at them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import EXIT_OK, add_json_argument, check_output_folder, print_json


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema of ``kind`` (the sweep's spec lives with the sweep runner)."""
    from ..config.schema import json_schema

    if kind == "sweep":
        from ..experiments.sweep import SweepSpec

        return json_schema(kind, SweepSpec)
    return json_schema(kind)


def _cmd_schema(args: argparse.Namespace) -> int:
    from ..config.errors import ConfigError, shown_repr
    from ..config.schema import KINDS

    if args.kind is not None and args.kind not in KINDS:
        raise ConfigError(f"expected one of {', '.join(KINDS)}, got {shown_repr(args.kind)}",
                          source="wsesim schema", path="KIND")
    if args.out is None:
        if args.kind is None:
            raise ConfigError(f"expected a KIND to print ({', '.join(KINDS)}), or --out DIR to write every "
                              "kind", source="wsesim schema")
        print_json(schema_of(args.kind))
        return EXIT_OK
    from ..output.files import atomic_write_text, prepare_dir

    check_output_folder(args.out)
    # all made before any is written
    schemas = {kind: schema_of(kind) for kind in ([args.kind] if args.kind else KINDS)}
    out = prepare_dir(args.out)
    written = []
    for kind, schema in schemas.items():
        path = out / f"{kind}.schema.json"
        atomic_write_text(path, json.dumps(schema, indent=2) + "\n")
        written.append(str(path))
    if args.json:
        print_json(written)
    else:
        for path in written:
            print(f"wrote {path}")
    return EXIT_OK


def register(sub: Any, commands: dict[str, Any]) -> None:
    p = sub.add_parser("schema",
                       help="JSON Schemas of the YAML kinds, for editors (VS Code's YAML extension)",
                       description=__doc__.split("\n\n", 1)[0])
    p.add_argument("kind", nargs="?", metavar="KIND",
                   help="a YAML kind: hardware, model, experiment, sweep, ... "
                        "(default with --out: every kind)")
    p.add_argument("--out", metavar="DIR", help="write DIR/<kind>.schema.json instead of printing")
    add_json_argument(p, "with --out, print the paths written as a JSON list")
    commands["schema"] = _cmd_schema
