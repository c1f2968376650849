"""The frontier of a serving sweep over a load (wsesim/analysis/frontier.py): one curve per hardware through
its loads, a panel per system, per kW and per $ where some row has the figure, every row either drawn or
listed with its reason, and the side-by-side table ``wsesim compare DIR`` prints. Rows are written by hand
here; tests/cli/test_wafer_vs_gpus_cmd.py has the same from a real sweep."""

from __future__ import annotations

from typing import Any

import pytest

from wsesim.analysis.frontier import kw_per_system, load_key, plan_throughput_latency, side_by_side

HEADER = ["point", "status", "reason", "set:hardware", "set:inference.scheduler.batch", "model", "hardware", "systems",
          "system", "batch", "prompt_len", "output_len", "tokens_per_s_per_request", "tokens_per_s_per_system",
          "power_w", "tokens_per_s_per_kw", "usd_per_million_tokens"]


def _row(point: int, hardware: str, batch: int, per_user: float, per_system: float, *, systems: int = 1,
         system: str = "wafer", power_w: float = 12_000.0, usd: str = "", status: str = "ok",
         reason: str = "") -> dict[str, str]:
    ok = status == "ok"
    per_kw = per_system * systems / (power_w / 1e3)  # tokens/s over the run's mean kW
    return {"point": str(point), "status": status, "reason": reason, "set:hardware": hardware,
            "set:inference.scheduler.batch": str(batch), "model": "m", "hardware": hardware, "systems": str(systems),
            "system": system, "batch": str(batch), "prompt_len": "256", "output_len": "16",
            "tokens_per_s_per_request": repr(per_user) if ok else "",
            "tokens_per_s_per_system": repr(per_system) if ok else "", "power_w": repr(power_w) if ok else "",
            "tokens_per_s_per_kw": repr(per_kw) if ok else "", "usd_per_million_tokens": usd if ok else ""}


def _rows(**h200: Any) -> list[dict[str, str]]:
    """Two wafers' worth of wse3 at batch 1 and 8, an 8-GPU node of h200 at each (the node's b=8 row as
    ``h200`` says)."""
    eight = {"per_user": 500.0, "per_system": 3_000.0, "system": "8-GPU node", "power_w": 10_000.0, **h200}
    return [_row(0, "wse3", 1, 2_000.0, 100.0, systems=2, power_w=22_000.0),
            _row(1, "wse3", 8, 1_200.0, 450.0, systems=2, power_w=23_000.0),
            _row(2, "h200", 1, 900.0, 800.0, system="8-GPU node", power_w=8_000.0),
            _row(3, "h200", 8, **eight)]


def test_one_curve_per_hardware_through_its_batches_each_point_its_rows_figures() -> None:
    plan = plan_throughput_latency(HEADER, _rows())
    assert plan is not None and plan.load == "inference.scheduler.batch" and plan.series_keys == ["hardware"]
    assert [(s.label, s.system) for s in plan.series] == [("hardware wse3", "wafer"),
                                                         ("hardware h200", "8-GPU node")]
    wse3, h200 = plan.series
    assert [p["load"] for p in wse3.points] == ["1", "8"]
    assert [(p["tokens_per_s_per_request"], p["tokens_per_s_per_system"]) for p in h200.points] == [
        (900.0, 800.0), (500.0, 3_000.0)]
    # per kW: wse3 at b=1 serves 100 tokens/s on each of 2 wafers at 22 kW in all: 200 / 22
    assert wse3.points[0]["tokens_per_s_per_kw"] == pytest.approx(200 / 22, rel=1e-12)
    assert [p.metric for p in plan.panels] == ["tokens_per_s_per_system", "tokens_per_s_per_kw"]
    assert plan.not_drawn == ["usd_per_million_tokens"]  # no row was priced: no $ panel, and it says so
    assert plan.point_label("8") == "b=8" and plan.left_out == [] and plan.turns_back == []
    assert "each point one batch (requests at once)" in plan.title


def test_a_row_not_served_is_listed_with_its_reason_and_every_row_is_accounted_for() -> None:
    rows = _rows(status="infeasible", reason="the weights do not fit 1 node")
    plan = plan_throughput_latency(HEADER, rows)
    assert plan is not None
    assert plan.left_out == [{"point": 3, "load": "8", "series": "hardware h200", "status": "infeasible",
                              "reason": "the weights do not fit 1 node"}]
    assert sum(len(s.points) for s in plan.series) + len(plan.left_out) == len(rows)


def test_a_price_on_some_rows_draws_the_dollar_panel_and_names_the_points_without_one() -> None:
    rows = _rows(usd="1.25")
    plan = plan_throughput_latency(HEADER, rows)
    assert plan is not None and [p.metric for p in plan.panels][-1] == "usd_per_million_tokens"
    assert plan.panels[-1].missing == ["hardware wse3 b=1", "hardware wse3 b=8", "hardware h200 b=1"]
    assert plan.not_drawn == []


def test_no_load_varies_no_frontier() -> None:
    rows = [r for r in _rows() if r["set:inference.scheduler.batch"] == "1"]
    assert load_key(["hardware", "inference.scheduler.batch"], rows) is None
    assert plan_throughput_latency(HEADER, rows) is None


def test_kw_per_system_is_the_mean_power_over_the_systems() -> None:
    assert kw_per_system({"power_w": "22000.0", "systems": "2"}) == 11.0
    assert kw_per_system({"power_w": "", "systems": "2"}) is None  # no energy section: n/a, not 0


def test_side_by_side_groups_each_load_with_every_hardware_and_says_what_a_system_is() -> None:
    table = side_by_side(HEADER, _rows(status="infeasible", reason="too big"))
    assert table["load"] == "inference.scheduler.batch" and table["keys"] == ["hardware"]
    assert [(r["load"], r["hardware"], r["status"]) for r in table["rows"]] == [
        ("1", "wse3", "ok"), ("1", "h200", "ok"), ("8", "wse3", "ok"), ("8", "h200", "infeasible")]
    assert table["systems"] == [{"hardware": "wse3", "system": "wafer"},
                                {"hardware": "h200", "system": "8-GPU node"}]
    first, last = table["rows"][0], table["rows"][-1]
    assert first["kw_per_system"] == 11.0 and first["tokens_per_s_per_system"] == 100.0
    assert last["tokens_per_s_per_request"] is None and last["reason"] == "too big"
    assert table["constant"] == {"model": "m", "prompt_len": "256", "output_len": "16"}
