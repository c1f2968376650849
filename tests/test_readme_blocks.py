"""Every README command whose printout the README quotes prints, run afresh, each quoted line verbatim
(issue 40: "a test that reads every quoted number from a fresh run").

The pairs are found by one rule (``scripts/_readme_pairs.py``: a ```sh block and the ```text block after
it; an ordinal, "The second ...", picks one of several commands; ``$ wsesim`` blocks pair themselves).
A block the rule cannot pair, or a pair it cannot check verbatim, is named below, never skipped unsaid.
Pairs whose commands take more than about 3 s here are left to ``python scripts/check_readme.py``,
which runs every pair; they are named below too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parent.parent / "scripts"))
from _readme_pairs import Pair, missing, pairs, printout  # noqa: E402

from wsesim import cli  # noqa: E402

UNPAIRED: dict[str, str] = {}
"""Output blocks with no command the rule can pair them with: name -> why that is right (none today)."""
ELIDED: dict[str, str] = {}
"""Pairs that cannot be checked verbatim (a placeholder command, a line cut short): name -> why (none)."""
SCRIPT_ONLY: dict[str, str] = {
    "One workload on a wafer and on GPUs #1": "13-16 s here: the sweep's 9 points ~3 s, its 3 figures in 3 "
                                              "formats the rest (tests/cli/test_wafer_vs_gpus_cmd.py runs a "
                                              "smaller one)",
}
"""Pairs too slow for the suite (more than ~3 s here), checked by scripts/check_readme.py: name -> time.
"Serving: prefill and decode with the weights resident #1" (DeepSeek-V3 over 3 grids, 3.8-4.3 s
here) stays in the suite though: tests/test_readme.py ran it before this module, so it adds no time."""

FOUND, UNPAIRED_FOUND = pairs()


def test_the_rule_pairs_every_block_it_should() -> None:
    """Every output block is a pair, or named above with its reason; every pair is checked here or by the
    script; and the rule still finds the README's pairs (a changed fence would otherwise find none)."""
    assert {u.split(": ", 1)[0] for u in UNPAIRED_FOUND} == set(UNPAIRED), UNPAIRED_FOUND
    assert {p.name for p in FOUND if p.elided} == set(ELIDED), [(p.name, p.elided) for p in FOUND if p.elided]
    assert set(SCRIPT_ONLY) <= {p.name for p in FOUND}
    names = [p.name for p in FOUND]
    assert len(names) == len(set(names)) and len(names) >= 7
    assert {"Speculative decoding and split prefill #2", "Energy and cost #1", "Kernels #2"} <= set(names)


CHECKED = [p for p in FOUND if not p.elided and p.name not in SCRIPT_ONLY]


@pytest.mark.parametrize("pair", CHECKED, ids=[p.name for p in CHECKED])
def test_the_readme_quotes_what_the_command_prints(pair: Pair) -> None:
    printed, failed = printout(pair, cli.main)
    assert failed == []
    assert missing(pair, printed) == [], "\n".join(printed)


# ----------------------------------------------------------------------------------- the rule, on its own

README = """# t
## One
```sh
wsesim kernel gemv --grid 8x8 --shape 1x8x8   # a comment
```
Prose.

```text
a line
...
another
```
## Two
```sh
wsesim infer \\
  --json
wsesim run
```
The second runs:

```text
x
```
Then the table, and

```
y
```
```python
z = 1
```
```text
orphan
```
```
$ wsesim kernel gemm ...
w
```
```sh
wsesim kernel
```
```text
cut short …
```
"""


def test_the_rule_on_a_made_up_readme() -> None:
    found, unpaired = pairs(README)
    got = {p.name: (p.commands, p.quoted, bool(p.elided)) for p in found}
    assert got == {
        "One #1": ((("kernel", "gemv", "--grid", "8x8", "--shape", "1x8x8"),), ("a line", "another"), False),
        "Two #1": ((("run",),), ("x",), False),
        "Two #2": ((("infer", "--json"), ("run",)), ("y",), False),   # no ordinal: both commands
        "Two #4": ((("kernel", "gemm", "..."),), ("w",), True),       # a placeholder command
        "Two #5": ((("kernel",),), ("cut short …",), True),           # a line cut short
    }
    assert unpaired == ["Two #3: no command block before it"]        # a python block lies between
