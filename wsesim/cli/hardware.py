"""``wsesim hardware show|list``: a wafer's derived whole-wafer totals or a GPU's figures and its node's, and
the shipped presets; ``wsesim
model list``: the shipped models, each with its one-line description, its layers and experts, and the
context it was made for.

``--set`` takes the key paths an experiment uses (``hardware.pe.sram='96 KiB'``), or the short form
without the prefix (``pe.sram='96 KiB'``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..config.loader import load_hardware, load_model, load_part, preset_names
from ..model.energy import full_load
from .common import EXIT_OK, Parser, add_json_argument, format_table, parse_overrides, print_json


def presets(kind: str) -> list[dict[str, Any]]:
    """Every shipped preset of ``kind`` (hardware, model, interconnect): its name, its one-line description
    and what says most about it in a few words (a wafer's mesh, a GPU's SMs, a model's layers and experts)."""
    out = []
    for name in preset_names(kind):
        if kind == "hardware":
            hw = load_hardware(name)
            out.append({"name": name, "kind": hw.kind, "description": hw.description,
                        **VIEWS[hw.kind].summary(hw)})
        elif kind == "model":
            m = load_model(name)
            out.append({"name": name, "description": m.description, "layers": m.layers, "experts": m.experts,
                        "top_k": m.top_k, "context_len": m.context_len})
        else:
            part = load_part(kind, name)
            out.append({"name": name, "description": part.description})
    return out


def _cmd_hardware(args: argparse.Namespace) -> int:
    if args.hardware_cmd == "list":
        machines, links = presets("hardware"), presets("interconnect")
        if args.json:
            print_json({"hardware": machines, "interconnects": links})
            return EXIT_OK
        for kind, view in VIEWS.items():  # one table a kind, its own columns
            print(format_table([(h["name"], *(h[k] for k in view.listed), h["description"])
                                for h in machines if h["kind"] == kind],
                               (view.heading, *view.listed.values(), "description"),
                               left=(0, len(view.listed) + 1)))
            print()
        print(format_table([(i["name"], i["description"]) for i in links], ("interconnect", "description"),
                           left=(0, 1)))
        print("(an interconnect joins the wafers of a cluster, cluster.interconnect, or of a serving "
              "pipeline, inference.interconnect)")
        return EXIT_OK
    hw = load_hardware(args.ref, parse_overrides(args.set))
    totals = hw.totals()
    if args.json:
        print_json({"name": hw.name, **totals})
        return EXIT_OK
    print(f"{hw.name}: {hw.description}")
    print(format_table(VIEWS[hw.kind].rows(hw, totals), ("quantity", "value")))
    return EXIT_OK


def _wafer_rows(hw: Any, totals: dict[str, float]) -> list[tuple[str, str]]:
    """A wafer's figures (``HardwareSpec.totals``) and its energy as ``hardware show`` prints them."""
    return [
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
        *_energy_rows(hw),
    ]


def _gpu_rows(hw: Any, totals: dict[str, float]) -> list[tuple[str, str]]:
    """A GPU preset's figures (``GpuSpec.totals``) as ``hardware show`` prints them."""
    peaks = [(f"peak {d} (dense)", f"{totals[f'peak_{d}_flops_per_s'] / 1e12:,.1f} TFLOP/s")
             for d in ("bf16", "fp16", "fp8", "tf32", "fp32")]
    return [("SMs", f"{hw.sms}"), ("clock", f"{hw.clock_hz / 1e6:g} MHz"), *peaks,
            ("achievable tensor rate", f"{100 * hw.runtime.tensor_efficiency:g} % of peak (calibrated)"),
            ("HBM", f"{totals['hbm_bytes'] / 1e9:g} GB at "
                    f"{totals['hbm_bandwidth_bytes_per_s'] / 1e12:g} TB/s"),
            ("L2", f"{totals['l2_bytes'] / 1e6:g} MB"),
            ("node", f"{hw.node.gpus} GPUs on NVSwitch, {totals['node_hbm_bytes'] / 1e9:g} GB of HBM"),
            ("NVLink per GPU", f"{totals['nvlink_bytes_per_s'] / 1e9:g} GB/s each way"),
            ("network per GPU", f"{totals['network_bytes_per_s'] * 8 / 1e9:g} Gbit/s each way"),
            ("kernel launch", f"{hw.runtime.kernel_launch_s * 1e6:g} us (0 under CUDA graphs)"),
            ("power", f"{hw.power.gpu_watts:g} W a GPU; the node {totals['node_power_watts'] / 1e3:g} kW "
                      f"({hw.power.node_floor_watts / 1e3:g} kW beside its GPUs)")]


def _energy_rows(hw: Any) -> list[tuple[str, str]]:
    """Each event's energy with its label, the floor, and the power with everything busy (§12 of
    docs/model.md)."""

    if hw.energy is None:
        return [("energy", "n/a (no energy section)")]
    rows = []
    for key, value in hw.energy.events().items():
        amount = f"{value.watts / 1e3:g} kW" if hasattr(value, "watts") else f"{value.joules * 1e12:g} pJ"
        rows.append((f"energy: {key}", f"{amount} ({value.label})"))
    busy = full_load(hw)["energy"]
    return [*rows, ("power, everything busy",
                    f"{busy.joules / 1e3:.2f} kW ({busy.dynamic / 1e3:.2f} kW of events)")]


@dataclass(frozen=True)
class PresetView:
    """How ``wsesim hardware`` shows a kind of hardware: ``summary(hw)`` its few words in ``list`` (the
    columns ``listed`` names, under a table headed ``heading``), ``rows(hw, totals)`` its ``show`` table.
    The command's half of ``experiments.hardware_kinds``."""

    heading: str
    listed: dict[str, str]
    summary: Callable[[Any], dict[str, Any]]
    rows: Callable[[Any, dict[str, float]], list[tuple[str, str]]]


VIEWS = {
    "hardware": PresetView("hardware", {"mesh": "mesh (PEs)"},
                           lambda hw: {"mesh": f"{hw.mesh.rows}x{hw.mesh.cols}", "clock_hz": hw.clock_hz},
                           _wafer_rows),
    "gpu": PresetView("GPU", {"sms": "SMs", "gpus_per_node": "a node"},
                      lambda hw: {"sms": hw.sms, "clock_hz": hw.clock_hz, "gpus_per_node": hw.node.gpus},
                      _gpu_rows),
}
"""Each kind of hardware's view, by its ``kind:`` key."""


def _cmd_model(args: argparse.Namespace) -> int:
    models = presets("model")
    if args.json:
        print_json(models)
        return EXIT_OK
    rows = [(m["name"], m["layers"], f"{m['experts']} (top-{m['top_k']})" if m["experts"] else "dense",
             f"{m['context_len']:,}" if m["context_len"] else "-", m["description"]) for m in models]
    print(format_table(rows, ("model", "layers", "experts", "context", "description"), left=(0, 4)))
    return EXIT_OK


def register(sub: Any, commands: dict[str, Any]) -> None:
    h = sub.add_parser("hardware", help="inspect hardware presets")
    hsub = h.add_subparsers(dest="hardware_cmd", required=True, parser_class=Parser, metavar="show|list",
                            help="show one wafer's totals, or list the presets")
    hs = hsub.add_parser("show", help="derived whole-wafer totals")
    hs.add_argument("ref", metavar="NAME|FILE", help="a hardware preset name or YAML file")
    hs.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override a key, e.g. hardware.pe.sram='96 KiB' (pe.sram=… also works; repeatable)")
    add_json_argument(hs, "print the totals as one JSON object")
    hl = hsub.add_parser("list", help="the shipped hardware and interconnect presets, with descriptions")
    add_json_argument(hl, 'print {"hardware": [...], "interconnects": [...]}, each preset with its name and '
                          "description")
    commands["hardware"] = _cmd_hardware
    m = sub.add_parser("model", help="list the model presets")
    msub = m.add_subparsers(dest="model_cmd", required=True, parser_class=Parser, metavar="list",
                            help="list the presets")
    ml = msub.add_parser("list", help="the shipped model presets, each with its description")
    add_json_argument(ml, "print the presets as a JSON list (name, description, layers, experts, top_k, "
                          "context_len)")
    commands["model"] = _cmd_model
