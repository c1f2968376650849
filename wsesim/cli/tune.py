"""``wsesim tune``: the tiling factor G (and B) with the highest throughput, its candidates, and with
``--search-systems`` the best on each number of systems (``cli/tune_out.py``)."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from ..output.files import check_folder_owner
from .common import (
    EXIT_OK,
    add_experiment_arguments,
    check_output_folder,
    format_table,
    load_from_args,
    print_json,
    print_written,
)
from .progress import Progress
from .run import format_result
from .tune_out import add_tune_arguments, tune_systems, write_candidates


def _cmd_tune(args: argparse.Namespace) -> int:
    # local: keeps the engine (SimPy) out of every command's start
    from ..experiments.advice import no_fit_advice
    from ..experiments.estimate import check_work
    from ..experiments.tune import candidates, tune

    if args.search_systems:  # a global batch over clusters of systems (cli/tune_out.py)
        return tune_systems(args)
    loaded = load_from_args(args)
    if args.out:
        check_output_folder(args.out)
        check_folder_owner(args.out, "tune")  # before the candidates run; again under the lock
    planned = candidates(loaded.spec)
    check_work(loaded.spec, candidates=planned)  # every candidate is a run, at its own tiles and batch
    with Progress(len(planned), "tune") as bar:
        result = tune(loaded, progress=lambda r, planned: bar.advance(
            f"G={r.tiles} B={r.batch_per_tile}: "
            + (f"{r.throughput_tokens_per_s:,.0f} tokens/s" if r.feasible else "does not fit")))
    found = result.best.feasible  # an infeasible candidate is never the best
    advice = None if found else no_fit_advice(loaded.spec)
    best = {"tiles": result.best.tiles, "batch_per_tile": result.best.batch_per_tile} if found else None
    marked = [(c, {"best": found and c is result.best}) for c in result.candidates]
    written = write_candidates(args, loaded, marked, {"best": best})
    if args.json:
        print_json({"best": result.best.to_dict() if found else None,
                    "candidates": [c.to_dict() for c in result.candidates],
                    **({} if found else {"no_fit": {"why": advice[0], "try": [k for k, _ in advice[1]]}})})
        return EXIT_OK
    rows = []
    for r in result.candidates:
        mark = "*" if found and r is result.best else ""
        rows.append((f"{r.tiles}{mark}", r.batch_per_tile, r.batch_per_tile * r.tiles,
                     f"{r.throughput_tokens_per_s:,.0f}" if r.feasible else "-",
                     f"{100 * r.mfu:.1f}" if r.feasible else "-",
                     r.binding_memory_phase, "" if r.feasible else r.infeasible_reason[:90]))
    print(format_table(rows, ("G", "B", "G·B", "tokens/s", "MFU %", "binding SRAM phase", "note")))
    print()
    if advice is not None:
        print(f"nothing fits: {advice[0]}. To make it fit, try:")
        for override, why in advice[1]:
            print(f"  --set {shell_word(override)}   ({why})" if "=" in override
                  else f"  {override}   ({why})")
        print("\n".join(f"wrote {path}" for path in written))
        return EXIT_OK
    print(format_result(result.best))
    if result.gain is not None and result.baseline is not None:
        print(f"tuned G={result.best.tiles} is {result.gain:.2f}x G=1 "
              f"(B={result.baseline.batch_per_tile}, the B a run at G=1 picks)")
    print_written(written)
    return EXIT_OK


def shell_word(override: str) -> str:
    """``KEY=VALUE`` as it pastes into a shell: the value quoted when it needs it
    (``hardware.pe.sram='64 KiB'``)."""
    key, _, value = override.partition("=")
    return f"{key}={shlex.quote(value)}"


def register(sub: Any, commands: dict[str, Any]) -> None:
    t = sub.add_parser("tune", help="find the tiling factor G (and B) with the highest throughput")
    add_experiment_arguments(t)
    t.add_argument("--json", action="store_true", help='print {"best": run, "candidates": [run, ...]}')
    add_tune_arguments(t)
    commands["tune"] = _cmd_tune
