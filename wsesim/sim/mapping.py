"""Where a served model lives (docs/model.md §11.1): pipeline stages, each a rectangle of PEs holding
consecutive layers, laid out on one or more wafers.

A wafer of R × C PEs holds ⌊R/P⌋ · ⌊C/Q⌋ grids of P × Q PEs, filled row by row, then the next wafer.
Stage i takes grid i. Layers are assigned in order, each stage taking as many as its SRAM holds
(``model.serving.stage_memory``: weights, the KV cache of every request at the run's longest context,
activations) unless ``inference.layers_per_stage`` says how many; the first stage also holds the
embedding table, the last the LM head. ``grid: auto`` takes the largest square grid (a whole number of
them across the wafer's shorter side) whose stages fit on the wafers allowed; ``systems: auto`` as few
wafers as the mapping needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.inference import InferenceExperimentSpec
from ..model.serving import StageMemory, layer_weight_bytes, stage_memory
from ..model.shapes import LayerShapes

__all__ = ["Mapping", "Stage", "grid_candidates", "map_stages"]

MAX_AUTO_SYSTEMS = 64
"""``systems: auto`` looks for a mapping on at most this many wafers."""


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: its grid (``rows`` × ``cols`` PEs at ``origin`` on wafer ``wafer``), its
    layers, whether it holds the embedding table and the LM head, and its SRAM per PE."""

    index: int
    wafer: int
    origin: tuple[int, int]
    rows: int
    cols: int
    layers: tuple[int, ...]
    embedding: bool
    lm_head: bool
    memory: StageMemory


@dataclass(frozen=True)
class Mapping:
    """The stages of a served model, or why it does not fit (``reason``)."""

    grid: tuple[int, int]
    stages: tuple[Stage, ...]
    systems: int
    grids_per_wafer: int
    reason: str = ""

    @property
    def feasible(self) -> bool:
        return not self.reason


def grid_candidates(rows: int, cols: int) -> list[tuple[int, int]]:
    """Square grids from the largest down: ⌊min(R, C) / k⌋ on a side for k = 1, 2, … (no side below 8)."""
    side, out = min(rows, cols), []
    for k in range(1, side // 8 + 1):
        p = side // k
        if not out or out[-1][0] != p:
            out.append((p, p))
    return out


def _slots(spec: InferenceExperimentSpec, grid: tuple[int, int]) -> int:
    mesh = spec.hardware.mesh
    return (mesh.rows // grid[0]) * (mesh.cols // grid[1])


def _assign(spec: InferenceExperimentSpec, grid: tuple[int, int], limit: int) -> tuple[list[list[int]], str]:
    """Layers per stage (at most ``limit`` stages), or why they do not fit."""
    m, inf, hw = spec.model, spec.inference, spec.hardware
    s = LayerShapes(m)
    emb, head = s.embedding_params * m.bytes_per_value, s.lm_head_params * m.bytes_per_value
    fixed = inf.layers_per_stage

    def memory(layers: list[int], first: bool, last: bool) -> StageMemory:
        weights = (sum(layer_weight_bytes(m, i) for i in layers) + (emb if first else 0)
                   + (head if last else 0))
        return stage_memory(m, weights, len(layers), grid[0], grid[1], hw.usable_sram_bytes_per_pe,
                            inf.prompt_len, inf.output_len, inf.batch, inf.kv_layout)

    stages: list[list[int]] = []
    layer = 0
    while layer < m.layers:
        if len(stages) >= limit:
            held = sum(len(x) for x in stages)
            wafers = -(-limit // max(_slots(spec, grid), 1))
            return stages, (f"the weights do not fit {wafers} wafer{'s' if wafers > 1 else ''} at "
                            f"{grid[0]}x{grid[1]} PEs per stage: "
                            f"{limit} stage{'s hold' if limit > 1 else ' holds'} {held} of {m.layers} "
                            f"layers; set inference.systems higher (or auto), or a smaller grid")
        first, take = not stages, []
        while layer < m.layers and (fixed == "auto" or len(take) < fixed):
            trial = [*take, layer]
            if fixed == "auto" and not memory(trial, first, trial[-1] == m.layers - 1).fits:
                break
            take, layer = trial, layer + 1
        if not take:
            need = memory([layer], first, layer == m.layers - 1)
            return stages, (f"layer {layer} alone needs {need.total:,.0f} B per PE on a {grid[0]}x{grid[1]} "
                            f"grid (weights {need.weights:,.0f}, KV cache {need.kv_cache:,.0f}, activations "
                            f"{need.activations:,.0f}) but {need.usable:,.0f} B are usable: a layer, all its "
                            "experts included, must fit one stage's grid")
        stages.append(take)
    return stages, ""


def _build(spec: InferenceExperimentSpec, grid: tuple[int, int], systems: int | None) -> Mapping:
    """The mapping at ``grid`` on ``systems`` wafers (None: as few as it needs)."""
    m, inf, hw = spec.model, spec.inference, spec.hardware
    per_wafer = _slots(spec, grid)
    if per_wafer == 0:
        return Mapping(grid, (), systems or 1, 0, f"a {grid[0]}x{grid[1]} grid does not fit the mesh")
    limit = per_wafer * (systems or MAX_AUTO_SYSTEMS)
    layers, reason = _assign(spec, grid, limit)
    used = -(-max(len(layers), 1) // per_wafer)
    if not reason and used > 1 and inf.interconnect is None:
        reason = (f"needs {used} wafers at {grid[0]}x{grid[1]} PEs per stage: set inference.interconnect "
                  "(e.g. swarmx) for the links between them, or a grid that fits one wafer")
    s = LayerShapes(m)
    across = hw.mesh.cols // grid[1]
    stages = []
    for i, take in enumerate(layers):
        wafer, slot = divmod(i, per_wafer)
        origin = ((slot // across) * grid[0], (slot % across) * grid[1])
        first, last = i == 0, take[-1] == m.layers - 1
        weights = (sum(layer_weight_bytes(m, j) for j in take) + (s.embedding_params if first else 0)
                   * m.bytes_per_value + (s.lm_head_params * m.bytes_per_value if last else 0))
        mem = stage_memory(m, weights, len(take), grid[0], grid[1], hw.usable_sram_bytes_per_pe,
                           inf.prompt_len, inf.output_len, inf.batch, inf.kv_layout)
        if not reason and not mem.fits:
            reason = (f"stage {i} ({len(take)} layers) needs {mem.total:,.0f} B per PE but {mem.usable:,.0f} "
                      f"B are usable (KV cache {mem.kv_cache:,.0f} B: the longest output that fits is "
                      f"{mem.max_output})")
        stages.append(Stage(i, wafer, origin, grid[0], grid[1], tuple(take), first, last, mem))
    return Mapping(grid, tuple(stages), systems or used, per_wafer, reason)


def map_stages(spec: InferenceExperimentSpec) -> Mapping:
    """The mapping ``spec.inference`` asks for, or with ``grid: auto`` the largest square grid that fits
    (the first candidate's reason when none does)."""
    inf = spec.inference
    systems = None if inf.systems == "auto" else int(inf.systems)
    if inf.grid_shape is not None:
        return _build(spec, inf.grid_shape, systems)
    candidates = grid_candidates(spec.hardware.mesh.rows, spec.hardware.mesh.cols)
    tried = [_build(spec, grid, systems if systems else 1) for grid in candidates]
    for mapping in tried:
        if mapping.feasible:
            return mapping
    if systems is None:  # more wafers: the largest grid that fits on the fewest
        spread = [_build(spec, grid, None) for grid in candidates]
        fits = [mp for mp in spread if mp.feasible]
        if fits:
            return min(fits, key=lambda mp: (mp.systems, -mp.grid[0]))
    return tried[0]
