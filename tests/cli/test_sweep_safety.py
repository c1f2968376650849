"""``wsesim sweep`` never loses or corrupts results (issue 12): one writer per folder, --resume never drops
a finished row and never trusts a half-written one, rows are appended (not the whole file rewritten),
a closed stderr costs no rows, a non-Dask --scheduler fails fast, and no worker outlives the sweep.

In-process (``cli.main``, ``sweep.run_point`` wrapped) where a test must act between points; through a
subprocess where the point is a process's fate (signals, a closed pipe, a hung connection).
"""

from __future__ import annotations

import csv
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from wsesim import cli
from wsesim.analysis.results import WALL_CLOCK_FIELDS
from wsesim.experiments.sweep import Point
from wsesim.output import files

BASE: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 1},
                        "simulation": {"granularity": "pe"}}
POINTS = [{"model.top_k": 1}, {"model.top_k": 2}]


def _sweep_file(path: Path, *, name: str = "tiny", points: list[dict[str, Any]] | None = None,
                grid: dict[str, list[Any]] | None = None, base: dict[str, Any] | None = None) -> Path:
    data = {"kind": "sweep", "name": name, "base": base or BASE,
            "grid": grid if grid is not None else {"training.tiles": [1, 2]},
            "points": points if points is not None else POINTS}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _strip(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK_FIELDS} for r in rows]


def _sweep(path: Path, out: Path, *extra: str) -> int:
    return cli.main(["sweep", str(path), "--out", str(out), "--workers", "1", *extra])


# ------------------------------------------------------------------------------------ 1. one writer


def test_a_second_sweep_into_a_folder_in_use_is_refused_and_the_first_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], watch_points: Callable[..., list[int]]) -> None:
    """While the first sweep runs (between its points), a second one into the same folder gets exit 2 and
    one line naming the first; the first finishes with all its rows."""
    first, second = _sweep_file(tmp_path / "a.yaml"), _sweep_file(tmp_path / "b.yaml", points=[{"model.top_k": 3}])
    out = tmp_path / "o"
    codes: list[int] = []

    def start_another(point: Point) -> None:
        if point.index == 1 and not codes:
            codes.append(-1)
            codes[0] = _sweep(second, out)

    watch_points(start_another)
    assert _sweep(first, out) == 0
    assert codes == [2]
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("wsesim:")]
    assert errors == [f"wsesim: {out}: another wsesim is writing to this folder (pid {os.getpid()}: wsesim sweep "
                      f"{first} --out {out}); wait for it to finish, or give another --out"]
    rows = _read(out / "results.csv")
    assert [(r["point"], r["set:model.top_k"], r["set:training.tiles"]) for r in rows] == [
        ("0", "1", "1"), ("1", "1", "2"), ("2", "2", "1"), ("3", "2", "2")]
    assert not (out / files.LOCK_NAME).exists()


def test_a_folder_held_by_another_process_is_refused_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep_file(tmp_path / "s.yaml")
    out = tmp_path / "o"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom wsesim.output.files import folder_lock\n"
         "with folder_lock(sys.argv[1], 'wsesim sweep other.yaml'):\n"
         "    print('held', flush=True)\n    sys.stdin.read()\n", str(out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert _sweep(path, out) == 2
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert capsys.readouterr().err == (f"wsesim: {out}: another wsesim is writing to this folder "
                                       f"(pid {holder.pid}: wsesim sweep other.yaml); wait for it to finish, "
                                       "or give another --out\n")
    assert sorted(p.name for p in out.iterdir()) == []  # the holder removed its lock; nothing else was written
    assert _sweep(path, out) == 0  # free again
    assert len(_read(out / "results.csv")) == 4


# ----------------------------------------------------------------- 5. a name cannot leave out/


def test_a_sweep_name_cannot_place_output_outside_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = _sweep_file(tmp_path / "s.yaml", name="../../escape")
    cwd = tmp_path / "a" / "cwd"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    assert cli.main(["sweep", str(path), "--workers", "1"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"wsesim: {path}: name: expected a name that is one folder name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "s.yaml"]  # no tmp_path/escape
    assert list(cwd.iterdir()) == []


# ------------------------------------------------------------------------ 2. --resume drops nothing


@pytest.fixture
def finished(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A finished 4-point sweep: (sweep file, folder, the CSV's bytes)."""
    path, out = _sweep_file(tmp_path / "s.yaml"), tmp_path / "o"
    assert _sweep(path, out) == 0
    return path, out, (out / "results.csv").read_bytes()


@pytest.mark.parametrize(("change", "dropped"), [
    ({"points": POINTS[:1]}, "2 finished rows"),                                   # a point removed
], ids=["point-removed"])
def test_resume_refuses_to_drop_finished_rows(finished: tuple[Path, Path, bytes], capsys: pytest.CaptureFixture[str],
                                              change: dict[str, Any], dropped: str) -> None:
    path, out, before = finished
    _sweep_file(path, **change)
    capsys.readouterr()
    assert _sweep(path, out, "--resume") == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"wsesim: {out / 'results.csv'}: --resume would drop {dropped} of points no longer "
                           "in this sweep")
    assert "another --out" in line and "without --resume" in line  # how to start afresh
    assert (out / "results.csv").read_bytes() == before


def test_resume_after_the_base_is_edited_reruns_every_point(finished: tuple[Path, Path, bytes]) -> None:
    """Every point is still in the sweep, but what each resolves to changed: none of the old rows is kept
    (issue 22 #4: a point's identity is what it resolves to), and the result is a fresh run's."""
    path, out, before = finished
    _sweep_file(path, base={**BASE, "training": {**BASE["training"], "seq_len": 32}})
    assert _sweep(path, out, "--resume") == 0
    old_keys = {r["point_key"] for r in _read(out / "results.csv") if r["point_key"] in before.decode()}
    assert old_keys == set()
    assert [r["seq_len"] for r in _read(out / "results.csv")] == ["32"] * 4


def test_a_folder_of_another_sweep_is_refused_with_or_without_resume(
        finished: tuple[Path, Path, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, before = finished
    other = _sweep_file(tmp_path / "other.yaml", name="other")
    for extra in ((), ("--resume",)):
        capsys.readouterr()
        assert _sweep(other, out, *extra) == 2
        assert capsys.readouterr().err == (f"wsesim: {out}: this folder holds the results of sweep 'tiny', not of "
                                           "sweep 'other': give another --out (or delete the folder to reuse it)\n")
        assert (out / "results.csv").read_bytes() == before


def test_without_resume_the_same_sweep_starts_afresh(finished: tuple[Path, Path, bytes],
                                                     monkeypatch: pytest.MonkeyPatch, watch_points: Callable[..., list[int]]) -> None:
    path, out, _ = finished
    ran = watch_points(lambda point: None)
    assert _sweep(path, out) == 0
    assert ran == [0, 1, 2, 3]


# --------------------------------------------------------------------- 3. a half-written last row


def test_resume_does_not_count_a_half_written_last_row(finished: tuple[Path, Path, bytes],
                                                       monkeypatch: pytest.MonkeyPatch, watch_points: Callable[..., list[int]]) -> None:
    """A crash while row 2 was appended leaves part of it (its point key included) and no newline: it is
    run again, and the file ends up whole."""
    path, out, before = finished
    lines = before.decode().splitlines(keepends=True)
    assert len(lines) == 5
    (out / "results.csv").write_text("".join(lines[:3]) + lines[3][:60], encoding="utf-8")
    assert lines[3][:60].startswith("2,") and "\n" not in lines[3][:60]
    ran = watch_points(lambda point: None)
    assert _sweep(path, out, "--resume") == 0
    assert ran == [2, 3]
    assert _strip(_read(out / "results.csv")) == _strip(list(csv.DictReader(before.decode().splitlines())))


# ----------------------------------------------------------------------------- 6. a closed stderr


class _ClosedPipe:
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_progress_to_a_closed_stderr_loses_no_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, out = _sweep_file(tmp_path / "s.yaml"), tmp_path / "o"
    monkeypatch.setattr(sys, "stderr", _ClosedPipe())
    assert _sweep(path, out) == 0
    assert [r["point"] for r in _read(out / "results.csv")] == ["0", "1", "2", "3"]


def test_stderr_a_closed_pipe_through_the_entry_point(tmp_path: Path) -> None:
    """Progress goes silent, the sweep finishes, every row is written, and the exit code says success."""
    path, out = _sweep_file(tmp_path / "s.yaml"), tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "wsesim", "sweep", str(path), "--out", str(out), "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    proc.stderr.close()  # before the child has written anything: its first progress line meets a closed pipe
    assert proc.wait(timeout=120) == 0
    assert [r["point"] for r in _read(out / "results.csv")] == ["0", "1", "2", "3"]


# ------------------------------------------------------------------------- 7. rows are appended


def test_rows_are_appended_to_one_file_not_the_whole_file_rewritten(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, watch_points: Callable[..., list[int]]) -> None:
    """Per row, the CSV grows by one line in place (same file, old bytes a prefix of the new); the whole
    file is written twice per sweep (its header at the start, sorted at the end), not once per row."""
    path = _sweep_file(tmp_path / "s.yaml", grid={"training.tiles": [1, 2, 4]})  # 6 points
    out = tmp_path / "o"
    csv_path = out / "results.csv"
    snapshots: list[tuple[int, bytes]] = []
    whole_writes: list[str] = []
    real = files.atomic_write_bytes

    def counting(target: str | Path, data: bytes) -> None:
        whole_writes.append(Path(target).name)
        real(target, data)

    monkeypatch.setattr(files, "atomic_write_bytes", counting)
    watch_points(lambda point: snapshots.append(
        (csv_path.stat().st_ino, csv_path.read_bytes()) if csv_path.exists() else (-1, b"")))
    assert _sweep(path, out) == 0
    assert whole_writes.count("results.csv") == 2
    assert len(snapshots) == 6
    assert len({inode for inode, _ in snapshots}) == 1
    lines = [data.count(b"\n") for _, data in snapshots]
    assert lines == [1, 2, 3, 4, 5, 6]  # the header, then one more row before each point
    assert all(b.startswith(a) for (_, a), (_, b) in zip(snapshots, snapshots[1:], strict=False))
    assert [r["point"] for r in _read(csv_path)] == ["0", "1", "2", "3", "4", "5"]


# ------------------------------------------------------------------ 8. a scheduler that is not Dask


@pytest.fixture
def not_dask() -> Iterator[Callable[[str], str]]:
    """``not_dask(mode)`` starts a TCP server that is no Dask scheduler and returns its address: ``silent``
    accepts and never answers; ``http`` answers like a web server."""
    servers: list[socket.socket] = []
    conns: list[socket.socket] = []

    def start(mode: str) -> str:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        servers.append(server)

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                conns.append(conn)
                if mode == "http":
                    try:
                        conn.recv(65536)
                        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" + b"\xff" * 64)
                    except OSError:
                        pass

        threading.Thread(target=serve, daemon=True).start()
        return f"tcp://127.0.0.1:{server.getsockname()[1]}"

    yield start
    for s in [*servers, *conns]:
        s.close()


@pytest.mark.parametrize(("mode", "why"), [
    ("silent", "it accepted the connection but did not answer within 3 s"),
    ("http", "it answered in another protocol (MemoryError)"),  # its bytes spell a frame of exabytes
])
def test_a_scheduler_that_is_not_dask_fails_in_bounded_time_with_one_line(
        tmp_path: Path, not_dask: Callable[[str], str], mode: str, why: str) -> None:
    """Used to hang (silent) or report an internal MemoryError. Dask's connect timeout is cut to 1 s here;
    by default the probe gives up within 8 + 2 s (test_sweep.py checks the cap)."""
    address = not_dask(mode)
    path = _sweep_file(tmp_path / "s.yaml")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"}
    r = subprocess.run([sys.executable, "-m", "wsesim", "sweep", str(path), "--scheduler", address], cwd=cwd,
                       env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"wsesim: --scheduler: {address!r} is not a Dask scheduler: {why}\n"
    assert list(cwd.iterdir()) == []


# --------------------------------------------------------------------- 9. no worker left behind


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie waiting for a parent that does not reap (PID 1 in some containers) is gone too
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def _wait(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture
def slow_sweep(tmp_path: Path) -> Iterator[Callable[[], tuple[subprocess.Popen[str], list[int]]]]:
    """Start ``wsesim sweep --workers 2`` in a subprocess whose points sleep for minutes (``run_point``
    replaced by one that records its worker's pid first); return it and the two workers' pids."""
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    (tmp_path / "slowpoint.py").write_text(textwrap.dedent("""
        import os, pathlib, time

        def run_point(raw, source, point):
            pathlib.Path(os.environ["WSESIM_TEST_PIDS"], str(os.getpid())).touch()
            time.sleep(300)
    """), encoding="utf-8")
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import slowpoint
        from wsesim import cli
        from wsesim.experiments import sweep
        if __name__ == "__main__":  # spawned workers import this file too
            sweep.run_point = slowpoint.run_point
            sys.exit(cli.main(["sweep", {str(_sweep_file(tmp_path / "s.yaml"))!r}, "--out", {str(tmp_path / "o")!r},
                               "--workers", "2"]))
    """), encoding="utf-8")
    started: list[subprocess.Popen[str]] = []
    pids: list[int] = []

    def start() -> tuple[subprocess.Popen[str], list[int]]:
        proc = subprocess.Popen([sys.executable, str(driver)], env={**os.environ, "WSESIM_TEST_PIDS": str(pids_dir)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        assert _wait(lambda: len(list(pids_dir.iterdir())) == 2, 60), "the workers never started"
        pids.extend(int(p.name) for p in pids_dir.iterdir())
        return proc, pids

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for pid in pids:  # a failed test leaves no sleeping worker either
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_sigterm_stops_the_workers_and_keeps_the_folder_usable(
        slow_sweep: Callable[[], tuple[subprocess.Popen[str], list[int]]], tmp_path: Path) -> None:
    proc, workers = slow_sweep()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.splitlines()[-1] == "wsesim: terminated"
    assert _wait(lambda: all(_gone(pid) for pid in workers), 15), "a worker outlived the sweep"
    assert not (tmp_path / "o" / files.LOCK_NAME).exists()
    assert [line for line in (tmp_path / "o" / "results.csv").read_text().splitlines()][1:] == []  # header only


def test_a_killed_sweep_leaves_no_workers(slow_sweep: Callable[[], tuple[subprocess.Popen[str], list[int]]]) -> None:
    """SIGKILL gives the parent no chance to clean up: each worker notices it is orphaned and exits."""
    proc, workers = slow_sweep()
    proc.kill()
    proc.wait(timeout=30)
    assert _wait(lambda: all(_gone(pid) for pid in workers), 15), "a worker outlived its killed parent"
