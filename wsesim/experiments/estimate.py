"""What a run will cost, estimated from its plan before anything is built, so that work that cannot
finish on this machine is refused up front with a line that says why and what to change.

The estimate counts what the simulation's cost scales with, from the spec alone (no mesh, no
placement, no routing is built):

* **mesh nodes** ``N`` (``rows/K × cols/K`` at ``block:K``) and **expert regions** ``R`` (at most one per
  expert and per node): the flow fabric's dispatch and combine bases are ``6·N·R`` numbers each, built
  from ``N·R`` messages a block of regions at a time: about ``BASIS_SECONDS`` seconds and, at the peak,
  ``BASIS_BYTES`` bytes per node and region (both bases, 96 of those bytes, and the message plan). They
  are built once per process: a tuner's or a sweep worker's further runs on the same wafer reuse them
  (``WorkEstimate.total_seconds``);
* **packet messages**: with a packet fabric every dispatch and combine of every layer is simulated
  message by message: about ``N·(R + 1)`` messages, each split into ``K`` stripes that are granted each
  link on their route in turn (``(rows/K + cols/K)/3 + 2`` links on average): ``PACKET_GRANT[fabric]``
  seconds and bytes per grant, far more for the SimPy ``packet-simpy`` than for the vectorised
  ``packet`` (a fidelity not in ``PACKET_GRANT`` is costed as flow is, by its bases);
* **expert chunks**: the engine schedules every expert's weights in every layer: about
  ``ENGINE_SECONDS[engine]`` per (layer × expert) and run (an engine not in it at the slowest one's).

The constants are fitted to runs measured on this project's machine (the README's Performance section
lists them); the estimate is good to a factor of about two, which is enough to tell minutes from days. A
dense model (no experts) has no regions, dispatch or expert chunks: only its mesh counts. A run is
refused when its memory exceeds ``MEMORY_FRACTION`` of this machine's (or its container's) memory, or its
time ``max_run_seconds()`` (``WSESIM_MAX_RUN_S``, default 30 minutes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..config.errors import ConfigError
from ..config.specs import ExperimentSpec

BASE_BYTES = 250e6               # the interpreter, numpy, SimPy and the model's own arrays
BASIS_BYTES = 220.0             # peak per (mesh node × expert region), both bases and the plan
BASIS_SECONDS = 1.2e-6           # per (mesh node × expert region) to build both bases
PACKET_GRANT = {"packet": (0.11e-6, 6.0), "packet-simpy": (8e-6, 40.0)}  # (seconds, peak bytes) per link grant
ENGINE_SECONDS = {"fast": 15e-6, "reference": 2.5e-4}  # per (layer × expert) and run
MEMORY_FRACTION = 0.8
DEFAULT_MAX_RUN_SECONDS = 1800.0


@dataclass(frozen=True)
class WorkEstimate:
    """The counts a run's cost follows, and the seconds and bytes they come to (one run)."""

    mesh_nodes: int
    regions: int
    layers: int
    experts: int
    packet_messages: int  # per dispatch (0 with the flow fabric)
    packet_events: float  # over the whole step
    seconds: float  # one run, the bases included
    bytes: float
    driver: str  # what dominates: "mesh", "packet" or "experts"
    setup_seconds: float = 0.0  # of ``seconds``: the bases, built once per process

    def total_seconds(self, runs: int = 1) -> float:
        """``runs`` runs on the same wafer in one process (a tuner's candidates): the bases once."""
        return self.setup_seconds + runs * (self.seconds - self.setup_seconds)

    def describe(self, runs: int = 1) -> str:
        counts = f"{self.mesh_nodes:,} mesh nodes × {self.regions:,} expert regions"
        if self.packet_messages:
            counts += (f", {self.packet_messages:,} packet messages per dispatch × {2 * self.layers} dispatches "
                       f"≈ {self.packet_events:.2g} events")
        counts += f", {self.layers} layers × {self.experts:,} experts of weight chunks"
        runs_text = f" for {runs} runs" if runs > 1 else ""
        return f"about {_duration(self.total_seconds(runs))} and {_size(self.bytes)}{runs_text} ({counts})"


def estimate_work(spec: ExperimentSpec) -> WorkEstimate:
    """The cost of simulating one step of ``spec``, from its counts alone (see the module docstring)."""
    hw, m, sim = spec.hardware, spec.model, spec.simulation
    k = sim.block
    rows, cols = -(-hw.mesh.rows // k), -(-hw.mesh.cols // k)
    nodes = rows * cols
    regions = min(m.experts, nodes)  # 0 for a dense model
    basis_s = BASIS_SECONDS * nodes * regions
    engine_s = ENGINE_SECONDS.get(getattr(sim, "engine", "fast"), max(ENGINE_SECONDS.values())) * m.layers * m.experts
    basis_bytes = BASIS_BYTES * nodes * regions
    nbytes = BASE_BYTES + basis_bytes
    messages, events, packet_s = 0, 0.0, 0.0
    if sim.fabric in PACKET_GRANT and regions:
        messages = nodes * (regions + 1)  # one per (source, region) and one per region node
        stripes = k
        events = 2.0 * m.layers * messages * stripes * ((rows + cols) / 3 + 2)
        per_s, per_bytes = PACKET_GRANT[sim.fabric]
        packet_s = per_s * events
        nbytes += per_bytes * events / (2 * m.layers)  # one dispatch at a time
        basis_s = 0.0  # a packet fabric builds no basis ...
        nbytes -= basis_bytes  # ... and keeps none
    seconds = basis_s + engine_s + packet_s
    driver = max((("mesh", basis_s), ("packet", packet_s), ("experts", engine_s)), key=lambda kv: kv[1])[0]
    return WorkEstimate(nodes, regions, m.layers, m.experts, messages, events, seconds, nbytes, driver, basis_s)


def check_work(spec: ExperimentSpec, *, runs: int = 1) -> WorkEstimate:
    """``estimate_work(spec)``, or ``ConfigError`` (one line: the estimate, the limit, what to change) when
    ``runs`` such runs (the tuner's candidates) cannot finish on this machine."""
    estimate = estimate_work(spec)
    memory, limit_s = machine_memory(), max_run_seconds()
    too_big = estimate.bytes > MEMORY_FRACTION * memory
    too_long = estimate.total_seconds(runs) > limit_s
    if not (too_big or too_long):
        return estimate
    why = (f"needs more memory than this machine has ({_size(memory)})" if too_big
           else f"would run longer than {_duration(limit_s)} (WSESIM_MAX_RUN_S)")
    raise ConfigError(f"this run cannot finish here: it {why}: {estimate.describe(runs)}; "
                      f"{_advice(spec, estimate, too_big)}")


def _advice(spec: ExperimentSpec, e: WorkEstimate, too_big: bool) -> str:
    if e.driver == "packet":
        return ("use simulation.fabric: flow (packet timing is for small meshes and single patterns: "
                "wsesim fabric), or a much smaller wafer")
    if e.driver == "mesh" or (too_big and e.mesh_nodes > e.experts):
        k = spec.simulation.block
        return (f"use a coarser simulation.granularity (block:{max(16, 2 * k)} or more; "
                f"now {spec.simulation.granularity}) or a smaller mesh")
    return "use fewer experts, or set WSESIM_MAX_RUN_S to a larger limit in seconds to run it anyway"


def max_run_seconds() -> float:
    """The longest estimated run allowed: ``WSESIM_MAX_RUN_S`` (seconds), else 30 minutes."""
    text = os.environ.get("WSESIM_MAX_RUN_S", "").strip()
    if not text:
        return DEFAULT_MAX_RUN_SECONDS
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"expected a number of seconds, got {text!r}", source="WSESIM_MAX_RUN_S") from None
    if not value > 0:
        raise ConfigError(f"expected a positive number of seconds, got {text!r}", source="WSESIM_MAX_RUN_S")
    return value


def machine_memory() -> float:
    """Bytes of memory this process may use: physical memory, or the container's limit if lower."""
    try:
        memory = float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        memory = 16 * 2.0**30
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < memory:
            memory = float(text)
    return memory


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.0f} hours"
    days = seconds / 86400
    return f"{days:,.0f} days" if days < 1e6 else f"{days:.1e} days"


def _size(nbytes: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if nbytes >= scale or unit == "MB":
            value = nbytes / scale
            return f"{value:,.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    return ""  # unreachable


__all__ = ["WorkEstimate", "check_work", "estimate_work", "machine_memory", "max_run_seconds"]
