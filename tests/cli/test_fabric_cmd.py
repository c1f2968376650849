"""``wsesim fabric`` (wsesim.cli.fabric) through the real entry point, ``python -m wsesim``.

Each subprocess costs most of a second, so the good runs are few and the bad inputs run in one
subprocess each only where the exit path matters; the rest go through ``cli.main`` in-process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wsesim import cli

REPO = Path(__file__).resolve().parents[2]


def wsesim(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wsesim", "fabric", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_all_to_all_json_by_hand() -> None:
    """tiny8, 256 B per PE pair: 64 · 63 = 4,032 messages; the busiest link, (0,3)->(0,4), carries the
    4 sources on its left to the 32 PEs on its right: 128 · 256 B = 32,768 B = 8,192 wavelets. Its path
    latency: the nearest source (0, 3) has 0 hops behind; the farthest upstream, (0, 0), has 4 columns and
    7 rows to go to (7, 7) after it: t* = 11. Flow rule: busy − 1 + injection + t* · hop, with both ramps
    charged at injection (2 · T_R = 4) and t_h = 1 a hop: cycles = 8,192 − 1 + 4 + 11 · 1 = 8,206 (the
    packet fidelity, which queues heads at shared links, is not derived here)."""
    r = wsesim("tiny8", "--pattern", "all-to-all", "--bytes", "256", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for key in ("cycles", "max_link_load_bytes", "messages", "events", "bytes_injected", "bytes_delivered",
                "mode", "mesh", "hottest", "feasible", "reason", "colours_per_node", "routes_per_node"):
        assert key in out
    assert (out["cycles"], out["max_link_load_bytes"], out["messages"], out["events"]) == (8206, 32768, 4032, 0)
    assert out["bytes_injected"] == out["bytes_delivered"] == 4032 * 256
    assert out["mode"] == "flow" and out["mesh"]["rows"] == 8 and out["mesh"]["granularity"] == "pe"
    assert out["hottest"][0] == {"from": [0, 3], "to": [0, 4], "bytes": 32768.0}
    # one colour per direction of travel (4 at most), not one per route through the busiest node
    assert out["feasible"] is True and out["reason"] == ""
    assert (out["colours_per_node"], out["colour_budget"]) == (4, 24) and out["routes_per_node"] > 24
    assert out["seconds"] == pytest.approx(8206e-9)  # tiny8 runs at 1 GHz


def test_packet_message_and_png(tmp_path: Path) -> None:
    """One 5-wavelet message over 3 hops: both ramps 2 · T_R = 4, then 3 hops · t_h = 1, then the body's
    other 4 wavelets: 4 + 3 · 1 + 4 = 11 cycles."""
    png = tmp_path / "load.png"
    r = wsesim("wse2", "--mesh", "16x16", "--mode", "packet", "--pattern", "message", "--hops", "3",
               "--wavelets", "5", "--json", "--png", str(png))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["cycles"] == 11 and out["events"] > 0 and out["messages"] == 1 and out["mode"] == "packet"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_human_view_of_a_multicast(capsys: pytest.CaptureFixture[str]) -> None:
    """One 1-wavelet multicast along row 0 to 3 receivers: receiver k (k hops away) holds it at
    2 · T_R + k · t_h + (1 − 1) = 4 + k: cycles 5, 6, 7."""
    assert cli.main(["fabric", "tiny8", "--pattern", "multicast", "--hops", "3", "--mode", "packet"]) == 0
    text = capsys.readouterr().out
    assert "receivers hold it at cycles 5, 6, 7" in text
    assert "hottest links" in text and "(0, 0) -> (0, 1)" in text


def test_dispatch_at_block_granularity(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fabric", "wse2", "--mesh", "64x64", "--granularity", "block:8", "--pattern", "dispatch",
                     "--experts", "16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mesh"]["rows"] == out["mesh"]["cols"] == 8
    assert out["bytes_injected"] == out["bytes_delivered"] == 64 * 4096 * 16  # 64 B per PE per expert
    assert out["cycles"] > 0


@pytest.mark.parametrize("args", [["--pattern", "all-to-all", "--bytes", "4"],
                                  ["--pattern", "dispatch", "--granularity", "block:16", "--experts", "128"]])
def test_whole_wafer_patterns_fit_the_colour_budget(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    """wsesim fabric wse2 --pattern all-to-all (and dispatch to 128 regions): one colour per direction of
    travel, so within the 24 colours, though the busiest node carries far more routes than that."""
    assert cli.main(["fabric", "wse2", *args]) == 0
    text = capsys.readouterr().out
    assert "colours: at most 4 per node (one per direction of travel), budget" in text
    assert "infeasible" not in text and "the rule wsesim kernel alltoall and the training step's" in text


def test_bad_mesh_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    r = wsesim("tiny8", "--pattern", "all-to-all", "--mesh", "8by8", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == 'wsesim: --mesh: expected ROWSxCOLS of PEs like "64x64", got "8by8"'
    assert r.stdout == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "message"), [
    (["--granularity", "block:0"], '--granularity: expected "pe" or "block:<K>"'),
    (["--granularity", "blocks"], "--granularity"),
    (["--mesh", "16x16"], "--mesh: expected a sub-mesh of at most 8 x 8 PEs (tiny8), got 16 x 16"),
    (["--mesh", "0x4"], "--mesh"),
    (["--mesh", "²x2"], 'wsesim: --mesh: expected ROWSxCOLS of PEs like "64x64", got "²x2"\n'),
    (["--bytes", "-5"], "--bytes: expected a positive number of bytes"),
    (["--bytes", "3 parsecs"], "--bytes"),
    (["--pattern", "message", "--hops", "9"], "--hops: expected 1 to 7 hops"),
    (["--pattern", "message", "--wavelets", "0"], "--wavelets: expected a positive integer"),
    (["--pattern", "dispatch", "--experts", "0"], "--experts"),
    (["--mode", "packet", "--mesh", "8x8", "--set", "mesh.rows=400", "--set", "mesh.cols=400"], None),
    (["--mode", "analytic"], "invalid choice"),
    (["--set", "fabric.link_width=4"], "link_width"),
])
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                          message: str | None) -> None:
    argv = ["fabric", "tiny8", *args]
    if "--pattern" not in args:
        argv += ["--pattern", "all-to-all"]
    if message is None:  # a 400 x 400 wafer at 8 x 8 is fine: this case must succeed
        assert cli.main(argv) == 0
        return
    try:
        code = cli.main(argv)
    except SystemExit as e:  # argparse's own errors leave through SystemExit(2)
        code = e.code
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err


def test_unknown_hardware_exits_2() -> None:
    r = wsesim("no-such-wafer", "--pattern", "hotspot")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_block_granularity_says_which_links_are_per_pe_and_which_whole(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 (low): at block:K the busiest link is one PE link (the block link over K) and the table's are
    whole block links (K PE links each): the same coordinates and 16× the bytes, once without a word."""
    assert cli.main(["fabric", "wse2", "--pattern", "dispatch", "--experts", "16", "--granularity", "block:16"]) == 0
    text = capsys.readouterr().out
    assert "(one of the 16 PE links between nodes, the block link's load over 16)" in text
    assert "hottest node links (all 16 PE links between two 16 x 16 blocks)" in text
