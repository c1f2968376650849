"""This machine's limits, as the work estimates read them: its memory (the container's or the process's
limit if lower), the share of it a run may hold (``MEMORY_FRACTION``, or ``WSESIM_MAX_MEMORY`` in its
place), and the longest run and sweep allowed (``WSESIM_MAX_RUN_S``, ``WSESIM_MAX_SWEEP_S``); and how an
estimate says seconds and bytes."""

from __future__ import annotations

import os
from collections.abc import Callable

from ..config.errors import ConfigError, UnitError
from ..config.units import parse_quantity

DEFAULT_MAX_RUN_SECONDS = 1800.0
DEFAULT_MAX_SWEEP_SECONDS = 86400.0
MEMORY_FRACTION = 0.8  # of this machine's memory, what a run's estimate may reach (the rest: the system's)
MEMORY_VARIABLE = "WSESIM_MAX_MEMORY"


def max_run_seconds() -> float:
    """The longest estimated run allowed: ``WSESIM_MAX_RUN_S`` (seconds), else 30 minutes."""
    return _seconds_from_env("WSESIM_MAX_RUN_S", DEFAULT_MAX_RUN_SECONDS)


def max_sweep_seconds() -> float:
    """The longest estimated sweep allowed (its points over its workers): ``WSESIM_MAX_SWEEP_S``, else a
    day."""
    return _seconds_from_env("WSESIM_MAX_SWEEP_S", DEFAULT_MAX_SWEEP_SECONDS)


def _seconds_from_env(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"expected a number of seconds, got {text!r}", source=name) from None
    if not value > 0 or value != value:
        raise ConfigError(f"expected a positive number of seconds, got {text!r}", source=name)
    return value


def machine_memory() -> float:
    """Bytes of memory this process may use: physical memory, or the container's limit or the process's
    address-space limit (``ulimit -v``) if lower."""
    try:
        memory = float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        memory = 16 * 2.0**30
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < memory:
            memory = float(text)
    try:  # an address-space limit (ulimit -v) ends the run in MemoryError as surely as the machine's size
        # local: POSIX only (elsewhere the ImportError below)
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and 0 < soft < memory:
            memory = float(soft)
    except (ImportError, OSError, ValueError):
        pass
    return memory


def memory_limit() -> float:
    """Bytes a run's (or a sweep's workers') estimate may reach: ``WSESIM_MAX_MEMORY`` when set (a size,
    "40 GB" or "64 GiB"; the estimate is good to a factor of about two, so a user who knows better can say
    so), else ``MEMORY_FRACTION`` of ``machine_memory()``. A bad value is a ``ConfigError`` naming it."""
    text = os.environ.get(MEMORY_VARIABLE, "").strip()
    if not text:
        return MEMORY_FRACTION * machine_memory()

    try:
        value = parse_quantity(text, "size")
    except UnitError as e:
        raise ConfigError(e.message, source=MEMORY_VARIABLE) from None
    if not value > 0:
        raise ConfigError(f'expected a positive size like "40 GB", got "{text}"', source=MEMORY_VARIABLE)
    return value


def too_much_memory() -> str:
    """How a refusal says the memory limit was passed, and how to move it."""
    if os.environ.get(MEMORY_VARIABLE, "").strip():
        return f"needs more memory than {MEMORY_VARIABLE} allows ({_size(memory_limit())})"
    return (f"needs more memory than this machine has ({_size(machine_memory())}; {MEMORY_VARIABLE}=<size> "
            "allows more)")


def refuse_work(what: str, seconds: float, nbytes: float, describe: Callable[[], str],
                advice: Callable[[bool, float], str]) -> None:
    """The one refusal of work (a training run or a tuner's candidates, a serving run, kernels) past the
    memory limit (``nbytes``) or the time limit: "``what`` cannot finish here: it <the limit>:
    ``describe()``; ``advice(too_big, fraction)``", ``fraction`` the share that fits."""
    memory, limit_s = memory_limit(), max_run_seconds()
    too_big, too_long = nbytes > memory, seconds > limit_s
    if not (too_big or too_long):
        return
    why = (too_much_memory() if too_big
           else f"would run longer than {_duration(limit_s)} (WSESIM_MAX_RUN_S)")
    fraction = min(limit_s / seconds if too_long else 1.0, memory / nbytes if too_big else 1.0)
    raise ConfigError(f"{what} cannot finish here: it {why}: {describe()}; {advice(too_big, fraction)}")


def about(seconds: float) -> str:
    """An estimate's seconds as a refusal says them: "under 1 s", "about 3 minutes"."""
    took = _duration(seconds)
    return took if took.startswith("under") else f"about {took}"


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.0f} hours"
    days = seconds / 86400
    return f"{days:,.0f} days" if days < 1e6 else f"{days:.1e} days"


def _size(nbytes: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if nbytes >= scale or unit == "MB":
            value = nbytes / scale
            return f"{value:,.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    return ""  # unreachable


__all__ = ["MEMORY_FRACTION", "about", "machine_memory", "max_run_seconds", "max_sweep_seconds",
           "memory_limit", "refuse_work", "too_much_memory"]
