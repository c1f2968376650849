"""Honest cluster figures (issue 20): the weak-scaling series is one series (not one per resolved global
batch), no figure joins unrelated experiments, figures and figures.json show the cluster's throughput
labelled as such, titles never claim a value for a swept key, and ``scaling_efficiency`` is the cluster
over N × one system alone (the tree's share in ``tree_efficiency``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wsesim import cli
from wsesim.analysis.figures import plan_figures
from wsesim.analysis.scaling import accumulation_points, cluster_series, constant_settings
from wsesim.config.loader import load_experiment, shipped_file
from wsesim.experiments.resume import override_keys
from wsesim.experiments.runner import run_experiment
from wsesim.experiments.sweep import load_sweep, run_sweep
from wsesim.experiments.table import csv_text, read_results_table
from wsesim.output.files import atomic_write_text
from wsesim.output.plotting import plot_results

CLUSTER = shipped_file("gpt3-xl/cluster-scaling.yaml")
GPT3_XL = shipped_file("gpt3-xl/experiment.yaml")


@pytest.fixture(scope="module")
def cluster_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sweep = load_sweep(CLUSTER)
    path = tmp_path_factory.mktemp("cluster") / "results.csv"
    atomic_write_text(path, csv_text(run_sweep(sweep), override_keys(sweep)))
    return path


def test_the_shipped_cluster_sweep_has_one_series_per_experiment(cluster_csv: Path) -> None:
    header, rows = read_results_table(cluster_csv)
    plans = plan_figures(header, rows)
    assert [p.stem for p in plans] == ["throughput_vs_systems"]  # no throughput_vs_global_batch joining them
    [plan] = plans
    series = [s for panel in plan.panels for s in panel.series]
    assert len(series) == 2 and all(len(s.points) == 7 for s in series)
    assert plan.metric == "cluster_throughput_tokens_per_s" and plan.y_label.startswith("cluster throughput")
    assert plan.title.startswith("Cluster throughput")
    for s in series:
        assert [p["y"] for p in s.points] == [float(p["row"]["cluster_throughput_tokens_per_s"]) for p in s.points]
        assert len({p["row"].get("set:training.global_batch") for p in s.points}) == 1  # one experiment


def test_figures_json_lists_the_cluster_series_labelled(cluster_csv: Path, tmp_path: Path) -> None:
    plot_results(cluster_csv, tmp_path)
    listing = json.loads((tmp_path / "figures.json").read_text(encoding="utf-8"))
    series = listing["cluster_scaling"]["series"]
    assert len(series) == 2
    for s in series:
        for p in s["points"]:
            per = p["throughput_per_system_tokens_per_s"]
            assert p["cluster_throughput_tokens_per_s"] == pytest.approx(p["systems"] * per, rel=1e-12)


def test_scaling_efficiency_is_against_n_times_one_system() -> None:
    overrides = {"cluster.interconnect": "swarmx", "training.global_batch": 256}
    many = run_experiment(load_experiment(GPT3_XL, overrides={**overrides, "cluster.systems": 64}).spec)
    one = run_experiment(load_experiment(GPT3_XL, overrides={**overrides, "cluster.systems": 1}).spec)
    expected = many.cluster_throughput_tokens_per_s / (64 * one.throughput_tokens_per_s)
    assert many.scaling_efficiency == pytest.approx(expected, rel=1e-12)
    assert 0.6 < many.scaling_efficiency < 0.8  # 4 sequences a system no longer amortise the weights
    assert many.tree_efficiency > 0.999  # what the tree alone costs: a few microseconds


def test_a_cluster_run_says_which_figures_are_whose(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", str(GPT3_XL), "--set", "cluster.systems=4", "--set", "cluster.interconnect=swarmx"]) == 0
    labels = [line.split("  ")[0] for line in capsys.readouterr().out.splitlines()]
    for label in ("cluster throughput", "cluster tokens per step", "scaling efficiency", "throughput per system",
                  "tokens per step per system", "MFU per system"):
        assert label in labels
    assert "throughput" not in labels and "tokens per step" not in labels  # nothing unlabelled


def test_titles_never_claim_a_swept_value(tmp_path: Path) -> None:
    sweep = load_sweep(CLUSTER, grid={"cluster.systems": [1, 2], "training.seq_len": [1024, 2048]})
    rows = run_sweep(sweep)
    path = tmp_path / "results.csv"
    atomic_write_text(path, csv_text(rows, override_keys(sweep)))
    header, text_rows = read_results_table(path)
    assert "seq_len" not in constant_settings(text_rows)
    assert constant_settings(text_rows) == "gpt3-xl on wse2"
    for label in cluster_series(text_rows):
        assert "seq len" in label  # each series one sequence length, named
    assert all("seq_len" not in p.title.split("\n")[1] for p in plan_figures(header, text_rows))  # what is constant


def test_the_accumulation_figure_never_joins_two_experiments() -> None:
    rows = []
    for model, scale in (("a", 1.0), ("b", 2.0)):
        for g in (1, 2, 3):
            rows.append({"status": "ok", "set:model": model, "set:training.tiles": str(g), "model": model,
                         "hardware": "wse2", "seq_len": "1024", "systems": "1", "global_batch": "12",
                         "tiles": str(g), "micro_batches": str(12 // g), "batch_per_tile": "1",
                         "throughput_tokens_per_s": str(scale * g), "io_bytes_in": "1"})
    points = accumulation_points(rows)
    assert len(points) == 3 and len({p["model"] for p in points}) == 1
