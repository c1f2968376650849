"""Command-line interface: the only place that chooses paths and prints.

Every ``ConfigError`` becomes one line on stderr and exit code 2; nothing is written on error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..config.errors import ConfigError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2 (argparse's default code, kept)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: {message} (see --help)\n")
        raise SystemExit(EXIT_USAGE)


def _overrides(pairs: Sequence[str] | None) -> dict[str, Any]:
    from ..config.loader import parse_override

    out: dict[str, Any] = {}
    for text in pairs or ():
        key, value = parse_override(text)
        out[key] = value
    return out


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def _table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- validate


def _cmd_validate(args: argparse.Namespace) -> int:
    from ..config.loader import validate_file

    for path in args.files:
        kind, spec = validate_file(path)
        name = getattr(spec, "name", "") or ""
        print(f"{path}: ok ({kind}{' ' + name if name else ''})")
    return EXIT_OK


# --------------------------------------------------------------------------------------------- hardware


def _cmd_hardware(args: argparse.Namespace) -> int:
    from ..config.loader import load_hardware, preset_names

    if args.hardware_cmd == "list":
        for name in preset_names("hardware"):
            print(name)
        return EXIT_OK
    hw = load_hardware(args.ref, _overrides(args.set))
    totals = hw.totals()
    if args.json:
        _print_json({"name": hw.name, **totals})
        return EXIT_OK
    print(f"{hw.name}: {hw.description}")
    rows = [
        ("mesh", f"{hw.mesh.rows} x {hw.mesh.cols}"),
        ("PEs", f"{totals['pes']:,}"),
        ("clock", f"{hw.clock_hz / 1e6:g} MHz"),
        ("SRAM total", f"{totals['sram_total_bytes'] / 1e9:.2f} GB ({totals['sram_total_bytes'] / 2**30:.2f} GiB)"),
        ("peak fp16", f"{totals['peak_flops_per_s'] / 1e15:.2f} PFLOP/s"),
        ("SRAM bandwidth", f"{totals['sram_bandwidth_bytes_per_s'] / 1e15:.2f} PB/s"),
        ("fabric bandwidth", f"{totals['fabric_bandwidth_bits_per_s'] / 1e15:.1f} Pbit/s"),
        ("bisection bandwidth", f"{totals['bisection_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s"),
        ("I/O per direction", f"{totals['io_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s"),
    ]
    print(_table(rows, ("quantity", "value")))
    return EXIT_OK


# ----------------------------------------------------------------------------------------------- memory


def _cmd_memory(args: argparse.Namespace) -> int:
    return _memory_attention(args) if args.memory_cmd == "attention" else _memory_training(args)


def _memory_attention(args: argparse.Namespace) -> int:
    from ..model.attention_tiling import AttentionTiling

    a = AttentionTiling(seq_len=args.seq_len, head_dim=args.head_dim, tile=args.tile, heads=args.heads,
                        bytes_per_value=args.bytes_per_value, io_tensors=args.io_tensors,
                        stored_square_matrices=args.stored_square_matrices, row_statistics=args.row_statistics)
    if args.json:
        _print_json(a.as_dict())
        return EXIT_OK
    rows = [(name, f"{value:.5g}" if isinstance(value, float) else value, unit)
            for name, (value, unit) in a.mlsysim_units().items()]
    print(_table(rows, ("quantity", "value", "unit")))
    return EXIT_OK


def _memory_training(args: argparse.Namespace) -> int:
    from ..config.loader import load_experiment
    from ..model.memory import max_batch_per_tile, resolve_batch_per_tile, training_memory

    spec = load_experiment(args.experiment, overrides=_overrides(args.set)).spec
    hw, model, training = spec.hardware, spec.model, spec.training
    auto = max_batch_per_tile(hw, model, training)
    B = resolve_batch_per_tile(hw, model, training)
    mem = training_memory(hw, model, training, batch_per_tile=max(B, 1))
    components = list(dict.fromkeys(c for p in mem.phases for c in p.components))
    if args.json:
        _print_json({
            "hardware": hw.name, "model": model.name, "seq_len": training.seq_len,
            "batch_per_tile": B, "auto_batch_per_tile": auto, "tiles": mem.tiles,
            "capacity_bytes_per_pe": mem.capacity_bytes_per_pe, "peak_bytes_per_pe": mem.peak_bytes_per_pe,
            "binding_phase": mem.binding.phase, "feasible": mem.feasible and B > 0, "infeasible_reason": mem.reason,
            "phases": {p.phase: {**p.components, "total": p.total} for p in mem.phases},
        })
        return EXIT_OK
    print(f"{model.name} on {hw.name}: seq_len {training.seq_len}, B={max(B, 1)} per tile, G={mem.tiles} tiles, "
          f"activations {training.activations}, {training.attention_kernel} attention")
    rows = [(c, *[p.components.get(c, "") for p in mem.phases]) for c in components]
    rows.append(("total", *[p.total for p in mem.phases]))
    print(_table(rows, ("bytes per PE", *[p.phase for p in mem.phases])))
    print(f"capacity {mem.capacity_bytes_per_pe} B per PE; binding phase {mem.binding.phase} "
          f"({mem.peak_bytes_per_pe} B, {100 * mem.peak_bytes_per_pe / mem.capacity_bytes_per_pe:.1f} %)")
    print(f"batch_per_tile auto -> {auto}" + ("" if auto else " (not even one sequence per tile fits)"))
    if not mem.feasible:
        print(f"infeasible: {mem.reason}")
    return EXIT_OK


# ------------------------------------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="wsesim", description="Simulate MoE training on wafer-scale processors.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    v = sub.add_parser("validate", help="check wsesim YAML files (any kind)")
    v.add_argument("files", nargs="+", metavar="FILE")
    _COMMANDS["validate"] = _cmd_validate

    h = sub.add_parser("hardware", help="inspect hardware presets")
    hsub = h.add_subparsers(dest="hardware_cmd", required=True, parser_class=_Parser)
    hs = hsub.add_parser("show", help="derived whole-wafer totals")
    hs.add_argument("ref", metavar="NAME|FILE")
    hs.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a key, e.g. pe.sram='96 KiB'")
    hs.add_argument("--json", action="store_true")
    hsub.add_parser("list", help="names of the shipped presets")
    _COMMANDS["hardware"] = _cmd_hardware

    m = sub.add_parser("memory", help="analytical SRAM accounting")
    msub = m.add_subparsers(dest="memory_cmd", required=True, parser_class=_Parser)
    ma = msub.add_parser("attention", help="mlsysim's AttentionTilingScenario for one head")
    ma.add_argument("--seq-len", type=int, required=True)
    ma.add_argument("--head-dim", type=int, required=True)
    ma.add_argument("--tile", type=int, required=True)
    ma.add_argument("--heads", type=int, required=True)
    ma.add_argument("--bytes-per-value", required=True, metavar="SIZE", help='a size, e.g. "4 B" or "16 bit"')
    ma.add_argument("--io-tensors", type=int, default=4)
    ma.add_argument("--stored-square-matrices", type=int, default=2)
    ma.add_argument("--row-statistics", type=int, default=2)
    ma.add_argument("--json", action="store_true")
    mt = msub.add_parser("training", help="per-phase SRAM of a training step, and the auto batch")
    mt.add_argument("experiment", nargs="?", metavar="EXPERIMENT.yaml", help="default: the shipped example")
    mt.add_argument("--set", action="append", metavar="KEY=VALUE")
    mt.add_argument("--json", action="store_true")
    _COMMANDS["memory"] = _cmd_memory

    for module in _EXTENSION_MODULES:
        importlib.import_module(module).register(sub, _COMMANDS)
    return p


# Further subcommands live in their own modules, each with ``register(subparsers, commands)`` that adds
# its parser and its handler ``f(args) -> exit code``. Imported lazily so ``--help`` stays quick.
_EXTENSION_MODULES: list[str] = ["wsesim.cli.run", "wsesim.cli.sweep", "wsesim.cli.fabric"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except ConfigError as e:
        sys.stderr.write(f"wsesim: {e}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("wsesim: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # a bug, not bad input: one line, the traceback on request
        if os.environ.get("WSESIM_DEBUG"):
            raise
        sys.stderr.write(f"wsesim: internal error: {type(e).__name__}: {e} (set WSESIM_DEBUG=1 for the traceback; "
                         "please report it)\n")
        return EXIT_FAIL
