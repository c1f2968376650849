"""Where a sweep's points run: local worker processes, or a Dask distributed cluster.

Both yield rows as points finish and leave nothing behind: no local worker outlives the sweep (however
it ends), and a ``--scheduler`` address that is not a Dask scheduler fails within seconds with one line
(``connect_dask``), never a hang or a traceback.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import suppress
from typing import Any

from ..config.errors import ConfigError
from .table import WORKER_DIED


def run_local(run: Callable[[Any], dict[str, Any]], points: Sequence[Any], workers: int, *,
              group: Callable[[Any], Any] | None = None,
              cost: Callable[[Any], float] | None = None,
              died: Callable[[Any, str], dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
    """``run(point)`` of each point, as they finish, from ``workers`` local processes (1: in this process);
    ``run`` must pickle (a module-level function, or a ``functools.partial`` of one).

    With ``group`` (a point's plan key) each worker is a process of its own and the points are dealt to
    them in advance (``_deal``): longest first by ``cost``, each to a worker that already builds its plan
    (the mesh, the dispatch model, the chunk plan: cached per process) when balance allows, so that a plan
    is built by as few workers as possible rather than by every one. Rows still arrive one by one.

    A worker that dies (the out-of-memory killer, a signal) costs the point it was running, never the
    sweep: ``died(point, why)`` is that point's row, and the worker's other points go to a new process.

    No worker outlives the sweep: if the consumer stops early (an exception, Ctrl-C, a SIGTERM handler
    that raises, or closing this generator) the workers are terminated; if this process dies without a
    chance to (SIGKILL), each worker sees it is orphaned within a second and exits (``_worker_start``).
    Workers ignore SIGINT: a Ctrl-C reaches the whole process group, and the parent is the one to act."""
    if workers <= 1 or len(points) <= 1:
        for p in points:
            yield run(p)
        return
    # local: loky's process pool (and concurrent.futures) loads only for a sweep over several workers
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool  # loky's (a worker died) is a subclass

    bins = [list(points)] if group is None else _deal(points, workers, group, cost or (lambda p: 1.0))
    new_pool = _pool_maker(workers if group is None else 1)
    pools = [new_pool() for _ in bins]
    finished = False
    try:
        pending: dict[Any, tuple[int, int, Any]] = {}  # future -> (bin, order submitted, point)
        order = 0
        for i, (pool, share) in enumerate(zip(pools, bins, strict=True)):
            for p in share:
                pending[pool.submit(run, p)] = (i, order, p)
                order += 1
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for f in sorted(done, key=lambda f: pending[f][1]):
                if f not in pending:
                    continue  # resubmitted below, with its bin
                i, mine, p = pending.pop(f)
                try:
                    yield f.result()
                    continue
                except BrokenProcessPool:
                    if died is None:
                        raise
                running, order = _after_death(i, mine, p, pending, pools, new_pool, run, order)
                yield died(running, f"{WORKER_DIED} (killed, e.g. by the out-of-memory killer)")
        finished = True
    finally:
        for pool in pools:
            if finished:
                pool.shutdown(wait=True)
            else:
                _terminate(pool)


def _pool_maker(workers: int) -> Callable[[], Any]:
    """A maker of loky process pools of ``workers`` processes, each started by ``_worker_start``. loky's
    start method: a clean interpreter per worker (no fork) that, unlike multiprocessing's spawn, never
    re-runs the caller's __main__, so run_sweep(..., workers=2) works from a script without an
    ``if __name__ == "__main__"`` guard and from ``python -`` (a spawned worker re-ran the script, or
    tried to open "<stdin>", and the pool broke)."""
    # local: keeps loky out of experiments.workers's import (only a sweep over several workers needs it)
    from loky import ProcessPoolExecutor
    from loky.backend.context import get_context

    context = get_context("loky")
    return lambda: ProcessPoolExecutor(max_workers=workers, context=context, initializer=_worker_start,
                                       initargs=(os.getpid(),))


def _after_death(i: int, mine: int, point: Any, pending: dict[Any, tuple[int, int, Any]], pools: list[Any],
                 new_pool: Callable[[], Any], run: Callable[[Any], Any], order: int) -> tuple[Any, int]:
    """Bin ``i``'s process died under ``point`` (submitted ``mine``-th): its earliest unfinished point was
    the one running, and the bin's others go to a new process. Returns (the point that was running, the
    next submission's order)."""
    unfinished = sorted([(mine, point)] + [(o, pending.pop(g)[2])
                                           for g, (j, o, _) in list(pending.items()) if j == i],
                        key=lambda op: op[0])
    _terminate(pools[i])
    pools[i] = new_pool()
    for _, q in unfinished[1:]:
        pending[pools[i].submit(run, q)] = (i, order, q)
        order += 1
    return unfinished[0][1], order


def _deal(points: Sequence[Any], workers: int, group: Callable[[Any], Any],
          cost: Callable[[Any], float]) -> list[list[Any]]:
    """Points dealt to ``workers`` bins, longest first (longest-processing-time scheduling): each goes to
    the least loaded bin, unless a bin that already builds its plan is no more than the point's own cost
    above that — then there, so that a plan is built by as few workers as balance allows."""
    bins: list[list[Any]] = [[] for _ in range(min(workers, len(points)))]
    load = [0.0] * len(bins)
    plans: list[set[Any]] = [set() for _ in bins]
    for p in sorted(points, key=lambda p: -cost(p)):
        least = min(load)
        sharing = [i for i in range(len(bins)) if group(p) in plans[i] and load[i] <= least + cost(p)]
        i = min(sharing, key=lambda j: load[j]) if sharing else load.index(least)
        bins[i].append(p)
        load[i] += cost(p)
        plans[i].add(group(p))
    return [b for b in bins if b]


PARENT_CHECK_S = 0.5


def _worker_start(parent: int) -> None:
    """In each local worker: ignore SIGINT (the parent handles Ctrl-C and stops the pool) and exit as
    soon as the parent is gone (the worker is re-parented, so ``os.getppid()`` changes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="wsesim-parent-watch", daemon=True).start()


def _terminate(pool: Any) -> None:
    """Stop a loky ProcessPoolExecutor now: terminate its workers, let the pool go (what had not started is
    never run), reap them. Signals are sent here by pid: loky's own kill path calls a ``Popen.kill`` its
    process class lacks when it cannot list a worker's children, and that once failed a SIGTERM'd sweep."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # no public API for them
    for proc in procs:
        with suppress(OSError):
            os.kill(proc.pid, signal.SIGTERM)
    pool.shutdown(wait=False)
    for proc in procs:
        proc.join(timeout=5)
        if proc.is_alive():
            with suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.join(timeout=5)


DASK_CONNECT_S = 8.0
"""The longest wait for a Dask scheduler to answer (or Dask's own connect timeout, if shorter)."""


def dask_connect_timeout() -> float:
    """Seconds ``connect_dask`` waits: Dask's ``distributed.comm.timeouts.connect`` capped at
    ``DASK_CONNECT_S`` (e.g. ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=2s`` for less)."""
    # local: keeps Dask out of experiments.workers's import
    import dask
    from dask.utils import parse_timedelta

    configured = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), default="seconds")
    return min(float(configured or DASK_CONNECT_S), DASK_CONNECT_S)


def connect_dask(address: str) -> Any:
    """A Dask client for the scheduler at ``address``, connected now, so that a bad address fails before
    anything is written: it gives up within ``dask_connect_timeout()`` (8 s at most) and 2 s.

    First a probe, in a thread of its own with its own event loop and a hard deadline: connect, Dask's
    handshake, and an ``identity`` call that a scheduler answers with ``type: Scheduler``. Anything else
    (nothing listening, no answer, another protocol, a Dask worker) is a one-line ``ConfigError``; Dask's
    own ``Client`` would wait forever for a silent peer, or try to allocate a frame of whatever size an
    HTTP server's first bytes spell. Then the client itself. Raises ``ConfigError`` if dask is missing."""
    try:  # local: Dask is optional (a sweep on a scheduler alone needs it)
        from dask.distributed import Client
    except ImportError:
        raise ConfigError("expected dask to be installed for --scheduler (pip install 'wsesim[dask]')",
                          source="--scheduler") from None
    timeout = dask_connect_timeout()
    _probe_scheduler(address, timeout)
    try:
        return Client(address, timeout=timeout)
    except Exception as e:  # noqa: BLE001 - whatever Dask raises, the user gets one line
        raise ConfigError(f"cannot connect to the Dask scheduler at {address!r} ({type(e).__name__})",
                          source="--scheduler") from None


class _NotAScheduler(Exception):
    pass


class _BadAddress(Exception):
    pass


async def _exchange(address: str, timeout: float) -> None:
    """Ask ``address`` who it is (Dask's ``identity``); ``_BadAddress`` or ``_NotAScheduler`` unless a
    Dask scheduler answers."""
    # local: keeps Dask out of experiments.workers's import
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.core import connect
    from distributed.comm.registry import get_backend
    from distributed.core import send_recv

    try:
        scheme, location = parse_address(address)
        get_backend(scheme)
        if scheme in ("tcp", "tls"):
            parse_host_port(location)
    except (ValueError, TypeError) as e:
        raise _BadAddress(str(e)[:200]) from None
    comm = await connect(address, timeout=timeout)
    try:
        reply = await send_recv(comm, op="identity")
    finally:
        comm.abort()
    kind = reply.get("type") if isinstance(reply, dict) else None
    if kind != "Scheduler":
        raise _NotAScheduler(f"it answered as a Dask {kind}, not a scheduler" if isinstance(kind, str)
                             else "it did not answer as a Dask scheduler")


def _probe_scheduler(address: str, timeout: float) -> None:
    """Raise ``ConfigError`` unless a Dask scheduler answers at ``address``: connecting is given
    ``timeout`` seconds (Dask retries a refused connection until then), the whole exchange 2 s more."""
    # local: keeps asyncio out of experiments.workers's import (only a Dask scheduler's probe needs it)
    import asyncio

    outcome: dict[str, Any] = {}

    async def probe() -> None:
        try:
            await asyncio.wait_for(_exchange(address, timeout), timeout + 2)
        except asyncio.TimeoutError:
            raise _NotAScheduler("it accepted the connection but did not answer within "
                                 f"{timeout + 2:g} s") from None

    def run() -> None:
        try:
            asyncio.run(probe())
            outcome["ok"] = True
        except BaseException as e:  # noqa: BLE001 - reported below, one line
            outcome["error"] = e

    thread = threading.Thread(target=run, name="wsesim-dask-probe", daemon=True)
    thread.start()
    thread.join(timeout + 4)  # the probe bounds itself; this bounds anything it failed to foresee
    if outcome.get("ok"):
        return
    error = outcome.get("error")
    if isinstance(error, _NotAScheduler):
        why = f"is not a Dask scheduler: {error}"
    elif error is None:
        why = f"is not a Dask scheduler: no answer within {timeout + 4:g} s"
    elif isinstance(error, _BadAddress):
        why = f"is not a Dask address ({error})"
    elif type(error) is OSError:  # Dask's connect gave up: nothing accepted the connection in time
        raise ConfigError(f"cannot reach the Dask scheduler at {address!r} (OSError)", source="--scheduler")
    else:  # another protocol: a closed connection, a garbled or monstrous frame (MemoryError), ...
        why = f"is not a Dask scheduler: it answered in another protocol ({type(error).__name__})"
    raise ConfigError(f"{address!r} {why}", source="--scheduler")


def run_dask(run: Callable[[Any], dict[str, Any]], points: Sequence[Any],
             scheduler: Any) -> Iterator[dict[str, Any]]:
    """``run(point)`` of each point, as they finish, on a Dask distributed cluster: ``scheduler`` is an
    address (connected and closed here) or a client from ``connect_dask`` (left open for its owner)."""
    # local: keeps Dask out of experiments.workers's import
    from dask.distributed import as_completed

    client = connect_dask(scheduler) if isinstance(scheduler, str) else scheduler
    try:
        futures = [client.submit(run, p, pure=False) for p in points]
        for f in as_completed(futures):
            yield f.result()
    finally:
        if isinstance(scheduler, str):
            client.close()
