"""Output primitives (wsesim.output.files): atomic whole-file writes, whole-line appends, the folder lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wsesim.config.errors import ConfigError
from wsesim.output.files import LOCK_NAME, LineAppender, atomic_write_text, complete_lines, folder_lock


def test_line_appender_adds_whole_lines_in_place(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    atomic_write_text(path, "a,b\n")
    inode = path.stat().st_ino
    with LineAppender(path) as out:
        out.write("1,2\n")
        out.write("3,4")  # the newline is added: every line ends whole
    assert path.read_text(encoding="utf-8") == "a,b\n1,2\n3,4\n"
    assert path.stat().st_ino == inode


def test_complete_lines_drops_a_last_line_without_its_newline() -> None:
    assert complete_lines(b"a\nb\nc") == b"a\nb\n"
    assert complete_lines(b"a\nb\n") == b"a\nb\n"
    assert complete_lines(b"abc") == b""


def test_folder_lock_is_exclusive_names_its_holder_and_leaves_nothing(tmp_path: Path) -> None:
    with folder_lock(tmp_path, "wsesim sweep s.yaml"):
        assert (tmp_path / LOCK_NAME).read_text(encoding="utf-8") == f"pid {os.getpid()}: wsesim sweep s.yaml\n"
        with pytest.raises(ConfigError) as info, folder_lock(tmp_path, "second"):
            pass
        assert str(info.value) == (f"{tmp_path}: another wsesim is writing to this folder (pid {os.getpid()}: "
                                   "wsesim sweep s.yaml); wait for it to finish, or give another --out")
    assert list(tmp_path.iterdir()) == []
    with folder_lock(tmp_path, "again"):  # free once released
        pass


def test_a_killed_holder_leaves_a_stale_file_but_no_lock(tmp_path: Path) -> None:
    """The kernel drops a flock with its process: a SIGKILLed sweep does not hold its folder forever."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom wsesim.output.files import folder_lock\n"
         "with folder_lock(sys.argv[1], 'killed'):\n    print('held', flush=True)\n    time.sleep(300)\n",
         str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    holder.kill()
    holder.wait(timeout=30)
    assert (tmp_path / LOCK_NAME).read_text(encoding="utf-8") == f"pid {holder.pid}: killed\n"
    with folder_lock(tmp_path, "next"):
        assert (tmp_path / LOCK_NAME).read_text(encoding="utf-8") == f"pid {os.getpid()}: next\n"
