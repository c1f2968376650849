"""A serving load read from a CSV file (``inference.load.arrival: trace``, docs/model.md §11.7): one request
a row, its arrival time, prompt length and output length. Two spellings of the columns are read:

* this project's own: ``arrival_s,prompt_len,output_len`` (seconds from the trace's start, tokens);
* the Azure LLM inference trace 2023's (``AzureLLMInferenceTrace_code.csv`` and ``_conv.csv``, published
  by Microsoft with the Splitwise paper): ``TIMESTAMP,ContextTokens,GeneratedTokens``, the timestamp a
  date and time (``2023-11-16 18:15:46.6805900``) or seconds.

Arrivals are taken relative to the earliest row and must not go back in time; lengths are whole tokens,
at least 1. A file is at most ``MAX_BYTES`` and a line at most ``MAX_LINE`` characters (read a line at a
time, so that a file without newlines is refused, not held); an arrival must be a whole number of clock
cycles below 2^53 (``check_cycles``: past it a float no longer holds every cycle). Any other file is one
clear line: the file, the row, what was expected and what came.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
from collections.abc import Iterator
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ConfigError, shown, shown_repr

__all__ = ["COLUMNS", "MAX_BYTES", "MAX_LINE", "check_cycles", "read_request_trace", "trace_digest"]

COLUMNS = (("arrival_s", "prompt_len", "output_len"), ("TIMESTAMP", "ContextTokens", "GeneratedTokens"))
"""The column names read, each spelling (arrival, prompt, output)."""
MAX_ROWS = 10_000_000
MAX_TOKENS = 16_777_216  # inference.load.prompt_len's bound
MAX_BYTES = 2**30  # 1 GiB: MAX_ROWS rows of about 100 characters
MAX_LINE = 4096  # characters in one line (a row is three short values)
MAX_CYCLES = 2**53  # an arrival in cycles held exactly by a float


def _seconds(text: str) -> float | datetime:
    if not text.isascii() or "_" in text:  # as the lengths: "١" and "1_0" are no arrival time here
        raise ValueError(text)
    try:
        return float(text)
    except ValueError:
        return datetime.fromisoformat(text.strip())


def read_request_trace(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival seconds from the first row, prompt tokens, output tokens) of each row of ``path``, in
    the file's order. Raises ``ConfigError`` naming the file and row for what does not read."""
    p = Path(path)
    try:
        stat = p.stat()
    except OSError as e:
        raise ConfigError(f"expected a readable CSV file of requests, got {e.strerror or e}",
                          source=path, path="inference.load.file") from None
    if not p.is_file():
        raise ConfigError("expected a CSV file of requests, got a directory or a special file",
                          source=path, path="inference.load.file")
    if stat.st_size > MAX_BYTES:
        raise ConfigError(f"expected a trace of at most {MAX_BYTES / 2**30:.0f} GiB ({MAX_ROWS:,} requests), "
                          f"got {stat.st_size / 2**30:,.1f} GiB", source=path, path="inference.load.file")
    return _read(str(p.resolve()), stat.st_size, stat.st_mtime_ns)


def trace_digest(path: str) -> str:
    """The SHA-256 (hex) of the trace file's bytes: what a manifest records and a sweep point's key holds,
    so that a trace edited in place (the same path) is a different input (``--resume`` runs it again)."""
    p = Path(path)
    stat = p.stat()
    return _digest(str(p.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=8)
def _digest(path: str, size: int, mtime: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@lru_cache(maxsize=8)
def _read(path: str, size: int, mtime: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The file as read once (the loader checks it, the run reads it; keyed by size and time)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = csv.reader(_lines(f, path))
            header = [h.strip() for h in next(rows, [])]
            names = next((c for c in COLUMNS if set(c) <= set(header)), None)
            if names is None:
                raise ConfigError(f"expected a header with columns {', '.join(COLUMNS[0])} (or the Azure "
                                  f"LLM inference trace's {', '.join(COLUMNS[1])}), got "
                                  f"{shown(','.join(header))}",
                                  source=path, path="inference.load.file")
            at = [header.index(n) for n in names]
            times: list[float | datetime] = []
            lengths: list[tuple[int, int]] = []
            lines: list[int] = []  # each request's row in the file (blank rows are skipped)
            for line, row in enumerate(rows, start=2):
                if not row or all(not c.strip() for c in row):
                    continue
                if len(times) >= MAX_ROWS:
                    raise ConfigError(f"expected at most {MAX_ROWS:,} requests, got more", source=path,
                                      path="inference.load.file")
                times.append(_time(row, at[0], names[0], line, path))
                lines.append(line)
                lengths.append((_tokens(row, at[1], names[1], line, path),
                                _tokens(row, at[2], names[2], line, path)))
    except UnicodeDecodeError:
        raise ConfigError("expected a UTF-8 text file of requests, got bytes that do not decode", source=path,
                          path="inference.load.file") from None
    except csv.Error as e:
        raise ConfigError(f"expected a CSV file, got {shown(e)}", source=path,
                          path="inference.load.file") from None
    if not times:
        raise ConfigError("expected at least one request row, got none", source=path,
                          path="inference.load.file")
    if any(isinstance(x, datetime) for x in times):  # to the microsecond, from the first row's
        if not all(isinstance(x, datetime) for x in times):
            raise ConfigError("expected every arrival as a date and time or every one as seconds, got both",
                              source=path, path="inference.load.file")
        stamps = [x for x in times if isinstance(x, datetime)]  # every one, as the check above says
        start, zoned = stamps[0], stamps[0].tzinfo is not None
        other = next((i for i, x in enumerate(stamps) if (x.tzinfo is not None) != zoned), None)
        if other is not None:  # a time with a zone and one without have no difference
            raise ConfigError(f"expected every arrival with a time zone or every one without, got "
                              f"{shown_repr(str(stamps[other]))} {'without' if zoned else 'with'} one after "
                              f"{shown_repr(str(start))} {'with' if zoned else 'without'}", source=path,
                              path=f"inference.load.file: row {lines[other]}")
        t = np.array([(x - start).total_seconds() for x in stamps])
    else:
        t = np.array(times, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        far = np.flatnonzero(~np.isfinite(t - t[0]))
    if far.size:  # 1e308 s after -1e308 s: no difference a float can hold
        raise ConfigError("expected arrival times a float can subtract, got one too far from the first row's",
                          source=path, path=f"inference.load.file: row {lines[int(far[0])]}")
    back = np.flatnonzero(np.diff(t) < 0)
    if back.size:
        row = lines[int(back[0]) + 1]
        raise ConfigError(f"expected arrival times in order, got row {row} earlier than the row before it",
                          source=path, path="inference.load.file")
    n = np.array(lengths, dtype=np.int64).reshape(-1, 2)
    return t - t[0], n[:, 0], n[:, 1]


def _lines(f: Any, path: str) -> Iterator[str]:
    """The file's lines, each read at most ``MAX_LINE`` characters at a time: a longer one is refused."""
    for number in itertools.count(1):
        line = f.readline(MAX_LINE + 1)
        if not line:
            return
        if len(line) > MAX_LINE:
            raise ConfigError(f"expected lines of at most {MAX_LINE:,} characters, got a longer one",
                              source=path, path=f"inference.load.file: line {number}")
        yield line


def check_cycles(seconds: np.ndarray, clock_hz: float, path: str) -> None:
    """Refuse arrivals at or past 2^53 clock cycles (at ``clock_hz``) from the first: a float holds
    no longer every cycle there, so two arrivals would round together silently."""
    past = np.flatnonzero(seconds >= MAX_CYCLES / clock_hz)  # (seconds × clock overflows past 1e299)
    if past.size:
        i = int(past[0])
        raise ConfigError(f"expected arrivals within {MAX_CYCLES / clock_hz:,.0f} s of the first (2^53 clock "
                          f"cycles at {clock_hz / 1e9:g} GHz, a float's exact range), got {seconds[i]:.6g} s "
                          f"(request {i + 1})", source=path, path="inference.load.file")


def _cell(row: list[str], i: int, name: str, line: int, path: str) -> str:
    if i >= len(row) or not row[i].strip():
        raise ConfigError(f"expected a value in column {name}, got none", source=path,
                          path=f"inference.load.file: row {line}")
    return row[i].strip()


def _time(row: list[str], i: int, name: str, line: int, path: str) -> float | datetime:
    text = _cell(row, i, name, line, path)
    try:
        t = _seconds(text)
    except ValueError:
        t = float("nan")
    if isinstance(t, float) and not np.isfinite(t):
        raise ConfigError(f"expected {name} as seconds or a date and time, got {shown_repr(text)}",
                          source=path, path=f"inference.load.file: row {line}")
    return t


def _tokens(row: list[str], i: int, name: str, line: int, path: str) -> int:
    text = _cell(row, i, name, line, path)
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_TOKENS:
        raise ConfigError(f"expected {name} as a whole number of tokens from 1 to {MAX_TOKENS:,}, got "
                          f"{shown_repr(text)}", source=path, path=f"inference.load.file: row {line}")
    return int(text)
