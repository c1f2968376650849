"""``wsesim hardware show|list``: a wafer's derived whole-wafer totals, and the shipped presets.

``--set`` takes the key paths an experiment uses (``hardware.pe.sram='96 KiB'``), or the short form
without the prefix (``pe.sram='96 KiB'``).
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import EXIT_OK, Parser, add_json_argument, format_table, parse_overrides, print_json


def _cmd_hardware(args: argparse.Namespace) -> int:
    from ..config.loader import load_hardware, preset_names

    if args.hardware_cmd == "list":
        if args.json:
            print_json(preset_names("hardware"))
            return EXIT_OK
        for name in preset_names("hardware"):
            print(name)
        return EXIT_OK
    hw = load_hardware(args.ref, parse_overrides(args.set))
    totals = hw.totals()
    if args.json:
        print_json({"name": hw.name, **totals})
        return EXIT_OK
    print(f"{hw.name}: {hw.description}")
    rows = [
        ("mesh", f"{hw.mesh.rows} x {hw.mesh.cols}"),
        ("PEs", f"{totals['pes']:,}"),
        ("clock", f"{hw.clock_hz / 1e6:g} MHz"),
        ("SRAM total", f"{totals['sram_total_bytes'] / 1e9:.2f} GB "
                       f"({totals['sram_total_bytes'] / 2**30:.2f} GiB)"),
        ("peak fp16", f"{totals['peak_flops_per_s'] / 1e15:.2f} PFLOP/s"),
        ("SRAM bandwidth", f"{totals['sram_bandwidth_bytes_per_s'] / 1e15:.2f} PB/s"),
        ("fabric bandwidth", f"{totals['fabric_bandwidth_bits_per_s'] / 1e15:.1f} Pbit/s"),
        ("bisection bandwidth", f"{totals['bisection_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s"),
        ("I/O per direction", f"{totals['io_bandwidth_bytes_per_s'] / 1e9:.1f} GB/s"),
        ("MemoryX optimizer step", f"{totals['memoryx_update_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s"),
    ]
    print(format_table(rows + _energy_rows(hw), ("quantity", "value")))
    return EXIT_OK


def _energy_rows(hw: Any) -> list[tuple[str, str]]:
    """Each event's energy with its label, the floor, and the power with everything busy (§12 of
    docs/model.md)."""
    from ..model.energy import full_load

    if hw.energy is None:
        return [("energy", "n/a (no energy section)")]
    rows = []
    for key, value in hw.energy.events().items():
        amount = f"{value.watts / 1e3:g} kW" if hasattr(value, "watts") else f"{value.joules * 1e12:g} pJ"
        rows.append((f"energy: {key}", f"{amount} ({value.label})"))
    busy = full_load(hw)["energy"]
    return [*rows, ("power, everything busy",
                    f"{busy.joules / 1e3:.2f} kW ({busy.dynamic / 1e3:.2f} kW of events)")]


def register(sub: Any, commands: dict[str, Any]) -> None:
    h = sub.add_parser("hardware", help="inspect hardware presets")
    hsub = h.add_subparsers(dest="hardware_cmd", required=True, parser_class=Parser, metavar="show|list",
                            help="show one wafer's totals, or list the presets")
    hs = hsub.add_parser("show", help="derived whole-wafer totals")
    hs.add_argument("ref", metavar="NAME|FILE", help="a hardware preset name or YAML file")
    hs.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override a key, e.g. hardware.pe.sram='96 KiB' (pe.sram=… also works; repeatable)")
    add_json_argument(hs, "print the totals as one JSON object")
    hl = hsub.add_parser("list", help="names of the shipped presets")
    add_json_argument(hl, "print the names as a JSON list")
    commands["hardware"] = _cmd_hardware
