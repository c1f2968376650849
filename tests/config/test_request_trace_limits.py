"""Issue 40, medium 8: a request trace's arrivals beyond what a float holds, and files too large to read,
each one line naming the file (config/request_trace.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsesim import cli
from wsesim.config import request_trace
from wsesim.config.errors import ConfigError
from wsesim.config.request_trace import check_cycles, read_request_trace

HEADER = "arrival_s,prompt_len,output_len\n"
TINY = ["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "hardware.pe.sram=1 MiB",
        "--set", "inference.load.prompt_len=16", "--set", "inference.load.arrival=trace"]


def _infer(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + text)
    assert cli.main([*TINY, "--set", f"inference.load.file={path}", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_an_arrival_of_1e308_s_is_refused_not_overflowed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         recwarn: pytest.WarningsRecorder) -> None:
    """It overflowed to infinite cycles (numpy warnings, Infinity in --json, a request dropped)."""
    line = _infer(tmp_path, "0,4,4\n1e308,4,4\n", capsys)
    assert "t.csv: inference.load.file: expected arrivals within 9,007,199 s of the first (2^53 clock cycles at " \
           "1 GHz" in line and "got 1e+308 s (request 2)" in line
    assert not [w for w in recwarn if "overflow" in str(w.message)]


def test_arrivals_a_float_cannot_subtract_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "-1e308,4,4\n1e308,4,4\n")
    with pytest.raises(ConfigError, match=r"inference\.load\.file: row 3: expected arrival times a float can subtract"):
        read_request_trace(str(path))


def test_arrivals_past_2_to_the_53_cycles_are_refused_and_below_it_kept() -> None:
    """At 1 GHz 2^53 cycles are 9,007,199.25 s: a float past them no longer holds every cycle, so two
    arrivals one cycle apart round together silently."""
    import numpy as np

    check_cycles(np.array([0.0, 9_007_199.0]), 1e9, "t.csv")
    with pytest.raises(ConfigError, match=r"got 9\.0072e\+06 s \(request 2\)"):
        check_cycles(np.array([0.0, 9_007_199.3]), 1e9, "t.csv")


def test_a_line_longer_than_the_cap_is_refused_before_it_is_held(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A 2 GB file without newlines took 4.3 GB to refuse: a line is read at most MAX_LINE at a time."""
    line = _infer(tmp_path, "0,4,4\n" + "1" * (request_trace.MAX_LINE + 10) + "\n", capsys)
    assert line.endswith("t.csv: inference.load.file: line 3: expected lines of at most 4,096 characters, got a "
                         "longer one")


def test_a_file_larger_than_the_cap_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.csv"
    path.write_text(HEADER + "0,4,4\n" * 100)
    monkeypatch.setattr(request_trace, "MAX_BYTES", 512)
    with pytest.raises(ConfigError, match=r"t\.csv: inference\.load\.file: expected a trace of at most .* GiB \(10,000,000 "
                                          r"requests\), got 0\.0 GiB"):
        read_request_trace(str(path))
    assert (tmp_path / "t.csv").stat().st_size > request_trace.MAX_BYTES


@pytest.mark.parametrize("text", ["\u0661", "1_0"])
def test_arrival_times_take_ascii_digits_as_lengths_do(tmp_path: Path, text: str) -> None:
    """Issue 40 (low): Arabic-Indic digits and ``1_0`` were read as arrival times, refused as lengths."""
    path = tmp_path / "t.csv"
    path.write_text(HEADER + f"0,4,4\n{text},4,4\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"inference\.load\.file: row 3: expected arrival_s as seconds or a date"):
        read_request_trace(str(path))
