"""What every command shares: the argument parser, exit codes, override parsing, JSON and tables."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2 (argparse's default code, kept)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: {message} (see --help)\n")
        raise SystemExit(EXIT_USAGE)


def parse_overrides(pairs: Sequence[str] | None) -> dict[str, Any]:
    from ..config.loader import parse_override

    out: dict[str, Any] = {}
    for text in pairs or ():
        key, value = parse_override(text)
        out[key] = value
    return out


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def format_table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def add_experiment_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments every command that takes one experiment shares."""
    p.add_argument("experiment", nargs="?", metavar="EXPERIMENT.yaml",
                   help="an experiment file (default: the shipped Qwen3-30B-A3B on WSE-2 example)")
    p.add_argument("--hardware", metavar="NAME|FILE", help="replace the experiment's hardware")
    p.add_argument("--model", metavar="NAME|FILE", help="replace the experiment's model")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override any key, e.g. --set model.experts=64 --set training.tiles=8 (repeatable)")


def load_from_args(args: argparse.Namespace) -> Any:
    from ..config.loader import load_experiment

    return load_experiment(args.experiment, hardware=args.hardware, model=args.model,
                           overrides=parse_overrides(args.set))
