"""Command-line interface: the only place that chooses paths and prints.

Every ``ConfigError`` (bad input) becomes one line on stderr and exit code 2; nothing is written on
error. Anything else — an ``InternalError`` or any other exception — is a bug: one line
``wsesim: internal error: …`` and exit code 1, the traceback only with ``WSESIM_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ..config.errors import ConfigError, shown
from ..config.loader import input_file
from ..output.manifest import version_text
from .common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, Parser, deferred, say
from .examples import attach

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


# ------------------------------------------------------------------------------------------------ parser


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: of every command, or with ``command`` (one of ``_COMMAND_MODULES``) of
    that command alone, so that running one does not import the others' modules (a name not in the
    table, ``--help`` or a typo, gets every command, and argparse's help or error lists them all)."""
    p = Parser(prog="wsesim")
    p.add_argument("--version", action=_Version,
                   help="print the version (and the git commit of a checkout) and exit")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND",
                           help="what to do (wsesim COMMAND --help for its options)")

    mine = [_COMMAND_MODULES[command]] if command in _COMMAND_MODULES else _EXTENSION_MODULES
    for module in mine:
        importlib.import_module(module).register(sub, _COMMANDS)

    attach(p, sub)  # what wsesim does, and every command's examples
    return p


class _Version(argparse.Action):
    """``--version``: asks git for the commit only when given (not on every command)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help=str(kwargs.get("help", "")))

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        sys.stdout.write(version_text() + "\n")
        parser.exit()


# Each command group lives in its own module with ``register(subparsers, commands)``, which adds its
# parser and its handler ``f(args) -> exit code``; a handler imports what it needs when it runs. One line
# a command: the module that registers it (in the order ``wsesim --help`` lists them).
_COMMAND_MODULES: dict[str, str] = {
    "validate": "wsesim.cli.validate",
    "hardware": "wsesim.cli.hardware",
    "model": "wsesim.cli.hardware",
    "memory": "wsesim.cli.memory",
    "run": "wsesim.cli.run",
    "tune": "wsesim.cli.tune",
    "sweep": "wsesim.cli.sweep",
    "plot": "wsesim.cli.plot",
    "fabric": "wsesim.cli.fabric",
    "kernel": "wsesim.cli.kernel",
    "schema": "wsesim.cli.schema",
    "infer": "wsesim.cli.infer",
    "compare": "wsesim.cli.compare",
}
_EXTENSION_MODULES: list[str] = list(dict.fromkeys(_COMMAND_MODULES.values()))


def command() -> int:
    """The ``wsesim`` process (the console script and ``python -m wsesim``): ``main`` on the command line,
    then everything still alive handed to the cyclic collector's permanent generation (``gc.freeze``),
    so that the interpreter's exit does not walk every module, class and array once more to free memory
    the process is giving back anyway (a few tens of milliseconds of a sub-second command). Files are
    closed and streams flushed as usual: only the final search for reference cycles is skipped."""
    code = main()
    gc.freeze()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    _fill_closed_streams()
    words = list(argv) if argv is not None else sys.argv[1:]
    parser = build_parser(words[0] if words else None)
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]  # as typed, for the folders' manifest.json
    deferred.clear()
    try:
        _no_empty_paths(args)
        _shipped_inputs(args)
        code = _COMMANDS[args.command](args)
        for warning in deferred:  # after the output, and only when it ran: an error stays one line
            say(f"wsesim: warning: {warning}\n")
        return code
    except ConfigError as e:
        say(f"wsesim: {shown(str(e), 1000)}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        say("wsesim: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except OSError as e:
        # what the system refused (a full disk, a name too long): the user's to fix, not a bug
        if e.errno not in _REFUSALS:
            return _internal(e)
        where = f"{e.filename}: " if e.filename else ""
        # one line: before Python 3.12 a replacement field cannot span lines
        say(f"wsesim: {shown(f'{where}the system refused to write or read it ({e.strerror or type(e).__name__})', 1000)}\n")  # noqa: E501
        return EXIT_USAGE
    except Exception as e:  # a bug, not bad input: one line, the traceback on request
        return _internal(e)


def _no_empty_paths(args: argparse.Namespace) -> None:
    """``--out ""`` (an unset shell variable) was taken as no ``--out`` at all: refused, as any bad path."""
    for flag, what in (("out", "a folder"), ("png", "a folder"), ("wafer", "a folder"), ("trace", "a file")):
        if getattr(args, flag, None) == "":
            raise ConfigError(f"expected {what} name, got an empty one", source=f"--{flag}")


def _shipped_inputs(args: argparse.Namespace) -> None:
    """An experiment or sweep file named as the README names it (``workloads/qwen3-30b-a3b/bta-paper.yaml``)
    from a folder that has no ``workloads/``: the copy shipped with wsesim, said on stderr (a file of that
    name here is always the one read)."""
    for flag in ("experiment", "sweep"):
        given = getattr(args, flag, None)
        if not isinstance(given, str) or not given:
            continue
        found = input_file(given)
        if found != Path(given):
            say(f"wsesim: {given}: not in this folder; reading the copy shipped with wsesim ({found})\n")
            setattr(args, flag, str(found))


def _fill_closed_streams() -> None:
    """A process started with stdout or stderr closed (``>&-``, ``2>&-``) has ``sys.stdout``/``sys.stderr``
    None, and whatever it prints, or whatever flushes them (loky starting a worker), fails. Each closed
    descriptor 0-2 is given ``/dev/null`` — so that no file opened later takes its number and receives
    what was meant for the terminal — and each missing stream is a stream to ``/dev/null``: the output is
    discarded, as the user asked, and the work is done and written as usual. Every descriptor is filled
    before any stream is made, and a stream is made on its own descriptor: a stream opened on a new one
    took the lowest free number, a closed fd 2 (``2>&- <&-``), as a non-inheritable file, and the
    workers of a sweep then started without a stderr and died."""
    streams = ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w"))
    for fd, _, _ in streams:
        try:
            os.fstat(fd)
        except OSError:  # closed: take the number now (os.open returns the lowest free one)
            try:
                new = os.open(os.devnull, os.O_RDWR)
            except OSError:
                continue
            if new != fd:
                os.dup2(new, fd)
                os.close(new)
            os.set_inheritable(fd, True)
    for fd, name, mode in streams:
        if getattr(sys, name) is None:
            with contextlib.suppress(OSError):
                setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))  # noqa: SIM115


_REFUSALS = {errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR, errno.EROFS,
             errno.EACCES, errno.EPERM, errno.EFBIG, errno.EMFILE, errno.ENFILE}


def _internal(e: BaseException) -> int:
    if os.environ.get("WSESIM_DEBUG"):
        raise e
    try:
        if isinstance(e, MemoryError):  # the estimate did not foresee it: one line, the memory freed
            text = ("internal error: MemoryError: this ran out of memory although its work estimate allowed "
                    "it (please report it, with the command)")
        else:
            text = (f"internal error: {type(e).__name__}: {shown(str(e), 300)} (set WSESIM_DEBUG=1 "
                    "for the traceback; please report it)")
    except BaseException:  # noqa: BLE001 - the message itself failed (out of memory, a broken __str__)
        text = "internal error (and its message could not be made; set WSESIM_DEBUG=1 for the traceback)"
    say(f"wsesim: {text}\n")
    return EXIT_FAIL
