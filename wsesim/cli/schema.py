"""``wsesim schema [KIND] [--out DIR]``: the JSON Schema of each YAML kind, for an editor; ``wsesim schema
--outputs [FILE]``: what each column of the files wsesim writes means.

``wsesim schema hardware`` prints one schema; ``--out DIR`` writes ``DIR/<kind>.schema.json`` for the
kind given, or for every kind ``wsesim validate`` knows (hardware, model, experiment, sweep, ...), and
prints the paths written. The README says how to point VS Code's YAML extension at them.

``--outputs`` prints the data dictionary (``output.data_dictionary``) as Markdown, docs/outputs.md when no
FILE is named (``--json``: as JSON; ``--out DIR``: writes ``DIR/outputs.md``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..config.errors import ConfigError, shown_repr
from ..config.schema import KINDS, json_schema
from ..output.files import atomic_write_text, prepare_dir
from .common import EXIT_OK, add_json_argument, check_output_folder, print_json, print_written, show


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema of ``kind`` (the sweep's spec lives with the sweep runner)."""

    if kind == "sweep":
        # local: keeps the engine (SimPy) out of every command's start
        from ..experiments.sweep import SweepSpec

        return json_schema(kind, SweepSpec)
    return json_schema(kind)


def _cmd_outputs(args: argparse.Namespace) -> int:
    """``--outputs [FILE]``: the data dictionary, of every file or the one named."""
    # local: keeps the data dictionary and the results it describes out of every command's start
    from ..output.data_dictionary import FILES, markdown, to_json

    if args.kind is not None:
        raise ConfigError(f"expected no KIND with --outputs (a file goes after it: --outputs FILE), got "
                          f"{shown_repr(args.kind)}", source="wsesim schema", path="KIND")
    names = None if args.outputs == ALL_OUTPUTS else [args.outputs]
    if names is not None and args.outputs not in FILES:
        raise ConfigError(f"expected one of {', '.join(FILES)}, got {shown_repr(args.outputs)}",
                          source="wsesim schema", path="--outputs")
    if args.out is None:
        if args.json:
            print_json(to_json(names))
        else:
            print(markdown(names), end="")
        return EXIT_OK

    check_output_folder(args.out)
    path = prepare_dir(args.out) / "outputs.md"
    atomic_write_text(path, markdown(names))
    return show(args.json, [str(path)], lambda: f"wrote {path}")


ALL_OUTPUTS = "all"


def _cmd_schema(args: argparse.Namespace) -> int:
    if args.outputs is not None:
        return _cmd_outputs(args)
    if args.kind is not None and args.kind not in KINDS:
        raise ConfigError(f"expected one of {', '.join(KINDS)}, got {shown_repr(args.kind)}",
                          source="wsesim schema", path="KIND")
    if args.out is None:
        if args.kind is None:
            raise ConfigError(f"expected a KIND to print ({', '.join(KINDS)}), or --out DIR to write every "
                              "kind", source="wsesim schema")
        print_json(schema_of(args.kind))
        return EXIT_OK

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
        print_written(written)
    return EXIT_OK


def register(sub: Any, commands: dict[str, Any]) -> None:
    p = sub.add_parser("schema",
                       help="JSON Schemas of the YAML kinds, for editors (VS Code's YAML extension)",
                       description=__doc__.split("\n\n", 1)[0])
    p.add_argument("kind", nargs="?", metavar="KIND",
                   help="a YAML kind: hardware, model, experiment, sweep, ... "
                        "(default with --out: every kind)")
    p.add_argument("--out", metavar="DIR",
                   help="write DIR/<kind>.schema.json (with --outputs: DIR/outputs.md) instead of printing")
    p.add_argument("--outputs", nargs="?", const=ALL_OUTPUTS, metavar="FILE",
                   help="instead of a schema, what each column of an output file means, with its unit and "
                        "where it is defined (results.csv, result.json, requests.csv, ops.csv, kernels.csv, "
                        "fabric.csv, hottest_links.csv; default: all of them, as docs/outputs.md)")
    add_json_argument(p, "with --out, print the paths written as a JSON list; with --outputs alone, print "
                         "the data dictionary as JSON")
    commands["schema"] = _cmd_schema
