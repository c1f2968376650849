"""``wsesim tune``'s options beyond the (G, B) search: ``--out DIR`` (every candidate in
``DIR/candidates.csv`` with ``DIR/manifest.json``) and ``--search-systems N,N,...`` (a fixed global batch
tuned on each count of systems: the best, and the Pareto front of cluster throughput against per-system
efficiency, each candidate's efficiency a column of the CSV). With ``--out`` the candidates are drawn too,
from the CSV's text as ``wsesim plot`` draws the file (``output.plotting.plot_candidates``), and
``DIR/figures.json`` lists the plans.

``wsesim tune`` itself is registered in ``cli/tune.py``, which calls ``add_tune_arguments``,
``tune_systems`` and ``write_candidates`` from here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..config.errors import ConfigError
from ..output.files import atomic_write_text, check_folder_owner, command_folder, prepare_dir
from ..output.manifest import write_manifest
from ..output.run_folder import records_csv
from .common import EXIT_OK, check_output_folder, format_table, load_from_args, print_json, print_written
from .progress import Progress
from .run import given

CANDIDATES = "candidates.csv"


def add_tune_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="DIR",
                   help=f"write every candidate to DIR/{CANDIDATES} (the best marked), their figure "
                        "(candidates.png|svg|pdf: throughput and SRAM against G), DIR/figures.json and "
                        "DIR/manifest.json (wsesim plot DIR draws them again)")
    p.add_argument("--search-systems", metavar="N,N,...",
                   help="with training.global_batch set: tune it on each number of systems (behind swarmx "
                        "unless cluster.interconnect is set); print the best and the Pareto front of cluster "
                        "throughput against per-system efficiency (with --out, drawn too)")


def parse_systems(text: str) -> list[int]:
    limit = 65_536  # cluster.systems's own bound
    parts = [v.strip() for v in text.split(",") if v.strip()]
    values = ([int(v) for v in parts]
              if parts and all(v.isascii() and v.isdigit() and len(v) <= 6 for v in parts) else [])
    if not values or any(not 1 <= v <= limit for v in values):
        raise ConfigError(f"expected whole numbers of systems from 1 to {limit:,}, comma-separated "
                          f"(1,2,4,8), got {text!r}", source="--search-systems")
    return sorted(set(values))


def write_candidates(args: argparse.Namespace, loaded: Any, marked: list[tuple[Any, dict[str, Any]]],
                     summary: dict[str, Any]) -> list[Path]:
    """``DIR/candidates.csv``, its figures drawn from that CSV's text (``output.plotting.plot_candidates``:
    the candidates, and with ``--search-systems`` the front), ``DIR/figures.json`` and ``DIR/manifest.json``
    when ``--out`` was given; their paths."""
    if not args.out:
        return []
    # local: keeps matplotlib out of every command's start
    from ..experiments.tune import candidates_table
    from ..output.plotting import plot_candidates

    with command_folder(prepare_dir(args.out), "tune") as out:
        path = out / CANDIDATES
        text = records_csv(candidates_table(marked))
        atomic_write_text(path, text)
        # as wsesim plot draws the file: the same plans (no candidates, every count skipped: nothing to draw)
        figures = plot_candidates(text, path, out) if marked else []
        return [path, *figures, write_manifest(out, "tune", getattr(args, "argv", None), [path, *figures],
                                               loaded=loaded, overrides=given(args), **summary)]


def tune_systems(args: argparse.Namespace) -> int:
    """``wsesim tune --search-systems``: see the module docstring."""
    # local: keeps the engine (SimPy) out of every command's start
    from ..experiments.estimate import check_work
    from ..experiments.tune import candidates, search_systems, with_systems

    loaded = load_from_args(args)
    systems = parse_systems(args.search_systems)
    if args.out:
        check_output_folder(args.out)
        check_folder_owner(args.out, "tune")  # before the search runs; again under the lock
    planned = 0
    for n in systems:
        try:
            spec = with_systems(loaded, n).spec
        except ConfigError:  # a count the batch does not split over: the search skips it and says why
            continue
        mine = candidates(spec)
        check_work(spec, candidates=mine)  # every candidate is a run, at its own tiles and batch
        planned += len(mine)
    with Progress(planned, "tune") as bar:
        search = search_systems(loaded, systems, progress=lambda r, _: bar.advance(
            f"N={r.systems} G={r.tiles}: " + (f"{r.cluster_throughput_tokens_per_s:,.0f} tokens/s (cluster)"
                                              if r.feasible else "does not fit")))
    best, front = search.best, search.pareto()
    marked = [(c, {"best": c is best, "pareto": any(c is f for f in front), "best_of_systems": c is t.best,
                   "efficiency_per_system": search.efficiency(c) if c.feasible else None})
              for _, t in search.per_systems for c in t.candidates]
    summary = {"global_batch": search.global_batch, "search_systems": systems,
               "best": None if best is None else {
                   "systems": best.systems, "tiles": best.tiles, "micro_batches": best.micro_batches,
                   "cluster_throughput_tokens_per_s": best.cluster_throughput_tokens_per_s},
               "skipped": [{"systems": n, "why": why} for n, why in search.skipped]}
    written = write_candidates(args, loaded, marked, summary)
    if args.json:
        print_json(search.to_dict())
        return EXIT_OK
    _print_systems(search, systems, best, front)
    print_written(written)
    sys.stdout.flush()
    return EXIT_OK


def _print_systems(search: Any, systems: list[int], best: Any, front: list[Any]) -> None:
    """The search over systems as a table: each count's best (G, B, micro-batches), the best marked and
    the Pareto front of cluster throughput against per-system efficiency, then what was skipped."""
    one = next((t.best for n, t in search.per_systems if n == 1 and t.best.feasible), None)
    rows = []
    for n, t in search.per_systems:
        r = t.best
        linear = f"{100 * search.efficiency(r):.1f}" if r.feasible else "-"
        mark = ("*" if r is best else "") + ("P" if any(r is f for f in front) else "")
        rows.append((f"{n}{mark}", r.tiles, r.batch_per_tile, r.micro_batches,
                     f"{r.cluster_throughput_tokens_per_s:,.0f}" if r.feasible else "-",
                     f"{r.throughput_tokens_per_s:,.0f}" if r.feasible else "-",
                     linear, f"{100 * r.tree_efficiency:.1f}" if r.feasible else "-",
                     "" if r.feasible else r.infeasible_reason[:70]))
    on = f"{', '.join(map(str, systems))} system{'' if systems == [1] else 's'}"
    print(f"global batch {search.global_batch} on {on}: each row the best "
          f"(G, B, micro-batches) on that many systems (* best, P on the Pareto front of cluster throughput "
          f"against per-system efficiency)")
    share = "efficiency %" if one is None else "of N × 1 system %"
    print(format_table(rows, ("systems", "G", "B", "micro-batches", "cluster tokens/s", "tokens/s per system",
                              share, "tree efficiency %", "note")))
    for n, why in search.skipped:
        print(f"{n} systems skipped: {why}")
    if best is None:
        print("nothing fits on any number of systems")
    else:
        print(f"best: {best.systems} system{'s' if best.systems > 1 else ''}, G={best.tiles} "
              f"B={best.batch_per_tile} × {best.micro_batches} "
              f"micro-batch{'es' if best.micro_batches > 1 else ''}: "
              f"{best.cluster_throughput_tokens_per_s:,.0f} tokens/s (cluster)")
        print("Pareto front (systems: cluster tokens/s at per-system efficiency): " + "; ".join(
            f"{r.systems}: {r.cluster_throughput_tokens_per_s:,.0f} at {100 * search.efficiency(r):.1f} %"
            for r in front))
