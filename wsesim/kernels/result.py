"""What a simulated kernel reports: cycles, the critical path's split, SRAM, the link map and its summary,
colours, feasibility."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .kinds import MATMULS, Algorithm, KernelKind
from .linkmap import LinkMap, LinkSummary
from .machine import Machine

__all__ = ["KernelResult", "LinkSummary", "sram_check"]


@dataclass(frozen=True)
class KernelResult:
    """One kernel on a rows × cols grid. ``overhead + compute + communication + waiting == cycles`` along the
    critical path: arithmetic on the critical PE, wavelets on ramps and links that nothing hides, and the
    rest (queues at a busy ramp, a PE waiting for a slower neighbour). Infeasible: ``feasible`` False,
    ``reason`` says why, and the cycles are those of the schedule as if it fitted."""

    kind: KernelKind
    algorithm: Algorithm
    rows: int
    cols: int
    shape: tuple[int, int, int]  # M, K, N (a collective: 1, elements, 1)
    dtype: str
    cycles: float
    compute: float
    communication: float
    flops: float
    sram_bytes: float  # peak per PE
    link_map: LinkMap  # wavelets per directed mesh link, formed when first asked
    machine: Machine
    feasible: bool = True
    reason: str = ""
    notes: tuple[str, ...] = field(default=())
    colours: int = 0  # routable colours the schedule needs at its busiest router (routes.colours_needed)
    # instruction issue on the critical path (``pe.instruction_issue`` each): "instruction issue" in the CLI,
    # ``critical_path.instruction_issue`` in the JSON and kernels.csv; ``overhead`` in the cost splits
    overhead: float = 0.0
    # the instruction model (``instructions``): DSD operations issued on the critical PE, the elements they
    # walk, and the cycles that microthreads hid (asynchronous operations beside the instruction stream)
    dsd_ops: float = 0.0
    dsd_elements: float = 0.0
    microthread_saved: float = 0.0

    @property
    def links(self) -> LinkSummary:
        """The link map's busiest link, links used and wavelet-hops."""
        return self.link_map.summary

    @property
    def waiting(self) -> float:
        return max(0.0, self.cycles - self.overhead - self.compute - self.communication)

    @property
    def seconds(self) -> float:
        return self.machine.seconds(self.cycles)

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds if self.cycles > 0 else 0.0

    @property
    def wavelets(self) -> int | None:
        """A collective's 32-bit wavelets per PE (what ``run_kernel`` was given); None for a GEMM or GEMV."""
        return None if self.kind in MATMULS else self.shape[1] // self.machine.per_wavelet

    @property
    def efficiency(self) -> float:
        """Useful FLOPs over the grid's peak for the time taken (0 for a collective)."""
        peak = self.rows * self.cols * self.machine.peak_flops_per_cycle * self.cycles
        return self.flops / peak if peak > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        m = self.machine
        return {
            "cycles": self.cycles, "seconds": self.seconds, "kind": self.kind, "algorithm": self.algorithm,
            "hardware": m.name, "grid": {"rows": self.rows, "cols": self.cols},
            "shape": {"m": self.shape[0], "k": self.shape[1], "n": self.shape[2]}, "wavelets": self.wavelets,
            "dtype": self.dtype,
            "flops": self.flops, "flops_per_s": self.flops_per_s, "efficiency": self.efficiency,
            "flops_per_cycle_per_pe": (self.flops / (self.cycles * self.rows * self.cols)
                                       if self.cycles else 0.0),
            "critical_path": {"instruction_issue": self.overhead, "compute": self.compute,
                              "communication": self.communication, "waiting": self.waiting},
            "instructions": {"dsd_ops": self.dsd_ops, "elements_per_op": (self.dsd_elements / self.dsd_ops
                                                                         if self.dsd_ops else 0.0),
                             "issue_cycles_per_op": m.issue, "microthreads": m.microthreads,
                             "microthread_saved_cycles": self.microthread_saved},
            "sram": {"peak_bytes_per_pe": self.sram_bytes, "usable_bytes_per_pe": m.sram_bytes},
            "links": self.links.to_dict(), "colours": {"used": self.colours, "available": m.colours},
            "feasible": self.feasible, "reason": self.reason,
            "notes": list(self.notes),
        }


def sram_check(machine: Machine, need: float, what: str) -> str:
    """'' when ``need`` bytes fit a PE's usable SRAM, else the reason."""
    if need <= machine.sram_bytes:
        return ""
    return (f"{what} needs {need:,.0f} B per PE, more than the {machine.sram_bytes:,.0f} B usable "
            f"({machine.name}: pe.sram less pe.reserved_sram)")


KERNEL_FIELDS: dict[str, tuple[str, ...]] = {
    "cycles": ("cycles", "the kernel, start to finish", "§10.1"),
    "seconds": ("s", "`cycles` at the hardware's clock"),
    "kind": ("", "gemm, gemv, reduce, allreduce, broadcast or alltoall", "§10"),
    "algorithm": ("", "the schedule (`--algorithm`)", "§10.2"),
    "hardware": ("", "the hardware's name"),
    "grid_rows": ("PEs", "rows of the grid of PEs it runs on"),
    "grid_cols": ("PEs", "columns of that grid"),
    "shape_m": ("", "a GEMM's or GEMV's M (a collective: 1)", "§10.3"),
    "shape_k": ("", "K (a collective: its values per PE)", "§10.3"),
    "shape_n": ("", "N (a collective: 1)", "§10.3"),
    "wavelets": ("wavelets", "a collective's 32-bit wavelets per PE (empty for a GEMM or GEMV)", "§10.2"),
    "dtype": ("", "fp16 or fp32"),
    "flops": ("FLOP", "the useful FLOPs it computes"),
    "flops_per_s": ("FLOP/s", "`flops` / `seconds`"),
    "efficiency": ("fraction", "`flops` over the grid's peak for the time taken (0 for a collective)"),
    "flops_per_cycle_per_pe": ("FLOP/cycle", "`flops` / (`cycles` × the grid's PEs)"),
    "critical_path_instruction_issue": ("cycles", "instruction issue along the critical path (the Python "
                                        "API's `KernelResult.overhead`)", "§10.1"),
    "critical_path_compute": ("cycles", "arithmetic on the critical PE", "§10.1"),
    "critical_path_communication": ("cycles", "wavelets on ramps and links that nothing hides", "§10.1"),
    "critical_path_waiting": ("cycles", "the rest: a busy ramp's queue, a slower neighbour", "§10.1"),
    "instructions_dsd_ops": ("count", "DSD operations issued on the critical PE", "§10.1"),
    "instructions_elements_per_op": ("count", "elements each of them walks, mean", "§10.1"),
    "instructions_issue_cycles_per_op": ("cycles", "one issue (`pe.instruction_issue`)", "§10.1"),
    "instructions_microthreads": ("count", "microthreads a PE has (`pe.microthreads`)", "§10.1"),
    "instructions_microthread_saved_cycles": ("cycles", "issue cycles the microthreads hid", "§10.1"),
    "sram_peak_bytes_per_pe": ("B", "the most SRAM a PE needs"),
    "sram_usable_bytes_per_pe": ("B", "a PE's usable SRAM (`pe.sram` less `pe.reserved_sram`)"),
    "links_max_wavelets": ("wavelets", "the busiest directed link's wavelets", "§10.6"),
    "links_links_used": ("count", "directed links that carry anything", "§10.6"),
    "links_wavelet_hops": ("count", "wavelets times links, over the kernel", "§10.6"),
    "links_mean_wavelets": ("wavelets", "`links_wavelet_hops` / `links_links_used`", "§10.6"),
    "colours_used": ("count", "routable colours the schedule needs at its busiest router", "§10.6"),
    "colours_available": ("count", "colours a router has", "§10.6"),
    "feasible": ("bool", "whether it fits SRAM and the colours"),
    "reason": ("", "why not (empty when it fits; the cycles are as if it did)"),
    "notes": ("", "what the model assumed, `; `-joined"),
}
"""The columns of ``kernels.csv`` (``wsesim kernel --out``): ``KernelResult.to_dict`` flattened
(``output.run_folder.flat``), one row per run; a test checks them against a run's row. (unit, meaning[,
docs/model.md section]), as ``analysis.result_fields``'s tables."""
