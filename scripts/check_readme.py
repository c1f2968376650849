#!/usr/bin/env python3
"""Run every README command whose printout the README quotes, and say which quoted lines it no longer
prints.

    python scripts/check_readme.py              # every pair; exit 1 if any quoted line differs
    python scripts/check_readme.py --list       # the pairs, the blocks left unpaired, and why; no run
    python scripts/check_readme.py --only Kernels   # the pairs whose name contains "Kernels"

A pair is a ```sh block and the ```text block after it that is its printout (the rule, and what it
cannot pair, are in scripts/_readme_pairs.py). Each command runs in this process (``wsesim.cli.main``)
in a scratch folder, so ``--out`` writes nothing into the checkout. tests/test_readme_blocks.py checks the
pairs that run in a few seconds; this script runs them all, the slow ones included.
"""

from __future__ import annotations

import argparse
import difflib
import shlex
import sys
import time

from _readme_pairs import missing, pairs, printout  # (beside this script)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list the pairs and the unpaired blocks; run nothing")
    parser.add_argument("--only", default="", help="run only the pairs whose name contains this")
    args = parser.parse_args(argv)

    found, unpaired = pairs()
    for name in unpaired:
        print(f"unpaired   {name}")
    for p in found:
        if p.elided:
            print(f"elided     {p.name}: {p.elided}")
    checkable = [p for p in found if not p.elided and args.only in p.name]
    if args.list:
        for p in checkable:
            print(f"pair       {p.name}: " + " ; ".join("wsesim " + shlex.join(c) for c in p.commands))
        return 0

    from wsesim import cli

    differing = 0
    for p in checkable:
        start = time.perf_counter()
        printed, failed = printout(p, cli.main)
        gone = missing(p, printed)
        took = time.perf_counter() - start
        print(f"{'ok' if not (gone or failed) else 'DIFFERS':10} {p.name} ({took:.1f} s, {len(p.quoted)} lines)")
        for note in failed:
            print(f"    {note}")
        for line in gone:
            print(f"    README:  {line}")
            print(f"    printed: {_nearest(line, printed)}")
        differing += len(gone) + len(failed)
    print(f"{len(checkable)} pairs run; {differing} quoted line(s) differ" if differing else
          f"{len(checkable)} pairs run; every quoted line printed verbatim")
    return 1 if differing else 0


def _nearest(line: str, printed: list[str]) -> str:
    """The printed line most like ``line``: among those that begin with its first two words, if any."""
    head = line.split()[:2]
    same = [p for p in printed if p.split()[:2] == head] or printed
    near = difflib.get_close_matches(line, same, n=1, cutoff=0.0 if same is not printed else 0.5)
    return near[0] if near else "(no line like it)"


if __name__ == "__main__":
    sys.exit(main())
