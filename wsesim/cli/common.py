"""What every command shares: the argument parser, exit codes, override parsing, JSON and tables."""

from __future__ import annotations

import argparse
import json
import math
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError, shown, shown_repr
from ..config.fields import parse_grid
from ..config.loader import PATH_KEYS, REFERENCE_KEYS, from_cwd, load_experiment
from ..config.overrides import parse_override
from ..config.specs import context_warning
from ..config.yaml_strict import _KINDS
from ..output.files import check_folder_owner
from ..output.files import check_names as check_names  # names the file system takes, for the commands
from ..output.files import check_output_files as check_output_files  # no folder where a file will be

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def say(text: str) -> bool:
    """Write ``text`` to stderr, best effort: False (and nothing raised) when stderr is gone: ``None``
    when the process started with it closed (``2>&-``), a closed pipe, a full disk."""
    stream = sys.stderr
    if stream is None:
        return False
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError, AttributeError):
        return False
    return True


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2 (argparse's default code, kept), and help
    in plain text: a docstring's RST ``code`` shows as `code`."""

    def format_help(self) -> str:
        return super().format_help().replace("``", "`")

    def error(self, message: str) -> None:  # type: ignore[override]
        say(f"{self.prog}: {shown(message, 400)} (see --help)\n")
        raise SystemExit(EXIT_USAGE)


def format_duration(seconds: float) -> str:
    """A duration in the unit a reader takes in at a glance: µs below a millisecond, ms below 10 s
    (``1,631.47 ms``), then s, min and h (``2.99 min``, never ``179,499.75 ms``)."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:,.2f} µs"
    if seconds < 10:
        return f"{seconds * 1e3:,.2f} ms"
    if seconds < 600:
        return f"{seconds:,.2f} s"
    if seconds < 36_000:
        return f"{seconds / 60:,.2f} min"
    return f"{seconds / 3600:,.2f} h"


def significant(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits as ``:g`` writes it (trailing zeros dropped), but never in
    scientific notation from 10^digits up (``3,510``, not ``3.51e+03``: issue 40), nor from 0.001 down to
    it; only smaller magnitudes keep an exponent (``2.83e-06``)."""
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
    magnitude = math.floor(math.log10(abs(x)))
    if magnitude >= digits - 1:
        return f"{x:,.0f}"
    if magnitude < -3:
        return f"{x:.{digits}g}"
    text = f"{x:,.{digits - 1 - magnitude}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def count_of(n: Any, what: str) -> str:
    """A count with its noun, plural but for one: ``4 wafers``, ``1 8-GPU node``."""
    return f"{n} {what}{'' if str(n) == '1' else 's'}"


def parse_overrides(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``--set KEY=VALUE`` pairs as overrides; a hardware, model or interconnect named by a relative path
    (``--set model=my/model.yaml``, ``--set cluster.interconnect=./ic.yaml``) is the working folder's, as
    with ``--model`` (an experiment file's own references are its folder's)."""
    out: dict[str, Any] = {}
    for text in pairs or ():  # a trace or a draft --set names the loader resolves (``given``: --set's errors)
        key, value = parse_override(text)
        out[key] = value if key in PATH_KEYS else cwd_value(key, value)
    return out


def cwd_value(key: str, value: Any) -> Any:
    """A value given on the command line, a relative path resolved against the working folder where the
    key may name a file: a hardware, model or interconnect (``from_cwd``), a trace or a draft. Anything
    else as it is."""
    if not isinstance(value, str):
        return value
    if key in (*REFERENCE_KEYS, "cluster.interconnect", "inference.interconnect"):
        return from_cwd(value)
    if key in PATH_KEYS and ("/" in value or Path(value).suffix in (".yaml", ".yml", ".json", ".csv")):
        return str(Path(value).resolve())
    return value


def cwd_paths(grid: dict[str, list[Any]]) -> dict[str, dict[str, str]]:
    """Of a grid given on the command line (``--vary``, ``--grid``) as the user wrote it, each value that
    is a path of the working folder and what it resolves to: the sweep loads the resolved file and shows
    the value as written (so that its CSV does not change with the folder it was run from)."""
    return {k: found for k, values in grid.items()
            if (found := {v: r for v in values if isinstance(v, str) and (r := cwd_value(k, v)) != v})}


def parse_pe_grid(text: str, flag: str, example: str) -> tuple[int, int]:
    """A grid of PEs given to ``flag`` (``--grid 420x420``, ``--mesh 64x64``): ``config.fields.parse_grid``
    reads it; an error is the flag's, with ``example``."""
    try:
        return parse_grid(text, path=flag)
    except ConfigError:
        raise ConfigError(f'expected ROWSxCOLS of PEs like "{example}", got "{text}"', path=flag) from None


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def print_written(paths: Iterable[Any]) -> None:
    """A ``wrote PATH`` line for each file a command wrote."""
    for path in paths:
        print(f"wrote {path}")


def show(as_json: bool, data: Any, text: Callable[[], str], written: Iterable[Any] = ()) -> int:
    """A command's result on stdout, flushed: ``data`` as JSON (``--json``), else ``text()`` and the files
    ``written``. Returns ``EXIT_OK``."""
    if as_json:
        print_json(data)
    else:
        print(text())
        print_written(written)
    sys.stdout.flush()
    return EXIT_OK


def format_table(rows: Sequence[Sequence[Any]], header: Sequence[str], left: Sequence[int] = (0,)) -> str:
    """Columns two spaces apart under a header and a rule; the ``left`` columns (text) aligned left, the
    others (numbers) right."""
    cells = [[str(c) for c in header], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i in left else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in cells]
    if len(header) - 1 in left:  # no padding after text that ends a line
        lines = [line.rstrip() for line in lines]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def add_json_argument(p: argparse.ArgumentParser, what: str = "print the result as one JSON object") -> None:
    """``--json``: every command that prints a result can print it as JSON instead."""
    p.add_argument("--json", action="store_true", help=what)


def add_experiment_arguments(p: argparse.ArgumentParser, metavar: str = "EXPERIMENT.yaml",
                             what: str = ("an experiment file (default: the shipped Qwen3-30B-A3B on WSE-2 "
                                          "example)"),
                             example: str = "--set model.experts=64 --set hardware.pe.sram='96 KiB'") -> None:
    """The arguments every command that takes one experiment shares (training's, or ``metavar`` and
    ``what`` of another kind of experiment, with an ``example`` of ``--set``)."""
    p.add_argument("experiment", nargs="?", metavar=metavar, help=what)
    p.add_argument("--hardware", metavar="NAME|FILE", help="replace the experiment's hardware")
    p.add_argument("--model", metavar="NAME|FILE",
                   help="replace the experiment's model: a preset, a YAML file or a Hugging Face config.json")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help=f"override any key, e.g. {example} (repeatable)")


def load_from_args(args: argparse.Namespace, *, gpu: bool = False) -> Any:
    """The training experiment the arguments name; a GPU node's (docs/model.md §13.8) only where the
    command runs one (``gpu``), else one line saying which commands do."""
    loaded = load_experiment(args.experiment, hardware=args.hardware, model=args.model,
                             overrides=parse_overrides(args.set))
    if not gpu:
        # local: the kinds' table imports the engines, kept out of every command's start
        from ..experiments.hardware_kinds import hardware_kind

        if why := hardware_kind(loaded.spec.hardware).refusal("wafer"):
            flags = " with --trace, --out or --png" if args.command == "run" else ""
            what = f"wsesim {args.command}{flags}"
            raise ConfigError(why.format(command=what), path="kind",
                              source=args.hardware or loaded.sources.get("hardware", loaded.source))
    warn_beyond_context(loaded.spec)
    return loaded


deferred: list[str] = []
"""Warnings of the command running, written to stderr by ``main`` after its output and only when it
finished (a refusal after a warning stays the one line it must be)."""


def warn_beyond_context(spec: Any) -> None:
    """A training sequence or a request longer than the model's ``context_len``: simulated as asked, with
    one warning line on stderr once the command has printed its result (``deferred``;
    ``config.specs.context_warning``)."""
    defer(context_warning(spec))


def defer(*warnings: str) -> None:
    """Add ``warnings`` to ``deferred``, each once (empty ones skipped)."""
    deferred.extend(w for w in dict.fromkeys(warnings) if w and w not in deferred)


def check_output_folder(folder: str) -> None:
    """Raise ``ConfigError`` unless files can be written in ``folder`` — or, while it does not exist,
    in the nearest of its parents that does (where it would be made). Checked before the step is
    simulated, so that a file in the way or a read-only folder costs no time and writes nothing; the
    probe is an unnamed temporary file (``O_TMPFILE`` on Linux), never seen in the folder."""
    check_names(folder)
    existing = Path(folder)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise ConfigError("expected a folder for the output, got an existing file", source=folder)
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        where = "" if existing == Path(folder) else f" (it would be made in {existing})"
        raise ConfigError(f"expected a folder wsesim can write to{where}, got a read-only one "
                          f"({e.strerror or type(e).__name__})", source=folder) from None


def check_outputs(command: str, trace: str | None, *folders: str | None) -> None:
    """What ``run`` and ``infer`` (``command``) will write, checked before anything runs: the ``trace``
    file (``check_trace_file``), each of the ``folders`` and the trace's (``check_output_folder``), and
    the trace's folder not another command's."""
    trace_dir = str(Path(trace).parent) if trace else None
    if trace:
        check_trace_file(trace)
    for folder in (*folders, trace_dir):
        if folder:
            check_output_folder(folder)
    if trace_dir:  # a trace is a run's output too: never written into a sweep's (or tune's) folder
        check_folder_owner(trace_dir, command)


def check_trace_file(path: str, flag: str = "--trace") -> None:
    """Raise ``ConfigError`` unless ``path`` can take a trace: a name ending in .json or .json.gz, and
    nothing in its place but a regular file (which it replaces). A directory, a symbolic link, a FIFO, a
    device or a socket is refused: the trace is written by renaming a new file over the name, which would
    replace a device node, a pipe another program reads, or the link (not the file it points to)."""
    check_names(path)
    directory = Path(path).is_dir()
    if directory or not path.endswith((".json", ".json.gz")):
        raise ConfigError(f"expected a .json or .json.gz file name for the trace, got "
                          f"{'the directory ' if directory else ''}{shown_repr(path)}", source=flag)
    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        return  # none there; or what the folder check or the write refuses, with its own line
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError("expected a regular file to replace with the trace, got a symbolic link",
                          source=path)
    if not stat.S_ISREG(info.st_mode):
        kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
        raise ConfigError(f"expected a regular file to replace with the trace, got {kind}", source=path)
