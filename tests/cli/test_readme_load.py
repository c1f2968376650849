"""The README's "Serving many users" example quotes TTFT, TPOT, inter-token latency and end to end
(issue 29: the true numbers). That each quoted line is what the command prints is checked, with every
other README printout, by tests/test_readme_blocks.py; here, that the example quotes these lines at all
and is the section's first command, without ``--out`` changing what it prints."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "scripts"))  # (scripts/_readme_pairs.py)
from _readme_pairs import pairs  # noqa: E402


def test_the_readme_load_example_quotes_the_latencies() -> None:
    [pair] = [p for p in pairs()[0] if p.name.startswith("Serving many users")]
    [args] = pair.commands
    assert args[0] == "infer" and args[-2] == "--out" and "inference.load.arrival=poisson" in args
    starts = [line.split("  ", 1)[0] for line in pair.quoted]
    assert {"time to first token", "time per output token", "inter-token latency", "end to end per request",
            "goodput"} <= set(starts)
