"""What the accumulation and cluster figures show, from a sweep's result rows (pure: CSV rows in, plain
numbers out; ``wsesim.output.plotting`` draws them). docs/model.md §2.4 and §9 define the quantities.

* ``accumulation_points``: the runs of a sweep at one fixed global batch that vary the tiles G, each with
  the micro-batches N and the B it ran, its throughput and the weight bytes it streamed in;
* ``cluster_series``: the runs of a sweep over ``cluster.systems``, one series per combination of its
  other settings, each point with the cluster's throughput, each system's share of the batch, and two
  efficiencies: against N times the series' one-system run (what scaling out the same global batch, or the
  same per-system batch, gives) and against the same system alone on the same share (what the tree costs).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def _ok(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") == "ok"]


_ONE_EXPERIMENT_APART = ("set:training.tiles", "set:training.batch_per_tile", "set:training.micro_batches")


def _experiment(row: dict[str, Any]) -> tuple[str, ...]:
    """What makes a row's experiment, apart from how its batch is split: every other swept setting, and
    the model, hardware and sequence length it ran (a sweep over any of them is several experiments)."""
    return (*(f"{k}={row[k]}" for k in sorted(row)
              if k.startswith("set:") and k not in _ONE_EXPERIMENT_APART),
            str(row.get("model")), str(row.get("hardware")), str(row.get("seq_len")),
            str(row.get("systems")))


def constant_settings(rows: list[dict[str, Any]]) -> str:
    """``"gpt3-xl on wse2, seq_len 2048"``, saying only what one value holds for every row that ran (a
    swept model, hardware or sequence length is left out, not taken from the first row)."""
    ok = _ok(rows)
    one = {c: next(iter(v)) for c in ("model", "hardware", "seq_len")
           if len(v := {str(r.get(c)) for r in ok}) == 1}
    head = " on ".join(one[c] for c in ("model", "hardware") if c in one)
    return ", ".join(filter(None, [head, f"seq_len {one['seq_len']}" if "seq_len" in one else ""]))


def accumulation_points(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of one experiment at one global batch, by tiles: the largest such group (empty unless G and the
    micro-batches both vary in it). Runs of other experiments (another model, hardware, sequence length,
    any other swept setting) are never joined to them."""
    ok = [r for r in _ok(rows) if "micro_batches" in r]
    by_batch: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in ok:
        by_batch[(str(r["global_batch"]), *_experiment(r))].append(r)
    if not by_batch:
        return []
    runs = max(by_batch.values(), key=len)
    if len({r["tiles"] for r in runs}) < 2 or len({r["micro_batches"] for r in runs}) < 2:
        return []
    points = [{"tiles": int(r["tiles"]), "B": int(r["batch_per_tile"]), "N": int(r["micro_batches"]),
               "global_batch": int(r["global_batch"]), "throughput": float(r["throughput_tokens_per_s"]),
               "io_in": float(r["io_bytes_in"]), "model": r["model"], "hardware": r["hardware"],
               "seq_len": int(r["seq_len"])} for r in runs]
    return sorted(points, key=lambda p: (p["tiles"], p["N"]))


def cluster_series(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Series over ``cluster.systems`` (empty unless it varies), keyed by the other overrides' settings."""
    ok = [r for r in _ok(rows) if "systems" in r]
    if len({r["systems"] for r in ok}) < 2:
        return {}
    keys = sorted({k for r in ok for k in r if k.startswith("set:") and k != "set:cluster.systems"})
    keys = [k for k in keys if len({str(r.get(k, "")) for r in ok}) > 1]  # what tells the series apart
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in ok:
        settings = [f"{k[4:].split('.')[-1].replace('_', ' ')} {r[k]}" for k in keys
                    if r.get(k) not in ("", None)]
        groups[", ".join(settings) or "each system its own batch"].append(r)
    out = {}
    for label, runs in groups.items():
        points = sorted(({"systems": int(r["systems"]),
                          "cluster": float(r["cluster_throughput_tokens_per_s"]),
                          "per_system": float(r["throughput_tokens_per_s"]),
                          "share": int(r["global_batch"]) // int(r["systems"]), "B": int(r["batch_per_tile"]),
                          "G": int(r["tiles"]), "N": int(r["micro_batches"]),
                          # (a file older than tree_efficiency: its scaling_efficiency was the tree's alone)
                          "tree": float(r.get("tree_efficiency") or r["scaling_efficiency"])} for r in runs),
                        key=lambda p: p["systems"])
        one = next((p for p in points if p["systems"] == 1), None)
        for p in points:
            p["vs_one"] = p["cluster"] / (p["systems"] * one["cluster"]) if one else float("nan")
        out[label] = points
    return out
