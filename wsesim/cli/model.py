"""``wsesim model list``: the shipped model presets, each with its one-line description, its layers and
experts, and the context it was made for (the hardware and interconnect presets: ``wsesim hardware list``).
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import EXIT_OK, Parser, add_json_argument, format_table, print_json


def _cmd_model(args: argparse.Namespace) -> int:
    from .hardware import presets

    models = presets("model")
    if args.json:
        print_json(models)
        return EXIT_OK
    rows = [(m["name"], m["layers"], f"{m['experts']} (top-{m['top_k']})" if m["experts"] else "dense",
             f"{m['context_len']:,}" if m["context_len"] else "-", m["description"]) for m in models]
    print(format_table(rows, ("model", "layers", "experts", "context", "description"), left=(0, 4)))
    return EXIT_OK


def register(sub: Any, commands: dict[str, Any]) -> None:
    m = sub.add_parser("model", help="list the model presets")
    msub = m.add_subparsers(dest="model_cmd", required=True, parser_class=Parser, metavar="list",
                            help="list the presets")
    ml = msub.add_parser("list", help="the shipped model presets, each with its description")
    add_json_argument(ml, "print the presets as a JSON list (name, description, layers, experts, top_k, "
                          "context_len)")
    commands["model"] = _cmd_model
