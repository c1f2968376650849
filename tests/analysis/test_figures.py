"""Planning the sweep figures (wsesim.analysis.figures): in every view each row of the CSV is one point of
one series, every swept key but x has a role (colour, marker, facet, figure), titles say only what is
constant, and infeasible rows are points without a throughput (issue 12 item 12).

The rows are made up (no simulation): a sweep over five keys of every kind — a unit string, a mapping,
an int, G=1 against tuned, and a hardware preset — with one infeasible point.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from wsesim.analysis.figures import TILES, plan_figures, plan_phases, value

KEYS = {"hardware.io.bandwidth": ["1.2 Tbit/s", "2.4 Tbit/s", "600 Gbit/s"], "simulation.moe_mapping": ["regions", "in_place"],
        "training.seq_len": [1024, 4096], "hardware": ["wse2", "wse3"], TILES: [1, "tuned"]}
HEADER = ["point", "status", "reason", *(f"set:{k}" for k in KEYS), "model", "hardware", "seq_len", "tiles",
          "batch_per_tile", "throughput_tokens_per_s", "step_time_s", "step_cycles", "tokens_per_step",
          "phase_attention_cycles", "phase_router_cycles", "phase_experts_cycles", "phase_lm_head_cycles"]


def _rows() -> list[dict[str, str]]:
    rows = []
    for i, combo in enumerate(itertools.product(*KEYS.values())):
        settings = dict(zip(KEYS, combo, strict=True))
        ok = not (settings["hardware"] == "wse3" and settings["training.seq_len"] == 4096 and settings[TILES] == 1)
        row = {"point": str(i), "status": "ok" if ok else "infeasible", "reason": "" if ok else "SRAM",
               **{f"set:{k}": str(v) for k, v in settings.items()}, "model": "qwen3", "hardware": settings["hardware"],
               "seq_len": str(settings["training.seq_len"]), "tiles": "1" if settings[TILES] == 1 else "7",
               "batch_per_tile": "2", "throughput_tokens_per_s": str(1000.0 + i) if ok else "",
               "step_time_s": "0.5" if ok else "", "step_cycles": "1000.0" if ok else "", "tokens_per_step": "4096",
               "phase_attention_cycles": "600.0" if ok else "", "phase_router_cycles": "5.0" if ok else "",
               "phase_experts_cycles": "390.0" if ok else "", "phase_lm_head_cycles": "5.0" if ok else ""}
        rows.append(row)
    return rows


def test_every_row_is_one_point_of_one_series_in_every_view() -> None:
    rows = _rows()
    plans = plan_figures(HEADER, rows)
    views = Counter(p.view for p in plans)
    assert set(views) == {"hardware.io.bandwidth", "training.seq_len"}  # the numeric keys but G
    for view in views:
        drawn = Counter(pt["point"] for p in plans if p.view == view for panel in p.panels for s in panel.series
                        for pt in s.points)
        assert drawn == Counter(int(r["point"]) for r in rows), view  # every row once: none merged, none dropped
    for plan in plans:
        assert set(plan.roles) == set(KEYS), plan.stem  # every swept key has a role
        assert sorted(plan.roles.values()).count("x") == 1
        for panel in plan.panels:
            for s in panel.series:
                for pt in s.points:
                    row = pt["row"]
                    assert all(value(row, k) == v for k, v in s.fixed.items())  # a series holds its keys fixed
                    assert pt["x"] == value(row, plan.view)
                    assert plan.x_values[pt["x_index"]] == pt["x"]
                    if row["status"] == "ok":
                        assert pt["y"] == float(row["throughput_tokens_per_s"])
                    else:
                        assert pt["y"] is None  # marked, not dropped


def test_roles_and_what_the_title_says() -> None:
    plans = plan_figures(HEADER, _rows())
    bandwidth = [p for p in plans if p.view == "hardware.io.bandwidth"]
    roles = bandwidth[0].roles
    assert roles[TILES] == "colour"
    assert [roles[k] for k in ("simulation.moe_mapping", "training.seq_len", "hardware")] == ["marker", "facet", "figure"]
    assert [p.stem for p in bandwidth] == ["throughput_vs_io.bandwidth-hardware=wse2",
                                           "throughput_vs_io.bandwidth-hardware=wse3"]
    assert bandwidth[0].x_values == ["600 Gbit/s", "1.2 Tbit/s", "2.4 Tbit/s"]  # by value, not as written
    for plan in bandwidth:
        # the title names the model and the figure's hardware; not the swept seq_len, mapping or G
        assert plan.constant == {"model": "qwen3", "hardware": plan.stem.rsplit("=", 1)[1]}
        assert "seq_len" not in plan.title and "mapping" not in plan.title and "G" not in plan.title.split("\n")[1]
        assert [panel.facet for panel in plan.panels] == [{"training.seq_len": "1024"}, {"training.seq_len": "4096"}]
    wse3 = bandwidth[1].panels[1]  # seq_len 4096 on wse3: G=1 infeasible, so no speedup there
    assert wse3.speedup == []
    assert [round(s["value"], 6) for s in bandwidth[0].panels[0].speedup][:1] == [pytest.approx(1.0, rel=0.01)]


def test_a_key_without_numbers_is_the_x_axis_when_no_key_has_them() -> None:
    header = ["point", "status", "set:simulation.moe_mapping", "set:training.tiles", "throughput_tokens_per_s"]
    rows = [{"point": str(i), "status": "ok", "set:simulation.moe_mapping": m, "set:training.tiles": g,
             "throughput_tokens_per_s": "1.0"} for i, (m, g) in enumerate(itertools.product(["regions", "in_place"],
                                                                                             ["1", "tuned"]))]
    [plan] = plan_figures(header, rows)
    assert (plan.view, plan.x_values, plan.roles[TILES]) == ("simulation.moe_mapping", ["regions", "in_place"], "colour")
    only_g = [{**r, "set:simulation.moe_mapping": "regions"} for r in rows[:2]]
    assert plan_figures(header, only_g) == []  # G alone: the phase bars show it


def test_phases_group_thin_phases_and_keep_every_row() -> None:
    rows = _rows()
    plan = plan_phases(HEADER, rows)
    assert len(plan.bars) == len(rows)
    assert plan.other == ["router", "lm_head"]  # 0.5 % of every step each
    assert plan.phases == ["attention", "experts", "other"]
    ok = plan.bars[0]
    assert ok["us_per_token"]["other"] == pytest.approx(2 * 1e6 * 0.5 * 5 / 1000 / 4096)
    assert [b["us_per_token"] for b in plan.bars if b["status"] != "ok"] == [{}] * 6
    assert "seq_len" not in plan.title and ok["label"] == "io.bandwidth 1.2 Tbit/s, moe_mapping regions, seq_len 1024, hardware wse2, G=1, B=2"
