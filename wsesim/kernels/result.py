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
    overhead: float = 0.0  # instruction issue on the critical path (``pe.instruction_issue`` each)
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
            "critical_path": {"instruction_overhead": self.overhead, "compute": self.compute,
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
