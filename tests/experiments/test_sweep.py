"""Sweeps (wsesim.experiments.sweep): expansion, per-point validation, rows for infeasible and failing points,
resume, determinism, and local processes and Dask agreeing row for row with one process.

Points are tiny (tiny8 at PE granularity, 2-layer 4-expert model, seq_len 16): milliseconds each, so
the parallel tests mostly pay for starting workers. The CLI side (streaming to DIR/results.csv,
interrupt and --resume) is in test_cli_sweep.py.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from wsesim import cli
from wsesim.analysis.results import WALL_CLOCK_FIELDS
from wsesim.config.errors import ConfigError
from wsesim.config.loader import load_experiment_data
from wsesim.experiments import points as points_module
from wsesim.experiments import resume, runner, table, workers
from wsesim.experiments import sweep as sweep_module
from wsesim.experiments.resume import override_keys
from wsesim.experiments.sweep import Point, expand, load_sweep, run_sweep
from wsesim.experiments.table import STATUS_ERROR, STATUS_INFEASIBLE, STATUS_OK, csv_text, read_results
from wsesim.experiments.tune import tune

BASE: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 1},
                        "simulation": {"granularity": "pe"}}


def sweep_yaml(*, grid: dict[str, list[Any]] | None = None, points: list[dict[str, Any]] | None = None,
               base: Any = None, name: str = "tiny") -> str:
    data: dict[str, Any] = {"kind": "sweep", "name": name, "base": BASE if base is None else base}
    if grid is not None:
        data["grid"] = grid
    if points is not None:
        data["points"] = points
    return yaml.safe_dump(data, sort_keys=False)


@pytest.fixture
def write_sweep(write_yaml: Callable[[str, str], Path]) -> Callable[..., Path]:
    def write(name: str = "sweep.yaml", **kwargs: Any) -> Path:
        return write_yaml(name, sweep_yaml(**kwargs))

    return write


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def _without_wall_clock(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Rows as the CSV would hold them, without the host's wall-clock fields."""
    keys = list(dict.fromkeys(k.removeprefix("set:") for r in rows for k in r if k.startswith("set:")))
    return [{k: v for k, v in r.items() if k not in WALL_CLOCK_FIELDS} for r in _csv_rows(csv_text(rows, keys))]


# ----------------------------------------------------------------------------------------- expansion


def test_expand_is_each_point_times_the_grid_product_in_key_order() -> None:
    grid = {"a": [1, 2], "b": ["x", "y"]}
    assert expand(grid, []) == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    assert expand({}, [{"p": 0}, {"p": 1}]) == [{"p": 0}, {"p": 1}]
    assert expand(grid, [{"p": 0}, {"p": 1}]) == [
        {"p": p, "a": a, "b": b} for p in (0, 1) for a in (1, 2) for b in ("x", "y")]
    assert [list(d) for d in expand(grid, [{"p": 0}])] == [["p", "a", "b"]] * 4  # file order kept


def test_load_sweep_numbers_every_point_and_accepts_tuned(write_sweep: Callable[..., Path]) -> None:
    path = write_sweep(grid={"training.tiles": [1, "tuned"]}, points=[{"model.top_k": 1}, {"model.top_k": 2}])
    sweep = load_sweep(path)
    assert [p.index for p in sweep.points] == [0, 1, 2, 3]
    assert [p.overrides for p in sweep.points] == [
        {"model.top_k": k, "training.tiles": g} for k in (1, 2) for g in (1, "tuned")]
    assert [p.tuned for p in sweep.points] == [False, True, False, True]
    assert sweep.points[1].run_overrides() == {"model.top_k": 1, "training.tiles": 1}
    assert len({p.key for p in sweep.points}) == 4
    assert override_keys(sweep) == ["model.top_k", "training.tiles"]


def test_point_key_is_its_overrides_not_its_position_or_order() -> None:
    """--resume matches rows by this key, so moving a point in the file must not change it."""
    assert Point(0, {"a": 1, "b": "tuned"}).key == Point(7, {"b": "tuned", "a": 1}).key
    assert Point(0, {"a": 1}).key != Point(0, {"a": 2}).key


def test_neither_grid_nor_points_is_an_error(write_sweep: Callable[..., Path]) -> None:
    path = write_sweep()
    with pytest.raises(ConfigError, match="expected a grid or points"):
        load_sweep(path)


@pytest.mark.parametrize(("grid", "points", "point", "key"), [
    (None, [{"model.top_k": 1}, {"model.top_k": 9}], 1, "model.top_k"),  # more than the 4 experts
    (None, [{"model.top_k": 1}, {"model.bogus": 1}], 1, "model.bogus"),  # unknown key
    ({"training.tiles": [1, 2, "tunned"]}, None, 2, "training.tiles"),  # a typo of "tuned"
    ({"training.seq_len": [16, "tuned"]}, None, 1, "training.seq_len"),  # only tiles can be tuned
    ({"training.tiles": [1, "tuned"]}, [{"model.top_k": 2}, {"training.seq_len": 0}], 2, "training.seq_len"),
], ids=["value", "unknown-key", "tunned", "tuned-elsewhere", "grid-and-points"])
def test_every_point_is_validated_before_anything_runs(
        write_sweep: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
        grid: dict[str, list[Any]] | None, points: list[dict[str, Any]] | None, point: int, key: str) -> None:
    monkeypatch.setattr(points_module, "run_experiment", _never_called)  # as a point runs it
    path = write_sweep(grid=grid, points=points)
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert f"point {point} " in message
    assert f"{key}: " in message


def _never_called(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("nothing may run before every point is valid")


def test_base_path_is_relative_to_the_sweep_file(tmp_path: Path, tiny8_text: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """sweeps/s.yaml -> base ../exps/exp.yaml -> hardware hw/mine.yaml (relative to the experiment),
    loaded from an unrelated working directory."""
    (tmp_path / "exps" / "hw").mkdir(parents=True)
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "exps" / "hw" / "mine.yaml").write_text(tiny8_text.replace("name: tiny8", "name: mine"),
                                                       encoding="utf-8")
    exp = {**BASE, "hardware": "hw/mine.yaml"}
    (tmp_path / "exps" / "exp.yaml").write_text(yaml.safe_dump(exp, sort_keys=False), encoding="utf-8")
    path = tmp_path / "sweeps" / "s.yaml"
    path.write_text(sweep_yaml(base="../exps/exp.yaml", points=[{"model.top_k": 1}]), encoding="utf-8")
    monkeypatch.chdir(tmp_path / "elsewhere")
    sweep = load_sweep(Path("..") / "sweeps" / "s.yaml")
    assert sweep.base.spec.hardware.name == "mine"
    [row] = run_sweep(sweep)
    assert (row["status"], row["hardware"], row["top_k"]) == (STATUS_OK, "mine", 1)


def test_missing_base_file_names_it(write_sweep: Callable[..., Path]) -> None:
    path = write_sweep(base="nope.yaml", points=[{"model.top_k": 1}])
    with pytest.raises(ConfigError, match="nope.yaml"):
        load_sweep(path)


def test_wsesim_validate_accepts_a_sweep_file(write_sweep: Callable[..., Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = write_sweep(grid={"training.tiles": [1, "tuned"]})
    assert cli.main(["validate", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok (sweep tiny)\n"


# ------------------------------------------------------------------------------------------ running


def test_rows_carry_the_overrides_and_the_result(write_sweep: Callable[..., Path]) -> None:
    sweep = load_sweep(write_sweep(grid={"training.tiles": [1, 2, "tuned"]}))
    rows = run_sweep(sweep)
    assert [r["point"] for r in rows] == [0, 1, 2]
    assert [r["status"] for r in rows] == [STATUS_OK] * 3
    assert [r["set:training.tiles"] for r in rows] == [1, 2, "tuned"]
    assert [r["tuned"] for r in rows] == [False, False, True]
    assert [r["tiles"] for r in rows[:2]] == [1, 2]
    loaded = load_experiment_data(BASE, overrides={"training.tiles": 1})
    best = tune(loaded).best
    assert (rows[2]["tiles"], rows[2]["batch_per_tile"]) == (best.tiles, best.batch_per_tile)
    for r in rows:
        assert r["tokens_per_step"] == r["global_batch"] * r["seq_len"]


def test_csv_cells_are_plain_numbers(write_sweep: Callable[..., Path]) -> None:
    """Every numeric cell parses as a number (NumPy 2 floats used to be written as "np.float64(…)")."""
    sweep = load_sweep(write_sweep(points=[{"model.top_k": 1}]))
    [row] = _csv_rows(csv_text(run_sweep(sweep), override_keys(sweep)))
    for column in ("step_cycles", "step_time_s", "throughput_tokens_per_s", "mfu", "io_in_utilisation",
                   "expert_load_imbalance", "phase_attention_cycles", "phase_experts_cycles"):
        assert float(row[column]) > 0, column


def test_infeasible_and_failing_points_are_rows_and_the_sweep_goes_on(
        write_sweep: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    real = runner.run_experiment

    def failing(spec: Any) -> Any:
        if spec.model.top_k == 1:
            raise RuntimeError("boom")
        return real(spec)

    monkeypatch.setattr(points_module, "run_experiment", failing)  # as a point runs it
    sweep = load_sweep(write_sweep(points=[{"model.top_k": 1}, {"training.batch_per_tile": 5000},
                                           {"model.top_k": 2}]))
    rows = run_sweep(sweep, workers=1)
    assert [r["status"] for r in rows] == [STATUS_ERROR, STATUS_INFEASIBLE, STATUS_OK]
    assert rows[0]["reason"].startswith("RuntimeError: boom (test_sweep.py:")
    assert "SRAM" in rows[1]["reason"] and rows[1]["feasible"] is False
    assert rows[2]["reason"] == ""
    written = _csv_rows(csv_text(rows, override_keys(sweep)))
    assert [(r["point"], r["status"]) for r in written] == [("0", "error"), ("1", "infeasible"), ("2", "ok")]
    assert written[0]["reason"] == rows[0]["reason"] and written[0]["step_cycles"] == ""


def test_on_row_sees_every_row_as_it_finishes(write_sweep: Callable[..., Path]) -> None:
    sweep = load_sweep(write_sweep(grid={"model.top_k": [1, 2], "training.tiles": [1, 2]}))
    seen: list[tuple[int, list[int]]] = []

    def on_row(row: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        assert row in rows
        seen.append((row["point"], sorted(r["point"] for r in rows)))
        written = _csv_rows(csv_text(rows, override_keys(sweep)))
        assert [int(r["point"]) for r in written] == sorted(r["point"] for r in rows)  # sorted by point

    rows = run_sweep(sweep, workers=1, on_row=on_row)
    assert seen == [(0, [0]), (1, [0, 1]), (2, [0, 1, 2]), (3, [0, 1, 2, 3])]
    assert [r["point"] for r in rows] == [0, 1, 2, 3]


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the index of every point run (in this process: workers=1)."""
    ran: list[int] = []
    real = sweep_module.run_point

    def counting(raw: dict[str, Any], source: str, point: Point) -> dict[str, Any]:
        ran.append(point.index)
        return real(raw, source, point)

    monkeypatch.setattr(sweep_module, "run_point", counting)
    return ran


def test_resume_runs_only_the_missing_points(write_sweep: Callable[..., Path], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    sweep = load_sweep(write_sweep(grid={"model.top_k": [1, 2], "training.tiles": [1, "tuned"]}))
    keys = override_keys(sweep)
    first = csv_text(run_sweep(sweep), keys)
    saved = tmp_path / "results.csv"
    saved.write_text(first, encoding="utf-8")
    done = {r["point_key"]: r for r in read_results(saved) if r["point"] != "2"}
    ran = _count_runs(monkeypatch)
    rows = run_sweep(sweep, done=done, workers=1)
    assert ran == [2]
    assert _without_wall_clock(rows) == _without_wall_clock(_csv_rows(first))
    ran.clear()
    assert len(run_sweep(sweep, done={r["point_key"]: r for r in read_results(saved)}, workers=1)) == 4
    assert ran == []


def test_resume_renumbers_points_that_moved_in_the_file(write_sweep: Callable[..., Path],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    old = load_sweep(write_sweep(points=[{"model.top_k": 1}, {"model.top_k": 2}]))
    done = {r["point_key"]: r for r in _csv_rows(csv_text(run_sweep(old), override_keys(old)))}
    new = load_sweep(write_sweep(points=[{"training.tiles": 2}, {"model.top_k": 1}, {"model.top_k": 2}]))
    ran = _count_runs(monkeypatch)
    rows = run_sweep(new, done=done, workers=1)
    assert ran == [0]
    assert [(int(r["point"]), str(r.get("set:model.top_k", ""))) for r in rows] == [(0, ""), (1, "1"), (2, "2")]


def test_same_sweep_twice_gives_the_same_csv_but_wall_clock(write_sweep: Callable[..., Path]) -> None:
    sweep = load_sweep(write_sweep(grid={"training.routing": ["uniform", "zipf:1.5"], "training.tiles": [2, "tuned"]},
                                   points=[{"simulation.placement": "random", "training.seed": 3}]))
    a, b = run_sweep(sweep), run_sweep(sweep)
    assert len(a) == 4
    assert _without_wall_clock(a) == _without_wall_clock(b)


def test_two_worker_processes_give_the_same_rows_as_one(write_sweep: Callable[..., Path]) -> None:
    sweep = load_sweep(write_sweep(grid={"model.top_k": [1, 2], "training.tiles": [1, "tuned"]}))
    one = run_sweep(sweep, workers=1)
    two = run_sweep(sweep, workers=2)
    assert [r["point"] for r in two] == [0, 1, 2, 3]
    assert _without_wall_clock(two) == _without_wall_clock(one)


# ----------------------------------------------------------------------------------------------- Dask


def test_dask_cluster_gives_the_same_rows_as_local(write_sweep: Callable[..., Path]) -> None:
    distributed = pytest.importorskip("dask.distributed")
    sweep = load_sweep(write_sweep(grid={"training.tiles": [1, 2, "tuned"]}))
    local = run_sweep(sweep, workers=1)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        by_address = run_sweep(sweep, scheduler=cluster.scheduler_address)
        with distributed.Client(cluster.scheduler_address) as client:
            by_client = run_sweep(sweep, scheduler=client, on_row=lambda row, rows: None)
            assert client.status == "running"  # a client passed in is left open for its owner
    assert _without_wall_clock(by_address) == _without_wall_clock(local)
    assert _without_wall_clock(by_client) == _without_wall_clock(local)


def test_dask_connect_waits_at_most_8_seconds_or_less_if_dask_says_so() -> None:
    """Dask's default connect timeout is 30 s; --scheduler gives up sooner (issue 12: within 15 s)."""
    dask = pytest.importorskip("dask")
    pytest.importorskip("dask.distributed")
    assert dask.config.get("distributed.comm.timeouts.connect") in ("30s", 30)
    assert workers.dask_connect_timeout() == 8.0
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        assert workers.dask_connect_timeout() == 1.0


# -------------------------------------------------------------------------- issue 12: safe by default


def test_a_key_in_both_grid_and_points_is_an_error(write_sweep: Callable[..., Path]) -> None:
    """It used to be a silent override: the grid's value replaced the point's."""
    path = write_sweep(grid={"model.top_k": [1, 2]}, points=[{"training.tiles": 2}, {"model.top_k": 3}])
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert str(info.value) == (f"{path}: points[1].model.top_k: model.top_k is set both here and in grid (the grid's "
                               "value would replace this one): set it in one place")


@pytest.mark.parametrize("name", ["../..", "../escape", "/tmp/elsewhere", "a/b", "a\\b", "..", ".", "c:x", "a\nb"])
def test_a_sweep_name_is_one_folder_name(write_yaml: Callable[[str, str], Path], name: str) -> None:
    """``out/<name>`` must stay inside out/: "../.." or an absolute path used to write wherever it said."""
    path = write_yaml("sweep.yaml", sweep_yaml(name=name, points=[{"model.top_k": 1}]))
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    message = str(info.value)
    assert message.startswith(f"{path}: name: expected a name that is one folder name")
    assert "\n" not in message


def test_a_sweep_named_by_its_file_needs_a_usable_stem(write_yaml: Callable[[str, str], Path]) -> None:
    ok = load_sweep(write_yaml("my-sweep.yaml", sweep_yaml(name="", points=[{"model.top_k": 1}])))
    assert sweep_module.sweep_name(ok, "my-sweep.yaml") == "my-sweep"
    bad = write_yaml("..yaml", sweep_yaml(name="", points=[{"model.top_k": 1}]))  # its stem is "."
    with pytest.raises(ConfigError, match="one folder name"):
        sweep_module.sweep_name(load_sweep(bad), bad)


def test_read_results_ignores_a_cut_short_last_line_and_malformed_rows(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text("point,point_key,status\n0,aaaa,ok\n1,bbbb\n2,cccc,ok\n3,dd", encoding="utf-8")
    assert read_results(path) == [{"point": "0", "point_key": "aaaa", "status": "ok"},
                                  {"point": "2", "point_key": "cccc", "status": "ok"}]
    path.write_text("point,point_key,sta", encoding="utf-8")  # even the header cut short
    assert read_results(path) == []


def test_resumable_rows_keeps_every_row_or_refuses(write_sweep: Callable[..., Path]) -> None:
    sweep = load_sweep(write_sweep(points=[{"model.top_k": 1}, {"model.top_k": 2}]))
    rows = [{"point": "1", "point_key": sweep.points[1].key, "status": "ok"}]
    assert resume.resumable_rows(sweep, rows, "r.csv") == {sweep.points[1].key: rows[0]}
    with pytest.raises(ConfigError, match=r"^r\.csv: --resume would drop 1 finished row of points no longer"):
        resume.resumable_rows(sweep, [*rows, {"point": "7", "point_key": "0123456789abcdef"}], "r.csv")


def test_csv_lines_make_the_same_file_as_csv_text(write_sweep: Callable[..., Path]) -> None:
    """Appending ``csv_line`` per row gives the bytes ``csv_text`` writes (rows in point order)."""
    sweep = load_sweep(write_sweep(points=[{"model.top_k": 1}, {"training.batch_per_tile": 5000}]))
    rows = run_sweep(sweep)
    keys = override_keys(sweep)
    columns = table.result_columns(keys)
    assert "".join([table.csv_line(columns, columns), *(table.csv_line(r, columns) for r in rows)]) \
        == csv_text(rows, keys)
    assert table.result_columns(keys, ["point", "old_column"]) == [*columns, "old_column"]


# ------------------------------------------------------------------------ issue 12 item 13: the columns


def test_an_infeasible_row_leaves_what_was_never_measured_empty(write_sweep: Callable[..., Path]) -> None:
    """Throughput, MFU, the step and its phases were 0 on an infeasible row: a plot or a mean read them as
    measured. Empty now; what is known without running (tokens, SRAM needed) stays."""
    sweep = load_sweep(write_sweep(points=[{"training.batch_per_tile": 5000}, {"model.top_k": 2}]))
    infeasible, ok = _csv_rows(csv_text(run_sweep(sweep), override_keys(sweep)))
    assert infeasible["status"] == STATUS_INFEASIBLE
    for column in ("throughput_tokens_per_s", "mfu", "step_cycles", "step_time_s", "phase_attention_cycles",
                   "io_bytes_in", "events"):
        assert infeasible[column] == "", column
        assert float(ok[column]) > 0, column
    assert int(infeasible["tokens_per_step"]) == 5000 * 16
    assert int(infeasible["peak_sram_bytes_per_pe"]) > int(infeasible["sram_capacity_bytes_per_pe"])
    assert set(table.MEASURED_COLUMNS) >= {"throughput_tokens_per_s", "mfu", "step_cycles"}


def test_one_reason_column_and_no_wall_clock(write_sweep: Callable[..., Path]) -> None:
    sweep = load_sweep(write_sweep(points=[{"training.batch_per_tile": 5000}]))
    header = csv_text(run_sweep(sweep), override_keys(sweep)).splitlines()[0].split(",")
    assert header.count("reason") == 1
    assert "infeasible_reason" not in header and not set(WALL_CLOCK_FIELDS) & set(header)
    assert len(header) == len(set(header))


def test_each_swept_key_has_a_numeric_unit_suffixed_column(write_sweep: Callable[..., Path]) -> None:
    """``hardware.io.bandwidth: "4 GB/s"`` is the number 3.2e10 in ``io_bandwidth_bits_per_s``, so a script
    or a plot can sort and scale it; a key already a result column (top_k) gets no second column."""
    sweep = load_sweep(write_sweep(grid={"hardware.io.bandwidth": ["4 GB/s", "8 GB/s"],
                                         "simulation.moe_mapping": ["regions", "in_place"],
                                         "hardware.pe.sram": ["48 KiB"], "model.top_k": [1]}))
    text = csv_text(run_sweep(sweep), override_keys(sweep))
    rows = _csv_rows(text)
    assert [float(r["io_bandwidth_bits_per_s"]) for r in rows] == [3.2e10, 3.2e10, 6.4e10, 6.4e10]
    assert [r["moe_mapping"] for r in rows] == ["regions", "in_place"] * 2
    assert {r["pe_sram_bytes"] for r in rows} == {"49152.0"}
    header = text.splitlines()[0].split(",")
    assert header.count("top_k") == 1 and len(header) == len(set(header))
    assert header.index("set:model.top_k") < header.index("io_bandwidth_bits_per_s") < header.index("tuned")


def test_speedup_where_the_sweep_pairs_g1_with_tuned(write_sweep: Callable[..., Path]) -> None:
    sweep = load_sweep(write_sweep(grid={"model.top_k": [1, 2], "training.tiles": [1, "tuned"]}))
    rows = _csv_rows(csv_text(run_sweep(sweep), override_keys(sweep)))
    for g1, tuned in (rows[0:2], rows[2:4]):
        assert g1["speedup"] == ""
        expected = float(tuned["throughput_tokens_per_s"]) / float(g1["throughput_tokens_per_s"])
        assert float(tuned["speedup"]) == pytest.approx(expected, rel=1e-12)
    unpaired = load_sweep(write_sweep(grid={"training.tiles": [1, 2]}))
    assert "speedup" not in csv_text(run_sweep(unpaired), override_keys(unpaired)).splitlines()[0]


def test_local_and_dask_write_the_same_bytes(write_sweep: Callable[..., Path]) -> None:
    """The whole file, wall clock included: there is none in it any more."""
    distributed = pytest.importorskip("dask.distributed")
    sweep = load_sweep(write_sweep(grid={"model.top_k": [1, 2], "training.tiles": [1, "tuned"]}))
    keys = override_keys(sweep)
    local = csv_text(run_sweep(sweep, workers=2), keys)
    assert csv_text(run_sweep(sweep, workers=1), keys) == local
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        assert csv_text(run_sweep(sweep, scheduler=cluster.scheduler_address), keys) == local
