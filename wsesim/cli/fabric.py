"""``wsesim fabric``: time one traffic pattern on a wafer's fabric, in the flow or packet fidelity (or
packet-simpy, the packet fidelity's SimPy reference).

Patterns are per PE (``--bytes`` per source-PE/destination-PE pair), summed onto the mesh's nodes, so
the same command at ``--granularity pe`` and ``block:K`` moves the same bytes. ``--png`` draws the link
load over the mesh (matplotlib is imported only then). Bad input is a ``ConfigError``: one line, exit 2.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from .. import fabric
from ..config.errors import ConfigError, shown
from ..config.loader import load_hardware
from ..config.units import parse_quantity
from ..fabric.fidelity import FABRICS, make_fabric
from ..output.run_folder import flat, write_records
from .common import check_output_folder, format_table, parse_overrides, parse_pe_grid, show
from .progress import Progress

PATTERNS = ("all-to-all", "transpose", "hotspot", "uniform-random", "dispatch", "message", "multicast")


def parse_mesh(text: str | None) -> tuple[int, int] | None:
    """``"64x64"`` → (64, 64); ``None`` → None (the whole wafer). Raises ``ConfigError`` otherwise."""
    return None if text is None else parse_pe_grid(text, "--mesh", "64x64")


def parse_bytes(text: str) -> float:
    """A byte count: a bare number (``"256"``) or a size (``"4 KiB"``). Raises ``ConfigError``."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_quantity(text, "size")
        except ConfigError as e:
            raise ConfigError(e.message, path="--bytes") from None
    if not 0 < value <= 2**40:  # NaN and inf too; a PE holds at most 1 TiB (config.specs: pe.sram)
        raise ConfigError(f'expected a positive number of bytes up to 1 TiB like "256" or "4 KiB", '
                          f'got "{shown(text)}"', path="--bytes")
    return value


def build_traffic(args: argparse.Namespace, mesh: Any) -> Any:
    """The traffic of ``args.pattern`` on ``mesh`` (see ``--help`` for each pattern)."""
    # local: keeps wsesim.fabric's modules out of every command's start
    from ..fabric.placement import place

    nbytes = parse_bytes(args.bytes)
    pattern = args.pattern
    if pattern == "all-to-all":
        return fabric.all_to_all(mesh, nbytes)
    if pattern == "transpose":
        return fabric.transpose(mesh, nbytes)
    if pattern == "hotspot":
        return fabric.hotspot(mesh, nbytes)
    if pattern == "uniform-random":
        return fabric.uniform_random(mesh, nbytes, np.random.default_rng(args.seed))
    if pattern == "dispatch":
        placement = place(mesh, args.experts, args.placement, np.random.default_rng(args.seed))
        return fabric.dispatch_traffic(mesh, placement, np.full(args.experts, nbytes * mesh.pes))
    if pattern == "message":
        return fabric.single_message(mesh, args.hops, args.wavelets)
    return fabric.row_multicast(mesh, args.hops, args.wavelets)


def _describe(args: argparse.Namespace, hw: Any, mesh: Any, result: Any) -> dict[str, Any]:
    return {
        "hardware": hw.name, "pattern": args.pattern, "routing": args.routing,
        "mesh": {"pe_rows": mesh.pe_rows, "pe_cols": mesh.pe_cols, "granularity": mesh.granularity,
                 "rows": mesh.rows, "cols": mesh.cols},
        **result.to_dict(),
        "seconds": result.cycles / hw.clock_hz,
    }


def _human(out: dict[str, Any]) -> str:
    m = out["mesh"]
    # at block:K a node is K × K PEs: the busiest link is one PE link (the block link's load over its K),
    # the table's are whole block links (every PE link between two nodes): said, so the two read apart
    k = int(str(m["granularity"]).removeprefix("block:")) if str(m["granularity"]).startswith("block:") else 1
    per_pe = (f" (one of the {k} PE links between nodes, the block link's load over {k})" if k > 1 else "")
    hottest = (f"hottest node links (all {k} PE links between two {k} x {k} blocks)" if k > 1
               else "hottest links")
    lines = [
        f"{out['hardware']} {m['pe_rows']} x {m['pe_cols']} PEs as {m['rows']} x {m['cols']} nodes "
        f"({m['granularity']}), {out['mode']} fidelity, {out['routing']} routing, pattern {out['pattern']}",
        f"{out['messages']:,} messages, {out['bytes_injected']:,.0f} B injected, "
        f"{out['bytes_delivered']:,.0f} B delivered",
        f"{out['cycles']:,.0f} cycles ({out['seconds'] * 1e6:,.3f} us); busiest PE link "
        f"{out['bottleneck'] or '-'}{per_pe} carries {out['max_link_load_bytes']:,.0f} B; "
        f"{out['events']:,} events",
        f"colours: at most {out['colours_per_node']} per node (one per direction of travel), budget "
        f"{out['colour_budget']}; at most {out['routes_per_node']:,} routes through a node"
        + ("" if out["feasible"] else f" -> infeasible: {out['reason']}"),
        "note: colours by wsesim.fabric.colours, the rule wsesim kernel alltoall and the training step's "
        "dispatch apply",
    ]
    if out["multicast_arrivals"]:
        for i, cycles in out["multicast_arrivals"].items():
            lines.append(f"multicast {i}: receivers hold it at cycles {', '.join(f'{c:g}' for c in cycles)}")
    if out["hottest"]:
        rows = [(f"{tuple(h['from'])} -> {tuple(h['to'])}", f"{h['bytes']:,.0f}") for h in out["hottest"]]
        lines += ["", format_table(rows, (hottest, "bytes"))]
    return "\n".join(lines)


_OPTIONS = {"granularity", "mesh", "hops", "wavelets", "experts", "placement", "routing", "fabric"}


def _cmd_fabric(args: argparse.Namespace) -> int:
    if args.out:
        check_output_folder(args.out)
    hw = load_hardware(args.hardware, parse_overrides(args.set))
    try:
        mesh, result = _simulate(args, hw)
    except ConfigError as e:
        if e.source is None and e.path in _OPTIONS:  # name the option the user typed, not the model's key
            raise ConfigError(e.message, path=f"--{'mode' if e.path == 'fabric' else e.path}") from None
        raise
    out = _describe(args, hw, mesh, result)
    if args.png:
        # local: keeps matplotlib out of every command's start
        from ..output.plotting import plot_link_load

        plot_link_load(mesh, result, args.png,
                       f"{hw.name} {args.pattern} ({args.mode}): {result.cycles:,.0f} cycles")
    written = [args.png] if args.png else []
    if args.out:
        written += _write_out(args, hw, out)
    return show(args.json, out, lambda: _human(out), written)


FABRIC_CSV, HOTTEST_CSV = "fabric.csv", "hottest_links.csv"


def _write_out(args: argparse.Namespace, hw: Any, out: dict[str, Any]) -> list[Any]:
    """``--out DIR``: ``DIR/fabric.csv`` (the run as one row: every scalar of ``--json``, the mesh's as
    ``mesh_rows``...), ``DIR/hottest_links.csv`` (its busiest links, from and to, bytes) and
    ``DIR/manifest.json`` (the flags as given, the hardware resolved)."""

    hottest = [{"from_row": h["from"][0], "from_col": h["from"][1], "to_row": h["to"][0],
                "to_col": h["to"][1], "bytes": h["bytes"]} for h in out["hottest"] or []]
    flags = {k: v for k, v in vars(args).items() if k not in ("command", "func", "json", "png", "out", "argv")
             and not callable(v)}
    return write_records(args.out, "fabric", getattr(args, "argv", None),
                         {FABRIC_CSV: [flat(out)], HOTTEST_CSV: hottest}, overrides=flags,
                         hardware=hw.model_dump(mode="json"))


def _simulate(args: argparse.Namespace, hw: Any) -> tuple[Any, Any]:
    # local: keeps wsesim.fabric's modules out of every command's start
    from ..fabric.mesh import Mesh

    mesh = Mesh.from_hardware(hw, args.granularity, parse_mesh(args.mesh))
    for name in ("experts", "hops", "wavelets"):
        if getattr(args, name) <= 0:
            raise ConfigError(f"expected a positive integer, got {getattr(args, name)}", path=name)
    if args.pattern == "dispatch":
        # local: keeps the estimate and the models it reads (~20 modules) out of every command's start
        from ..experiments.estimate import check_fabric

        check_fabric(mesh.rows * mesh.cols, mesh.pe_rows * mesh.pe_cols, args.experts)
    traffic = build_traffic(args, mesh)

    with Progress(None, f"fabric: {args.pattern}, {args.mode} fidelity, {mesh.rows} x {mesh.cols} nodes"):
        return mesh, make_fabric(args.mode, mesh, args.routing).simulate(traffic)


def register(sub: Any, commands: dict[str, Any]) -> None:
    p = sub.add_parser("fabric",
                       help="time a traffic pattern on the wafer's fabric (flow or packet fidelity)",
                       description=__doc__.split("\n\n", 1)[0])
    p.add_argument("hardware", metavar="HARDWARE", help="a hardware preset name or YAML file")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a hardware key, e.g. hardware.pe.sram='96 KiB' (pe.sram=… also works; "
                        "repeatable)")
    p.add_argument("--mesh", metavar="RxC",
                   help="a sub-mesh of R x C PEs with the same links (default: the wafer)")
    p.add_argument("--granularity", default="pe", metavar="pe|block:K",
                   help="one node per PE or per K x K PEs")
    p.add_argument("--mode", choices=tuple(FABRICS), default="flow",
                   help="fidelity (default flow): " + "; ".join(f"{k}: {f.description}"
                                                                for k, f in FABRICS.items()))
    p.add_argument("--routing", choices=("xy", "yx"), default="xy", help="dimension order (default xy)")
    p.add_argument("--pattern", choices=PATTERNS, required=True,
                   help="all-to-all: every PE to every other; transpose: (r, c) to (c, r); "
                        "hotspot: every PE to the centre PE; uniform-random: every PE to a random PE; "
                        "dispatch: every PE to each of --experts regions (grid placement); "
                        "message / multicast: one message of --wavelets wavelets over --hops hops "
                        "along row 0")
    p.add_argument("--bytes", default="64", metavar="N",
                   help='bytes per PE pair (or per PE per expert), e.g. 256 or "4 KiB"')
    p.add_argument("--hops", type=int, default=1, metavar="H",
                   help="message / multicast: hops along row 0 (default 1)")
    p.add_argument("--wavelets", type=int, default=1, metavar="L",
                   help="message / multicast: wavelets (default 1)")
    p.add_argument("--experts", type=int, default=8, metavar="E", help="dispatch: expert regions (default 8)")
    p.add_argument("--placement", choices=("grid", "snake", "random"), default="grid",
                   help="dispatch: how expert regions are laid out (default grid)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of uniform-random and random placement")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--png", metavar="FILE", help="draw the link load over the mesh to FILE")
    p.add_argument("--out", metavar="DIR",
                   help=f"write DIR/{FABRIC_CSV} (the run as one row, every scalar of --json), "
                        f"DIR/{HOTTEST_CSV} and DIR/manifest.json")
    commands["fabric"] = _cmd_fabric
