"""How the figures' words and units read (``analysis.figures`` and ``tune_plans`` plan with them): a swept
file named by its file name, the sweep-wide ``--set`` settings beside what the rows hold, and the
throughput axis's unit."""

from __future__ import annotations

import re
from typing import Any

_REFERENCES = ("hardware", "model", "cluster.interconnect")  # keys whose value may be a file's path


def label(key: str, v: str) -> str:
    """A swept value as a figure shows it: a preset's name as it is, a file given by its path by the
    file's name (``qwen3-30b-a3b.json``, not ``/home/…/tests/data/hf/qwen3-30b-a3b.json``)."""
    if key in _REFERENCES and ("/" in v or "\\" in v):
        return re.split(r"[/\\]", v.rstrip("/\\"))[-1] or v
    return v


def with_settings(constant: dict[str, str], settings: dict[str, Any] | None) -> dict[str, str]:
    """``constant`` and the sweep-wide settings given on the command line (``sweep --set KEY=VALUE``, kept
    in the folder's manifest): they hold for every row too, but no CSV column says so. A setting the rows
    already show (``hardware``, ``training.seq_len``) is not said twice."""
    out = dict(constant)
    for key, v in (settings or {}).items():
        if key not in out and key.rsplit(".", 1)[-1] not in out:
            out[key] = v if isinstance(v, str) else str(v)
    return out


def thousands(top: float) -> tuple[float, str]:
    """A throughput axis's unit: thousand tokens/s, or million once its ``top`` passes a million (never
    "10,000 thousand"); its divisor and its word."""
    return (1e6, "million") if top >= 1e6 else (1e3, "thousand")


def y_unit(rows: list[dict[str, str]], column: str, label: str) -> tuple[float, str]:
    """The y axis's unit (``thousands``) over the rows that ran; its divisor and the label with it."""
    scale, word = thousands(max((float(r[column]) for r in rows
                                 if r.get("status") == "ok" and _positive(r.get(column))), default=0.0))
    return scale, label.replace("thousand", word)


def _positive(text: str | None) -> bool:
    try:
        return bool(text) and float(text) > 0  # type: ignore[arg-type]
    except ValueError:
        return False
