"""What ``wsesim infer`` prints differently for a run on GPUs (docs/model.md §13.7): the mapping in nodes
and GPUs and the kernels' launches in place of the wafer's grid and software lines, the stage table's
node and HBM columns; the rest is the wafer's view, its figures read the same way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

__all__ = ["gpu_text"]


def gpu_mapping_text(r: Any) -> str:
    """The mapping line (and, for a run, the launches line) of a GPU run's result ``r``."""
    g = r.gpu
    nodes = f"{r.stages} node{'s' if r.stages > 1 else ''}"
    allowed = f" of {r.systems_allowed} allowed" if r.systems_allowed else ""
    shards = f"{g['kv_shards']} shard{'s' if g['kv_shards'] > 1 else ''}"
    n = g["experts_per_gpu"]  # 0 on a dense model
    experts = f", {n} expert{'s' if n > 1 else ''} a GPU" if n else ""
    what = "mapping" if r.feasible or r.refused else "mapping: none that fits; tried"
    text = (f"{what}: {nodes}{allowed} ({'a pipeline stage each, ' if r.stages > 1 else ''}tensor parallel "
            f"over {g['tensor_parallel']} of its {g['gpus_per_node']} GPUs, KV heads in {shards}"
            f"{experts}), layers per stage {r.layers_per_stage}")
    if r.feasible:
        text += (f"\nkernels: {r.decode_launches:,} a decode token, replayed as one CUDA graph in a "
                 "decode-only iteration; launched one by one in an iteration with prompt tokens")
    return text


def gpu_text(r: Any, wafer_text: Callable[[Any], str]) -> str:
    """``wafer_text``'s view of ``r`` with a GPU's mapping line and words: the mapping and software lines
    replaced, the stage table's ``wafer`` and ``SRAM per PE`` columns named ``node`` and ``HBM per GPU``."""
    lines = wafer_text(replace(r, gpu={})).split("\n")
    out = []
    for line in lines:
        if line.startswith("mapping:"):
            out.append(gpu_mapping_text(r))
        elif not line.startswith("software:"):
            if line.startswith("stage  wafer"):
                line = line.replace("stage  wafer", "stage  node ").replace("SRAM per PE", "HBM per GPU")
            out.append(line)
    return "\n".join(out)
