"""``wsesim memory attention|training``: the analytical SRAM model, per phase and per PE."""

from __future__ import annotations

import argparse
from typing import Any

from ..model.attention_tiling import AttentionTiling
from .common import (
    EXIT_OK,
    Parser,
    add_experiment_arguments,
    add_json_argument,
    format_table,
    load_from_args,
    print_json,
)


def _cmd_memory(args: argparse.Namespace) -> int:
    return _memory_attention(args) if args.memory_cmd == "attention" else _memory_training(args)


def _memory_attention(args: argparse.Namespace) -> int:
    a = AttentionTiling(seq_len=args.seq_len, head_dim=args.head_dim, tile=args.tile, heads=args.heads,
                        bytes_per_value=args.bytes_per_value, io_tensors=args.io_tensors,
                        stored_square_matrices=args.stored_square_matrices,
                        row_statistics=args.row_statistics)
    if args.json:
        print_json(a.as_dict())
        return EXIT_OK
    rows = [(name, f"{value:.5g}" if isinstance(value, float) else value, unit)
            for name, (value, unit) in a.mlsysim_units().items()]
    print(format_table(rows, ("quantity", "value", "unit")))
    return EXIT_OK


def _memory_training(args: argparse.Namespace) -> int:
    # local: keeps the engine (SimPy) out of every command's start
    from ..experiments.estimate import check_routing
    from ..experiments.training import size_step

    spec = load_from_args(args).spec
    check_routing(spec)  # sizing routes every layer's experts: refused before, when that cannot be held
    hw, model, training = spec.hardware, spec.model, spec.training
    size = size_step(spec)  # what ``wsesim run`` runs: B sized for the routed load
    B, mem = size.batch_per_tile, size.memory
    auto = B if training.batch_per_tile == "auto" else size_step(spec.model_copy(update={
        "training": training.model_copy(update={"batch_per_tile": "auto"})})).batch_per_tile
    components = list(dict.fromkeys(c for p in mem.phases for c in p.components))
    if args.json:
        print_json({
            "hardware": hw.name, "model": model.name, "seq_len": training.seq_len,
            "batch_per_tile": B, "auto_batch_per_tile": auto, "tiles": mem.tiles,
            "expert_load": size.expert_load,
            "capacity_bytes_per_pe": mem.capacity_bytes_per_pe, "peak_bytes_per_pe": mem.peak_bytes_per_pe,
            "binding_phase": mem.binding.phase, "feasible": mem.feasible and B > 0,
            "infeasible_reason": mem.reason,
            "phases": {p.phase: {**p.components, "total": p.total} for p in mem.phases},
        })
        return EXIT_OK
    print(f"{model.name} on {hw.name}: seq_len {training.seq_len}, B={max(B, 1)} per tile, "
          f"G={mem.tiles} tiles, activations {training.activations}, {training.attention_kernel} attention")
    rows = [(c, *[p.components.get(c, "") for p in mem.phases]) for c in components]
    rows.append(("total", *[p.total for p in mem.phases]))
    print(format_table(rows, ("bytes per PE", *[p.phase for p in mem.phases])))
    print(f"capacity {mem.capacity_bytes_per_pe} B per PE; binding phase {mem.binding.phase} "
          f"({mem.peak_bytes_per_pe} B, {100 * mem.peak_bytes_per_pe / mem.capacity_bytes_per_pe:.1f} %)")
    print(f"batch_per_tile auto -> {auto}" + ("" if auto else " (not even one sequence per tile fits)"))
    if not mem.feasible:
        print(f"infeasible: {mem.reason}")
    return EXIT_OK


def register(sub: Any, commands: dict[str, Any]) -> None:
    m = sub.add_parser("memory", help="analytical SRAM accounting")
    msub = m.add_subparsers(dest="memory_cmd", required=True, parser_class=Parser,
                            metavar="attention|training",
                            help="one head's attention memory, or a training step's SRAM per phase")
    ma = msub.add_parser("attention", help="mlsysim's AttentionTilingScenario for one head")
    ma.add_argument("--seq-len", type=int, required=True, metavar="S", help="sequence length in tokens")
    ma.add_argument("--head-dim", type=int, required=True, metavar="D", help="width of one head")
    ma.add_argument("--tile", type=int, required=True, metavar="T",
                    help="the tiled kernel's square tile, in tokens")
    ma.add_argument("--heads", type=int, required=True, metavar="H",
                    help="attention heads (for all_heads_scores)")
    ma.add_argument("--bytes-per-value", required=True, metavar="SIZE", help='a size, e.g. "4 B" or "16 bit"')
    ma.add_argument("--io-tensors", type=int, default=4, metavar="N",
                    help="S x head_dim tensors both kernels store: q, k, v, output (default 4)")
    ma.add_argument("--stored-square-matrices", type=int, default=2, metavar="N",
                    help="S x S matrices the standard kernel stores: scores, probabilities (default 2)")
    ma.add_argument("--row-statistics", type=int, default=2, metavar="N",
                    help="per-row values the tiled kernel stores instead: max, sum (default 2)")
    add_json_argument(ma, "print the figures in bytes as one JSON object")
    mt = msub.add_parser("training", help="per-phase SRAM of a training step, and the auto batch")
    add_experiment_arguments(mt)
    add_json_argument(mt)
    commands["memory"] = _cmd_memory
