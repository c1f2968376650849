"""``wsesim tune --out DIR`` (candidates.csv + manifest.json) and ``--search-systems`` (a global batch tuned
on each number of systems: the best and the Pareto front of cluster throughput against per-system efficiency)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wsesim import cli
from wsesim.analysis.results import RunResult
from wsesim.experiments.tune import SystemsSearch, TuneResult

TINY = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
        "--set", "training.seq_len=32"]


def test_tune_out_writes_every_candidate_and_a_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tune", *TINY, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert cli.main(["tune", *TINY, "--out", str(tmp_path / "t")]) == 0
    figures = [f"candidates.{x}" for x in ("png", "svg", "pdf")]
    assert capsys.readouterr().out.endswith("".join(f"wrote {tmp_path / 't' / name}\n" for name in
                                                    ["candidates.csv", *figures, "figures.json", "manifest.json"]))
    rows = list(csv.DictReader((tmp_path / "t" / "candidates.csv").open(encoding="utf-8")))
    assert len(rows) == len(printed["candidates"]) and "wall_s" not in rows[0]
    [best] = [r for r in rows if r["best"] == "True"]
    assert (int(best["tiles"]), int(best["batch_per_tile"])) == (printed["best"]["tiles"],
                                                                printed["best"]["batch_per_tile"])
    manifest = json.loads((tmp_path / "t" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["kind"] == "tune" and manifest["files"] == ["candidates.csv", *figures, "figures.json"]
    assert all((tmp_path / "t" / name).stat().st_size > 0 for name in figures)
    assert manifest["best"] == {"tiles": printed["best"]["tiles"], "batch_per_tile": printed["best"]["batch_per_tile"]}


def test_search_systems_for_a_global_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["tune", *TINY, "--set", "training.global_batch=48", "--search-systems", "4,1,5,2"]
    assert cli.main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["systems"] for p in out["per_systems"]] == [1, 2, 4]
    assert out["skipped"][0]["systems"] == 5 and "multiple of systems (5)" in out["skipped"][0]["why"]
    bests = [p["best"] for p in out["per_systems"]]
    assert all(b["global_batch"] == 48 and b["systems"] == p["systems"] for b, p in zip(bests, out["per_systems"],
                                                                                         strict=True))
    top = max(bests, key=lambda b: b["cluster_throughput_tokens_per_s"])
    assert out["best"] == top
    assert out["pareto"][0]["systems"] == 1 and out["pareto"][-1] == top
    assert cli.main([*args, "--out", str(tmp_path / "s")]) == 0
    text = capsys.readouterr().out
    assert "cluster tokens/s" in text and "tokens/s per system" in text and "Pareto front" in text
    rows = list(csv.DictReader((tmp_path / "s" / "candidates.csv").open(encoding="utf-8")))
    assert {r["systems"] for r in rows} == {"1", "2", "4"} and sum(r["best"] == "True" for r in rows) == 1
    drawn = {f"{stem}.{x}" for stem in ("candidates", "systems_front") for x in ("png", "svg", "pdf")}
    assert drawn <= {p.name for p in (tmp_path / "s").iterdir()}  # the search's figure and its candidates
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text(encoding="utf-8"))
    assert drawn <= set(manifest["files"])


def test_a_search_where_every_count_is_skipped_writes_its_csv_and_draws_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """48 sequences split over neither 5 nor 7 systems: no candidate, so no figure (and no error)."""
    assert cli.main(["tune", *TINY, "--set", "training.global_batch=48", "--search-systems", "5,7",
                     "--out", str(tmp_path / "z")]) == 0
    assert "nothing fits on any number of systems" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "z").iterdir()) == ["candidates.csv", "manifest.json"]


@pytest.mark.parametrize(("extra", "says"), [
    (["--search-systems", "1,2"], "--search-systems: expected training.global_batch to be set"),
    (["--set", "training.global_batch=8", "--search-systems", "0,x"], "--search-systems: expected whole numbers of systems"),
])
def test_search_systems_bad_input(extra: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tune", *TINY, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"wsesim: {says}") and err.count("\n") == 1


def _result(systems: int, cluster: float, feasible: bool = True) -> RunResult:
    return RunResult("hw", "m", 0, 0, 32, 1, 1, 8, "recompute", "standard", "uniform", "flow", "regions", "fast",
                     "pe", "grid", "constant", 0, feasible, "", systems=systems,
                     cluster_throughput_tokens_per_s=cluster, throughput_tokens_per_s=cluster / systems)


def test_the_pareto_front_keeps_what_more_systems_buy() -> None:
    rows = [(1, 100.0), (2, 190.0), (4, 180.0), (8, 400.0), (16, 400.0)]
    search = SystemsSearch(64, tuple((n, TuneResult(_result(n, c), (_result(n, c),))) for n, c in rows))
    assert [r.systems for r in search.pareto()] == [1, 2, 8]  # 4 does worse than 2; 16 no better than 8
    assert search.best is not None and search.best.systems == 8  # a tie goes to fewer systems
    none = SystemsSearch(64, ((1, TuneResult(_result(1, 0.0, False), (_result(1, 0.0, False),))),))
    assert none.best is None and none.pareto() == []


def test_the_pareto_front_is_over_throughput_and_per_system_efficiency() -> None:
    """Weak scaling's first counts: 1 system 100 tokens/s, 2 give 200 (100 % each), 4 give 300 (75 %).
    2 systems dominate 1 (as much per system, more in all), so the front is [2, 4]; the old front of
    throughput against systems put every count on it, since each gave more than the one before."""
    rows = [(1, 100.0), (2, 200.0), (4, 300.0)]
    search = SystemsSearch(64, tuple((n, TuneResult(_result(n, c), (_result(n, c),))) for n, c in rows))
    assert [search.efficiency(r) for r in search.bests()] == [1.0, 1.0, 0.75]
    assert [r.systems for r in search.pareto()] == [2, 4]
