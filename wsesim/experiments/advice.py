"""What to change when a configuration fits at no (G, B): the memory model's binding phase at the
smallest candidate (G=1, B=1), its largest part, and the keys that shrink it (pure: text out).

Each suggestion is an override (``training.attention_kernel=flash``) with why; the command line shows
them as ``--set`` options. The SRAM a PE would need is always among them, worked out from the parts that
do not scale with the SRAM (the reserved share does).
"""

from __future__ import annotations

import math

from ..config.specs import ExperimentSpec
from ..model.memory import training_memory

_BY_PART = {
    "attention_transient": [("training.attention_kernel=flash", "no S×S score matrices per tile")],
    "attention_recompute": [("training.attention_recompute=once",
                             "keep attention's output instead of re-running it")],
    "stored_activations": [("training.activations=recompute", "keep each layer's input only")],
    "resident_weights": [("hardware.mesh.rows/cols", "a larger wafer spreads the resident weights thinner")],
    "lm_head_weights": [("hardware.mesh.rows/cols", "a larger wafer spreads the LM head thinner")],
    "staging": [("hardware.runtime.staging_buffer", "a smaller staging buffer (slower weight streaming)")],
    "reserved": [("hardware.pe.reserved_sram", "less SRAM kept by the runtime")],
}
_SHORTER = "fewer tokens per sequence: every transient and stored part shrinks"


def no_fit_advice(spec: ExperimentSpec) -> tuple[str, list[tuple[str, str]]]:
    """Why even G=1, B=1 does not fit (phase, bytes, capacity) and the overrides that would help, most
    direct first."""
    hw, m, t = spec.hardware, spec.model, spec.training
    memory = training_memory(hw, m, t, batch_per_tile=1, tiles=1)
    phase = memory.binding
    part = max(phase.components, key=lambda c: phase.components[c])
    if memory.feasible:
        return "G=1, B=1 fits the memory model, but the routed load or the I/O buffers do not", [
            ("training.routing=uniform", "a balanced load: no region holds more than its share")]
    out = list(_BY_PART.get(part, []))
    if part == "stored_activations" and t.activations != "store":
        out = []
    if part in ("attention_transient", "attention_recompute", "stored_activations", "expert_transient",
                "expert_recompute", "ffn_transient", "ffn_recompute", "lm_head_transient",
                "concat_buffer") and (seq_len := _longest_fitting_seq_len(spec)):
        out.append((f"training.seq_len={seq_len}", f"the longest sequence that fits at G=1, B=1; {_SHORTER}"))
    reserved = phase.components.get("reserved", 0)
    need = (phase.total - reserved) / max(1e-9, 1 - hw.pe.reserved_fraction)
    out.append((f"hardware.pe.sram={_size_up(need)}", "the least SRAM per PE that holds this phase"))
    why = (f"even G=1, B=1 needs {phase.total:,} B per PE in phase {phase.phase} (largest part: {part}, "
           f"{phase.components[part]:,} B), but {memory.capacity_bytes_per_pe:,} B are available")
    return why, out


def _longest_fitting_seq_len(spec: ExperimentSpec) -> int:
    """The longest ``training.seq_len`` at which G=1, B=1 fits (0: not even one token)."""
    hw, m, t = spec.hardware, spec.model, spec.training

    def fits(n: int) -> bool:
        return training_memory(hw, m, t.model_copy(update={"seq_len": n}), batch_per_tile=1, tiles=1).feasible

    low, high = 0, t.seq_len  # fits(low) (or low = 0), not fits(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def _size_up(nbytes: float) -> str:
    """A size at least ``nbytes``, in the largest binary unit that keeps it a whole number above 9."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= 10 * scale:
            return f"{math.ceil(nbytes / scale)} {unit}"
    return f"{math.ceil(nbytes)} B"
