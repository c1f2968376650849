"""``analysis.tune_plans``: tune's figures planned from candidates.csv's rows alone (values derived by hand
from made-up rows: no simulation)."""

from __future__ import annotations

import pytest

from wsesim.analysis.tune_plans import (
    REQUIRED,
    missing_columns,
    parse_candidates,
    plan_candidates,
    plan_systems_front,
    plan_tune,
)

COMMON = {"model": "m", "hardware": "hw", "seq_len": "32", "sram_capacity_bytes_per_pe": "49152"}


def _row(systems: int, tiles: int, b: int, throughput: float, peak: int, feasible: bool = True,
         **marks: object) -> dict[str, str]:
    return {**COMMON, "best": str(marks.pop("best", False)), "systems": str(systems), "tiles": str(tiles),
            "batch_per_tile": str(b), "feasible": str(feasible), "cluster_throughput_tokens_per_s": str(throughput),
            "peak_sram_bytes_per_pe": str(peak), **{k: str(v) for k, v in marks.items()}}


def test_one_system_candidates_are_one_series_sorted_by_g_the_best_ringed() -> None:
    rows = [_row(1, 2, 8, 800000.0, 45056, best=True), _row(1, 1, 16, 500000.0, 40960),
            _row(1, 4, 4, 0.0, 61440, feasible=False)]
    plan = plan_candidates(rows)
    assert plan.stem == "candidates" and plan.scale == 1e3  # 800,000 tokens/s: thousands
    assert plan.y_label == "throughput\n(thousand tokens/s)"
    assert plan.title == ("Tuning candidates: each (G, B) tried (ringed: the best; x: does not fit)\n"
                          "m on hw, seq_len 32")
    assert plan.throughput_top == 1.15 * 800000.0 / 1e3  # 920: 15 % above the highest
    assert plan.sram_capacity_bytes_per_pe == 49152 and plan.sram_top_kib == 1.1 * 61440 / 1024  # 66 KiB
    assert not plan.log_x  # G from 1 to 4
    [series] = plan.series
    assert (series.label, series.systems, series.colour, series.marker) == ("candidates", 1, 1, 0)
    assert [(p["tiles"], p["batch_per_tile"], p["ring"], p["row"]) for p in series.points] == [
        (1, 16, "", 2), (2, 8, "best", 1), (4, 4, "", 3)]
    assert [p["feasible"] for p in series.points] == [True, True, False]
    assert plan_systems_front(list(rows[0]), rows) is None  # a plain tune's CSV has no front


def test_counts_of_systems_are_series_and_a_count_that_fits_nothing_is_not_ringed() -> None:
    rows = [_row(1, 1, 12, 700000.0, 40000, best_of_systems=True),
            _row(1, 32, 1, 600000.0, 30000, best_of_systems=False),
            _row(2, 1, 12, 2.4e6, 40000, best=True, best_of_systems=True),
            _row(4, 1, 12, 0.0, 50000, feasible=False, best_of_systems=True)]  # nothing fits on 4
    plan = plan_candidates(rows)
    assert plan.scale == 1e6 and plan.y_label == "cluster throughput\n(million tokens/s)"
    assert plan.throughput_top == 1.15 * 2.4e6 / 1e6
    assert plan.log_x  # G from 1 to 32: more than a factor 16
    assert "ringed: the best of each count" in plan.title
    assert [(s.label, s.colour, s.marker) for s in plan.series] == [
        ("1 system", 1, 0), ("2 systems", 2, 1), ("4 systems", 3, 2)]
    assert [[p["ring"] for p in s.points] for s in plan.series] == [["best_of_systems", ""], ["best"], [""]]


def _front_row(systems: int, throughput: float, efficiency: float | str, **marks: object) -> dict[str, str]:
    return _row(systems, 2, 6, throughput, 40000, best_of_systems=marks.pop("best_of_systems", True),
                pareto=marks.pop("pareto", True), efficiency_per_system=efficiency, global_batch=48,
                micro_batches=2, **marks)


def test_the_systems_front_reads_each_counts_best_and_its_efficiency_from_the_csv() -> None:
    rows = [_front_row(1, 500000.0, 1.0, pareto=False),
            _front_row(1, 400000.0, "", best_of_systems=False, pareto=False),  # not a best: left out
            _front_row(2, 1000000.0, 1.0), _front_row(4, 1500000.0, 0.75, best=True),
            _front_row(8, 0.0, "", feasible=False, pareto=False)]  # nothing fits on 8: no point
    header = list(rows[0])
    plan = plan_systems_front(header, rows)
    assert plan is not None and plan.stem == "systems_front" and plan.scale == 1e6
    assert plan.x_label == "cluster throughput (million tokens/s)"
    assert plan.title == ("Global batch 48 on each number of systems N: its best (G, B, micro-batches)\n"
                          "m on hw, seq_len 32")
    assert [(p["systems"], p["efficiency_per_system"], p["pareto"], p["best"], p["row"]) for p in plan.points] == [
        (1, 1.0, False, False, 1), (2, 1.0, True, False, 3), (4, 0.75, True, True, 4)]
    assert [p.stem for p in plan_tune(header, rows)] == ["candidates", "systems_front"]
    # an older --search-systems CSV without the efficiency column: no front (nothing recomputed)
    old = [{k: v for k, v in r.items() if k != "efficiency_per_system"} for r in rows]
    assert plan_systems_front(list(old[0]), old) is None


@pytest.mark.parametrize(("column", "text", "says"), [
    ("tiles", "two", "row 1: expected a whole number for tiles, got 'two'"),
    ("batch_per_tile", "-1", "row 1: expected a whole number for batch_per_tile, got '-1'"),
    ("cluster_throughput_tokens_per_s", "fast", "row 1: expected a number for cluster_throughput_tokens_per_s"),
    ("cluster_throughput_tokens_per_s", "nan", "row 1: expected a number for cluster_throughput_tokens_per_s"),
    ("feasible", "yes", "row 1: expected True or False for feasible, got 'yes'"),
    ("best", "", "row 1: expected True or False for best, got ''"),
])
def test_unreadable_values_name_the_row_and_the_column(column: str, text: str, says: str) -> None:
    row = {**_row(1, 1, 1, 1.0, 1), column: text}
    with pytest.raises(ValueError, match="^" + says):
        plan_candidates([row])


def test_parse_and_columns() -> None:
    header, rows = parse_candidates("best,tiles\nTrue,1\nFalse,2\n")
    assert header == ["best", "tiles"] and rows == [{"best": "True", "tiles": "1"}, {"best": "False", "tiles": "2"}]
    with pytest.raises(ValueError, match="row 2 has 1 cells, the header 2"):
        parse_candidates("best,tiles\nTrue,1\nFalse\n")
    assert missing_columns(["best", "tiles"]) == [c for c in REQUIRED if c not in ("best", "tiles")]
    with pytest.raises(ValueError, match="expected at least one candidate"):
        plan_candidates([])
