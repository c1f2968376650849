"""The README's command/printout pairs: which fenced block is which command's printout, and a fresh run.

Shared by ``scripts/check_readme.py`` (every pair) and ``tests/test_readme_blocks.py`` (the fast ones).

The pairing rule, in README order of fenced blocks:

* An *output block* is a ```` ```text ```` block, or an untagged ```` ``` ```` block whose first line does
  not start with ``$ ``. It is the printout of the nearest ```` ```sh ```` block before it, provided only
  prose and other output blocks lie between them; a ```` ```python ````, ```` ```yaml ````, ... block in
  between, or none at all before it, leaves it *unpaired*.
* If that ``sh`` block holds one command, the output block is that command's printout. If it holds several,
  the last paragraph before the output block names the command by ordinal ("The first prints ...", "The
  second prefills ..."); with no ordinal there, it is the printout of all the block's commands together
  (their outputs one after the other: "the first three lines from the first command ...").
* An untagged block whose first line is ``$ wsesim ...`` is a pair by itself: the command after ``$``,
  the lines after it its printout.
* A pair is *elided* when the rule cannot check it verbatim: a command with ``...`` or ``…`` in it (a
  placeholder, not something to run), or a quoted line cut short with ``...``/``…``. A line that is just
  ``...`` or ``…`` stands for left-out lines and is dropped (every other line is checked anyway).
* Commands are one a line (``\\`` continues a line; ``#`` starts a comment); every one starts ``wsesim``.

A pair's name is its section's heading and its number among the section's output blocks
("Speculative decoding and split prefill #2"). A run is ``wsesim.cli.main(args)`` in this process, in an
empty working folder whose ``hardware``, ``workloads``, ``tests``, ... are links to the checkout's, so that
``--out out/load`` and a sweep's default ``out/`` land there and not in the checkout. A quoted line must be
a whole line of the printout (stdout, then stderr), verbatim.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")
ELLIPSES = ("...", "…")


@dataclass(frozen=True)
class Block:
    lang: str           # "sh", "text", "" (untagged), "python", ...
    body: str
    prose: str          # the text between the previous fenced block and this one
    heading: str        # the nearest heading above it, without its #s


@dataclass(frozen=True)
class Pair:
    name: str
    commands: tuple[tuple[str, ...], ...]   # each command's arguments after ``wsesim``
    quoted: tuple[str, ...]                 # the lines the README quotes
    elided: str = ""                        # why the rule cannot check it verbatim ("" when it can)


def blocks(text: str) -> list[Block]:
    out: list[Block] = []
    heading, start = "", 0
    for m in re.finditer(r"^```(\w*)\n(.*?)^```[ \t]*$", text, flags=re.S | re.M):
        prose = text[start:m.start()]
        for h in re.findall(r"^#+ (.+)$", prose, flags=re.M):
            heading = h.strip()
        out.append(Block(m.group(1), m.group(2), prose, heading))
        start = m.end()
    return out


def _commands(body: str) -> list[str]:
    joined = re.sub(r"\\\n", " ", body)
    return [c for c in (line.strip() for line in joined.splitlines()) if c and not c.startswith("#")]


def _args(command: str) -> tuple[str, ...]:
    return tuple(shlex.split(command, comments=True)[1:])


def _ordinal(prose: str) -> int | None:
    last = [p for p in re.split(r"\n\s*\n", prose) if p.strip()]
    m = re.match(r"\s*The (\w+)\b", last[-1]) if last else None
    return ORDINALS.index(m.group(1).lower()) if m and m.group(1).lower() in ORDINALS else None


def _is_output(b: Block) -> bool:
    return b.lang == "text" or (b.lang == "" and not b.body.startswith("$ "))


def _quoted(lines: list[str]) -> tuple[tuple[str, ...], str]:
    kept = tuple(line for line in lines if line.strip() not in ELLIPSES)
    cut = [line for line in kept if any(e in line for e in ELLIPSES)]
    return kept, (f"a quoted line cut short: {cut[0]!r}" if cut else "")


def pairs(text: str | None = None) -> tuple[list[Pair], list[str]]:
    """Every pair the rule finds, and the names of the output blocks it cannot pair (with why)."""
    text = README.read_text(encoding="utf-8") if text is None else text
    found: list[Pair] = []
    unpaired: list[str] = []
    counts: dict[str, int] = {}
    sh: Block | None = None
    for b in blocks(text):
        if b.lang == "sh":
            sh = b
            continue
        if b.lang == "" and b.body.startswith("$ "):
            first, *rest = b.body.rstrip("\n").splitlines()
            counts[b.heading] = counts.get(b.heading, 0) + 1
            name = f"{b.heading} #{counts[b.heading]}"
            quoted, elided = _quoted(rest)
            command = first[2:].strip()
            if any(e in command for e in ELLIPSES):
                elided = f"a placeholder in the command: {command!r}"
            found.append(Pair(name, (_args(command),), quoted, elided))
            sh = None
            continue
        if not _is_output(b):
            sh = None
            continue
        counts[b.heading] = counts.get(b.heading, 0) + 1
        name = f"{b.heading} #{counts[b.heading]}"
        if sh is None:
            unpaired.append(f"{name}: no command block before it")
            continue
        commands = _commands(sh.body)
        if not commands or not all(c.split()[0] == "wsesim" for c in commands):
            unpaired.append(f"{name}: the block before it is not wsesim commands")
            continue
        which = _ordinal(b.prose) if len(commands) > 1 else 0
        chosen = commands if which is None else commands[which:which + 1]
        if not chosen:
            unpaired.append(f"{name}: names command {which + 1} of {len(commands)}")
            continue
        quoted, elided = _quoted(b.body.rstrip("\n").splitlines())
        placeholder = [c for c in chosen if any(e in c for e in ELLIPSES)]
        if placeholder:
            elided = f"a placeholder in the command: {placeholder[0]!r}"
        found.append(Pair(name, tuple(_args(c) for c in chosen), quoted, elided))
    return found, unpaired


@contextlib.contextmanager
def scratch_folder() -> Iterator[Path]:
    """An empty working folder whose entries link to the checkout's (``out`` excepted)."""
    before = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="wsesim-readme-") as tmp:
        for entry in ROOT.iterdir():
            if not entry.name.startswith(".") and entry.name != "out":
                (Path(tmp) / entry.name).symlink_to(entry)
        os.chdir(tmp)
        try:
            yield Path(tmp)
        finally:
            os.chdir(before)


def printout(pair: Pair, main: Callable[[list[str]], int]) -> tuple[list[str], list[str]]:
    """Run the pair's commands with ``main`` (``wsesim.cli.main``) in a scratch folder; return the
    printout's lines and a note per command that did not exit 0."""
    lines: list[str] = []
    failed: list[str] = []
    with scratch_folder():
        for args in pair.commands:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(args))
            lines += out.getvalue().splitlines() + err.getvalue().splitlines()
            if code != 0:
                failed.append(f"wsesim {shlex.join(args)} exited {code}: {err.getvalue().strip()[-300:]}")
    return lines, failed


def missing(pair: Pair, printed: list[str]) -> list[str]:
    """The quoted lines that are not a whole line of the printout."""
    seen = set(printed)
    return [line for line in pair.quoted if line not in seen]
