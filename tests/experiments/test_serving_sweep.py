"""Sweeps over a serving experiment (``base`` of ``kind: inference``; wsesim.experiments.serving_sweep):
each point validated by the inference loader and served, one row each with the mapping and the serving
figures; infeasible points as rows with their reason; categorical keys, presets by name; --resume's rows.

The serving case is the tiny one of tests/cli/test_infer_cmd.py (tiny-moe on tiny8 with 1 MiB per PE,
a 16-token prompt, 4 tokens out): some 50 ms a point.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from wsesim.config.errors import ConfigError
from wsesim.experiments import sweep as sweep_module
from wsesim.experiments.resume import kept_rows, override_keys, table_columns
from wsesim.experiments.sweep import run_sweep, sweep_from_data
from wsesim.experiments.table import SERVING_COLUMNS, SERVING_MEASURED, STATUS_INFEASIBLE, STATUS_OK, csv_text

SERVE: dict[str, Any] = {"kind": "inference", "hardware": "tiny8", "model": "tiny-moe",
                         "inference": {"load": {"prompt_len": 16, "output_len": 4}}}
ROOMY = {"hardware.pe.sram": "1 MiB"}  # tiny-moe's layers fit one 8x8 stage


def _sweep(grid: dict[str, list[Any]] | None = None, points: list[dict[str, Any]] | None = None,
           base: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    data: dict[str, Any] = {"kind": "sweep", "name": "serve", "base": base or SERVE}
    if grid is not None:
        data["grid"] = grid
    if points is not None:
        data["points"] = points
    return sweep_from_data(data, source="<test>", base_dir=None, **kwargs)


def _csv(sweep: Any, rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    text = csv_text(rows, override_keys(sweep), columns=table_columns(sweep))
    return list(csv.DictReader(io.StringIO(text)))


def test_a_batch_grid_writes_two_rows_with_the_mapping_and_tokens_per_s() -> None:
    sweep = _sweep({"inference.scheduler.batch": [1, 2]}, overrides=ROOMY)
    assert sweep.kind == "inference" and sweep.serving
    rows = _csv(sweep, run_sweep(sweep))
    assert [(r["point"], r["set:inference.scheduler.batch"], r["batch"], r["status"]) for r in rows] == [
        ("0", "1", "1", STATUS_OK), ("1", "2", "2", STATUS_OK)]
    for r in rows:
        assert all(float(r[c]) > 0 for c in ("tokens_per_s", "tokens_per_s_per_request", "ttft_s", "tpot_s"))
        assert (r["grid"], r["stages"], r["systems"], r["layers_per_stage"]) == ("8x8", "1", "1", "2")
        assert (r["model"], r["hardware"]) == ("tiny-moe", "tiny8")
    # two requests share the one stage: each waits its turn
    assert float(rows[1]["tokens_per_s_per_request"]) < float(rows[0]["tokens_per_s_per_request"])
    header = list(rows[0])
    assert header[:5] == ["point", "point_key", "status", "reason", "set:inference.scheduler.batch"]
    assert header[5:] == list(SERVING_COLUMNS)  # the batch is a result column already: no second one
    assert "wall_s" not in header and "throughput_tokens_per_s" not in header


def test_a_point_that_does_not_fit_is_a_row_with_its_reason_and_nothing_measured() -> None:
    sweep = _sweep(points=[ROOMY, {"inference.grid": "1x1"}])
    ok, infeasible = _csv(sweep, run_sweep(sweep))
    assert ok["status"] == STATUS_OK
    assert infeasible["status"] == STATUS_INFEASIBLE and infeasible["feasible"] == "False"
    assert "1x1 grid" in infeasible["reason"] and "usable" in infeasible["reason"]
    assert all(infeasible[c] == "" for c in SERVING_MEASURED)  # empty, not 0
    assert infeasible["grid"] == "1x1" and infeasible["pe_sram_bytes"] == "49152.0"  # the base's, as a number


def test_a_categorical_key_and_presets_by_name_are_swept() -> None:
    sweep = _sweep({"inference.kv_layout": ["shift", "concat"], "hardware": ["wse2", "wse3"]})
    rows = _csv(sweep, run_sweep(sweep))
    assert [(r["set:inference.kv_layout"], r["kv_layout"], r["hardware"], r["grid"]) for r in rows] == [
        # the tiny model's shortest decode step (grid: auto by tpot) is on a small grid of either wafer (on
        # WSE-3 a smaller one than on WSE-2 since the experts' dispatch is timed by the fabric model)
        ("shift", "shift", "wse2", "32x18"), ("shift", "shift", "wse3", "22x12"),
        ("concat", "concat", "wse2", "32x18"), ("concat", "concat", "wse3", "22x12")]
    assert all(r["status"] == STATUS_OK for r in rows)
    # appended to one row of PEs, the cache runs out sooner than spread over the grid
    assert int(rows[2]["max_output_len"]) < int(rows[0]["max_output_len"])


def test_every_point_is_validated_by_the_inference_loader_before_anything_runs() -> None:
    with pytest.raises(ConfigError) as e:
        _sweep({"inference.kv_layout": ["shift", "paged"]})
    assert str(e.value).startswith("<test>: grid: point 1 {inference.kv_layout=paged}: inference.kv_layout: "
                                   "expected 'shift' or 'concat'")
    with pytest.raises(ConfigError, match=r"point 0 \{training.tiles=2\}: training: unknown key"):
        _sweep({"training.tiles": [2]})  # a training key is no serving key
    with pytest.raises(ConfigError, match="expected a base of kind: experiment or kind: inference"):
        _sweep({"inference.scheduler.batch": [1]}, base={**SERVE, "kind": "hardware"})
    with pytest.raises(ConfigError, match="set here and swept by the sweep"):
        _sweep({"inference.scheduler.batch": [1, 2]}, overrides={"inference.scheduler.batch": 4})


def test_resume_keeps_the_finished_rows_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = _sweep({"inference.scheduler.batch": [1, 2, 3]}, overrides=ROOMY)
    first = csv_text(run_sweep(sweep), override_keys(sweep), columns=table_columns(sweep))
    done = {r["point_key"]: r for r in list(csv.DictReader(io.StringIO(first)))[:2]}
    assert [r["point"] for r in kept_rows(sweep, done)] == [0, 1]
    ran: list[int] = []
    real = sweep_module.run_point

    def watched(raw: dict[str, Any], source: str, point: Any) -> dict[str, Any]:
        ran.append(point.index)
        return real(raw, source, point)

    monkeypatch.setattr(sweep_module, "run_point", watched)
    again = csv_text(run_sweep(sweep, done=done), override_keys(sweep), columns=table_columns(sweep))
    assert ran == [2]
    assert again == first  # the kept rows' text and the new row's: the same bytes


def test_a_point_naming_a_model_file_changes_when_the_file_does(tmp_path: Any) -> None:
    """A point's identity is what it resolves to: editing a file it names re-runs it on --resume."""
    import yaml

    from wsesim.config.loader import shipped_file

    model = tmp_path / "m.yaml"
    model.write_text(shipped_file("tiny-moe.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    data = {"kind": "sweep", "base": SERVE, "grid": {"model": ["m.yaml"]}}
    before = sweep_from_data(data, source="s", base_dir=tmp_path).points[0].key
    text = yaml.safe_load(model.read_text(encoding="utf-8"))
    model.write_text(yaml.safe_dump({**text, "description": "edited"}), encoding="utf-8")
    assert sweep_from_data(data, source="s", base_dir=tmp_path).points[0].key != before
