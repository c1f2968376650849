"""``wsesim plot`` given what is not a sweep's results.csv (a binary file, another program's CSV, a
damaged row) is bad input — exit 2, one line naming the file, no folder made — and ``--json`` prints
the paths it wrote (issue 12, items 11 and 17); a serving run's folder (``infer --out``) is drawn, and
one that is neither a sweep's nor a serving run's is one line. Drawing itself is tests/output/test_plotting.py's.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from wsesim import cli
from wsesim.experiments.table import RESULT_COLUMNS

EXPECTED = "expected a results.csv written by wsesim sweep"
SERVING = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
           "--set", "inference.load.output_len=4", "--set", "hardware.pe.sram=1 MiB"]


def _results(rows: list[dict[str, object]]) -> str:
    """A results.csv as wsesim sweep writes its columns, with made-up figures (no simulation needed)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=RESULT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for i, row in enumerate(rows):
        writer.writerow({"point": i, "point_key": f"k{i}", "status": "ok", "reason": "", "tuned": False,
                         "hardware": "tiny8", "model": "tiny-moe", "experts": 4, "top_k": 2, "seq_len": 16,
                         "batch_per_tile": 1, "tiles": 1, "tokens_per_step": 16, "step_cycles": 1000.0,
                         "step_time_s": 1e-6, "throughput_tokens_per_s": 1.6e7, "phase_attention_cycles": 600.0,
                         "phase_experts_cycles": 400.0, **row})
    return buf.getvalue()


def _plot(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["plot", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("content", "problem"), [
    (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), "got bytes that are not UTF-8 text (at byte 136)"),
    (b"a,b\n1,\x002\n", "got binary data (a NUL byte at byte 6)"),
    (b"", "got an empty file"),
    (b"name,score\nalice,3\n", "got a CSV without the columns status, experts, top_k and 9 more"),
    (_results([{"experts": "many"}]).encode(), "got a row it cannot read (invalid literal for int() with base 10: "
                                                "'many')"),
], ids=["binary", "nul", "empty", "foreign", "damaged-row"])
def test_a_file_that_is_not_a_results_csv(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes,
                                          problem: str) -> None:
    """Each ended as an internal error (UnicodeDecodeError, csv.Error, KeyError, ValueError), or, for the
    foreign CSV, as nothing at all with exit 0."""
    path = tmp_path / "input.csv"
    path.write_bytes(content)
    out = tmp_path / "plots"
    assert _plot(capsys, str(path), "--out", str(out)) == (2, "", f"wsesim: {path}: {EXPECTED}, {problem}\n")
    assert not out.exists()  # no empty folder left behind


def test_json_prints_the_paths_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text(_results([{}, {"tiles": 2, "throughput_tokens_per_s": 3.2e7}]), encoding="utf-8")
    code, out, err = _plot(capsys, str(path), "--out", str(tmp_path / "p"), "--json")
    assert (code, err) == (0, "")
    paths = json.loads(out)
    assert paths == [str(tmp_path / "p" / name) for name in ("phases.png", "phases.svg", "phases.pdf", "figures.json",
                                                                  "manifest.json")]
    assert all(Path(p).stat().st_size > 0 for p in paths)


def test_a_read_only_output_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path, read_only: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text(_results([{}]), encoding="utf-8")
    code, out, err = _plot(capsys, str(path), "--out", str(read_only))
    assert (code, out) == (2, "")
    assert err.startswith(f"wsesim: {read_only}: expected a folder wsesim can write to, got a read-only one (")
    assert list(read_only.iterdir()) == []


# ------------------------------------------------------------------ issue 40, medium 6 and low items


def _swept(rows: list[dict[str, object]]) -> str:
    """``_results`` with the swept keys' ``set:`` columns (model.experts, model.top_k), as a sweep writes."""
    text = _results(rows)
    table = list(csv.DictReader(io.StringIO(text)))
    buf = io.StringIO()
    fields = [*RESULT_COLUMNS, "set:model.experts", "set:model.top_k"]
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in table:
        writer.writerow({**row, "set:model.experts": row["experts"], "set:model.top_k": row["top_k"]})
    return buf.getvalue()


def test_figures_past_the_cap_are_named_not_drawn(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A sweep's figures had no bound (a 4-key, 10,000-row sweep: 1,290 files in 233 s, killed). Two
    swept numeric keys give two throughput figures; ``--max-figures 1`` draws one and names the other,
    on stderr and in figures.json, with the option that draws it."""
    path = tmp_path / "results.csv"
    path.write_text(_swept([{"experts": e, "top_k": k} for e in (4, 8) for k in (1, 2)]), encoding="utf-8")
    code, out, err = _plot(capsys, str(path), "--out", str(tmp_path / "all"))
    assert code == 0 and err == "" and "throughput_vs_top_k.png" in out and "throughput_vs_experts.png" in out
    code, out, err = _plot(capsys, str(path), "--out", str(tmp_path / "p"), "--max-figures", "1")
    assert code == 0
    assert err == ("wsesim: left out throughput_vs_top_k.png: more than 1 figures (2 planned; --max-figures 2 "
                   "draws them all)\n")
    listing = json.loads((tmp_path / "p" / "figures.json").read_text())
    assert list(listing["left_out"]) == ["throughput_vs_top_k"] and len(listing["figures"]) == 1
    assert not (tmp_path / "p" / "throughput_vs_top_k.png").exists()
    with pytest.raises(SystemExit) as exit_:
        _plot(capsys, str(path), "--max-figures", "0")
    assert exit_.value.code == 2


def test_a_figure_too_large_is_left_out_with_its_size(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10,000-row serving sweep drew a 1,672 × 219,343 px PNG: a figure past MAX_PIXELS a side is named
    with its size, not written."""
    from wsesim.output import plotting

    monkeypatch.setattr(plotting, "MAX_PIXELS", 100)
    path = tmp_path / "results.csv"
    path.write_text(_swept([{"experts": e} for e in (4, 8)]), encoding="utf-8")
    code, out, err = _plot(capsys, str(path), "--out", str(tmp_path / "p"))
    assert code == 0 and "phases.png" in err  # every figure of the folder, the phases too
    assert err.startswith("wsesim: left out throughput_vs_experts.png") and "px, more than 100 px a side" in err
    assert not (tmp_path / "p" / "throughput_vs_experts.png").exists()


def test_a_header_only_csv_is_one_line_not_a_silent_exit_0(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text(_results([]), encoding="utf-8")
    assert _plot(capsys, str(path), "--out", str(tmp_path / "p")) == (
        2, "", f"wsesim: {path}: expected at least one row to plot, got a header only (no point finished)\n")
    assert not (tmp_path / "p").exists()


def test_a_training_runs_folder_points_to_plot_wafer(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert cli.main(["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
                     "--out", str(run)]) == 0
    capsys.readouterr()
    code, out, err = _plot(capsys, str(run))
    assert (code, out) == (2, "")
    assert err == (f"wsesim: {run}: expected a sweep's, tune's or serving run's folder, got a training run's "
                   f"(wsesim run --out): draw its wafer pictures with wsesim plot --wafer {run}\n")


def test_a_sweep_where_nothing_ran_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text(_results([{"status": "infeasible", "reason": "does not fit"}]), encoding="utf-8")
    assert _plot(capsys, str(path), "--out", str(tmp_path / "p")) == (
        0, "", f"wsesim: {path}: nothing drawn: no row ran (status ok); their reasons are in the CSV\n")


def test_plot_a_serving_runs_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s"
    assert cli.main(["infer", *SERVING, "--set", "inference.grid=2x2", "--set", "inference.layers_per_stage=1",
                     "--out", str(out)]) == 0
    capsys.readouterr()
    assert cli.main(["plot", str(out), "--json"]) == 0
    assert [Path(p).name for p in json.loads(capsys.readouterr().out)] == [
        "decode_step.png", "decode_step.svg", "decode_step.pdf", "figures.json", "manifest.json"]
    [figure] = json.loads((out / "figures.json").read_text())["figures"]
    assert [s["stage"] for s in figure["stages"]] == ["0", "1"]  # every stage drawn
    assert "2 × 2x2 on 1 wafer, batch 1" in figure["title"]  # one wafer, not "1 wafer(s)"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "infer" and "plot" in manifest["also"]


@pytest.mark.parametrize("content", ["[1, 2]", "3", '"result"'])
def test_plot_a_serving_folder_whose_result_is_no_object_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str) -> None:
    """A result.json holding a JSON list (or a number, a string) beside a good ops.csv: one line, exit 2,
    nothing drawn (issue 40: an AttributeError, the list's ``.get``)."""
    out = tmp_path / "s"
    assert cli.main(["infer", *SERVING, "--out", str(out)]) == 0
    (out / "result.json").write_text(content)
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    assert cli.main(["plot", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected result.json to hold a JSON object, got a JSON " in err
    assert sorted(p.name for p in out.iterdir()) == before


def test_plot_a_folder_with_neither_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert cli.main(["plot", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "serving run's (ops.csv and result.json" in err
    assert list((tmp_path / "empty").iterdir()) == []
