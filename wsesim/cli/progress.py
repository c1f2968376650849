"""Progress on long work, for a person watching: a bar on stderr when stderr is a terminal, nothing at all
when it is piped or redirected (a log or a script sees only the results).

``Progress(total, label)``: ``advance(note)`` after each unit of work, ``close()`` when done (the bar is
erased, so the result prints on a clean line); past the first unit it says the time left at the rate so far
(``time_left``, also the estimate on a sweep's progress lines). ``total=None`` (work whose size is unknown,
one long call) shows the elapsed time instead, redrawn by a thread until ``close()``.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType

from ..experiments.machine import _duration

WIDTH = 24


def time_left(elapsed: float, done: float, total: float) -> str:
    """The time the rest of the work should take at the rate of what is done ("~12 s left"): ``done`` and
    ``total`` in one unit of work (runs, or a sweep's estimated seconds per point); "" before any is done
    (no rate yet) and once all is."""

    if done <= 0 or done >= total:
        return ""
    left = elapsed * (total - done) / done
    return f"~{_duration(left).removeprefix('under ')} left" if left >= 1 else "~under 1 s left"


class Progress:
    def __init__(self, total: int | None, label: str, *, stream: object | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.label, self.done, self.note = total, label, 0, ""
        self.start = time.monotonic()
        try:
            self.on = bool(self.stream.isatty())  # type: ignore[attr-defined]
        except (AttributeError, ValueError, OSError):
            self.on = False
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if self.on and total is None:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        self._draw()

    def line(self) -> str:
        """What the bar shows now."""
        elapsed = time.monotonic() - self.start
        if self.total is None:
            return f"{self.label} … {elapsed:.1f} s"
        filled = WIDTH * self.done // max(self.total, 1)
        bar = "#" * filled + "-" * (WIDTH - filled)
        left = time_left(elapsed, self.done, self.total)
        return (f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:.0f} s"
                f"{f' ({left})' if left else ''} {self.note}").rstrip()

    def advance(self, note: str = "") -> None:
        self.done, self.note = self.done + 1, note
        if self.total is not None and self.done > self.total:
            self.total = self.done  # a retry the plan did not count
        self._draw()

    def _draw(self) -> None:
        if not self.on:
            return
        try:
            self.stream.write("\r\x1b[2K" + self.line()[:150])  # type: ignore[attr-defined]
            self.stream.flush()  # type: ignore[attr-defined]
        except (OSError, ValueError):
            self.on = False

    def _tick(self) -> None:
        while not self._stop.wait(0.2):
            self._draw()

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self.on:
            try:
                self.stream.write("\r\x1b[2K")  # type: ignore[attr-defined]
                self.stream.flush()  # type: ignore[attr-defined]
            except (OSError, ValueError):
                pass
            self.on = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
