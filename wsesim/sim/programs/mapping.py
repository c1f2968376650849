"""Where a served model lives (docs/model.md §11.1, which gives each rule with its reason): pipeline
stages, each a rectangle of PEs holding consecutive layers, laid out on one or more wafers.

A wafer of R × C PEs holds ⌊R/P⌋ · ⌊C/Q⌋ grids of P × Q PEs, filled row by row, then the next wafer;
stage i takes grid i. Layers go in order, each stage taking as many as its SRAM holds
(``model.serving.stage_memory``) unless ``inference.layers_per_stage`` says; the last stage holds the LM
head; the embedding table, a lookup, goes where SRAM is spare (``place_table``). ``grid: auto`` tries
every grid that tiles the wafer (``grid_candidates``) and keeps the best by ``rank``; ``systems: auto``
as few wafers as the mapping needs (at most ``MAX_AUTO_SYSTEMS``). With expert parallelism
(``inference.moe.expert_grids``, §11.8) a stage of MoE layers spans G grids, its first holding the
layers' attention, router, shared expert, KV cache and ⌈E/G⌉ experts of each layer, the others the rest
of the experts; ``expert_grids: auto`` tries G in ``EXPERT_GRIDS`` beside every grid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...model.serving import StageMemory, experts_per_grid, layer_weight_bytes, stage_memory
from ...model.shapes import LayerShapes

if TYPE_CHECKING:
    from ...config.inference import InferenceExperimentSpec

__all__ = ["Mapping", "Stage", "candidate_mappings", "grid_candidates", "map_stages", "pe_use", "place_table",
           "rank", "square_candidates"]

EXPERT_GRIDS = (1, 2, 3, 4, 6, 8, 12, 16)
"""``expert_grids: auto`` tries these G (at most the layer's experts)."""
MAX_AUTO_SYSTEMS = 64
"""``systems: auto`` looks for a mapping on at most this many wafers."""
MIN_SIDE = 8
"""No candidate grid has a side below this many PEs (unless the mesh itself has)."""
MAX_ASPECT = 2
"""A candidate's longer side is at most this many times its shorter: a kernel's broadcast and reduce
lines run along the longer side, so a strip pays the long line for little extra SRAM."""
SQUARE_GEMMS = ("cannon", "meshgemm")
"""Prefill GEMMs that need P = Q (kernels/gemm.py): with these, ``grid: auto`` tries squares only."""


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: its grid (``rows`` × ``cols`` PEs at ``origin`` on wafer ``wafer``), its
    layers, whether it holds (a share of) the embedding table and the LM head, and its SRAM per PE (its
    first grid's); ``embedding_bytes`` is how much of the table it holds. ``expert_grids`` are the
    (wafer, origin) of the further grids its MoE layers' experts are spread over (expert parallelism)."""

    index: int
    wafer: int
    origin: tuple[int, int]
    rows: int
    cols: int
    layers: tuple[int, ...]
    embedding: bool
    lm_head: bool
    memory: StageMemory
    embedding_bytes: float = 0.0
    expert_grids: tuple[tuple[int, tuple[int, int]], ...] = ()

    @property
    def grids(self) -> int:
        """The grids the stage spans: its own and its experts' further ones."""
        return 1 + len(self.expert_grids)


@dataclass(frozen=True)
class Mapping:
    """The stages of a served model, or why it does not fit (``reason``). ``systems`` is the wafers the
    stages use, ``allowed`` the wafers ``inference.systems`` allows (None: auto); ``expert_grids`` the
    grids each stage of MoE layers spans (G)."""

    grid: tuple[int, int]
    stages: tuple[Stage, ...]
    systems: int
    grids_per_wafer: int
    reason: str = ""
    allowed: int | None = None
    expert_grids: int = 1

    @property
    def feasible(self) -> bool:
        return not self.reason

    @property
    def grids_used(self) -> int:
        return sum(stage.grids for stage in self.stages)


def square_candidates(rows: int, cols: int) -> list[tuple[int, int]]:
    """Square grids from the largest down: ⌊min(R, C) / k⌋ on a side for k = 1, 2, … (no side below 8);
    a mesh whose shorter side is below 8 has one, min(R, C) on a side."""
    side, out = min(rows, cols), []
    for k in range(1, side // MIN_SIDE + 1):
        p = side // k
        if not out or out[-1][0] != p:
            out.append((p, p))
    return out or [(side, side)]


def grid_candidates(rows: int, cols: int) -> list[tuple[int, int]]:
    """Grids that tile an R × C mesh: P × Q = ⌊R/a⌋ × ⌊C/b⌋ for a, b = 1, 2, … (a whole number of
    grids across each side), no side below 8, max(P, Q) ≤ 2 · min(P, Q); each once, the largest P·Q
    first, then the squarest (smallest max/min), then the most rows. A mesh with a side below 8 has one
    candidate, the whole mesh."""
    if rows < MIN_SIDE or cols < MIN_SIDE:
        return [(rows, cols)]
    grids = {(rows // a, cols // b) for a in range(1, rows // MIN_SIDE + 1)
             for b in range(1, cols // MIN_SIDE + 1)}
    kept = [(p, q) for p, q in grids if max(p, q) <= MAX_ASPECT * min(p, q)]
    return sorted(kept, key=lambda g: (-g[0] * g[1], max(g) / min(g), -g[0]))


def pe_use(mapping: Mapping, rows: int, cols: int) -> float:
    """The share of the used wafers' PEs in stages' grids: grids · P · Q / (W · R · C)."""
    p, q = mapping.grid
    return mapping.grids_used * p * q / (max(mapping.systems, 1) * rows * cols)


def rank(mapping: Mapping, rows: int, cols: int) -> tuple[float, ...]:
    """``grid: auto``'s order, smallest first: (wafers W, −PE use, −P·Q, max(P, Q)/min(P, Q), −P, G)."""
    p, q = mapping.grid
    return (mapping.systems, -pe_use(mapping, rows, cols), -p * q, max(p, q) / max(min(p, q), 1), -p,
            mapping.expert_grids)


def place_table(spares: list[float], table: float) -> list[float] | None:
    """Bytes of a table of ``table`` bytes each stage holds, given each stage's spare SRAM (bytes over
    its grid): all of it on the stage with the most spare when it fits there (the first such: nearest
    where a token enters); else spread so the stages left with the most spare give it up first, down to
    one level t: stage i holds max(spare_i − t, 0), with Σ = ``table`` (the least spare left is then
    as large as it can be); None when the spares together are short of it."""
    shares = [0.0] * len(spares)
    if not spares or table <= 0:
        return shares
    best = max(range(len(spares)), key=lambda i: (spares[i], -i))
    if spares[best] >= table:
        shares[best] = table
        return shares
    room = [max(x, 0.0) for x in spares]
    if sum(room) < table:
        return None
    ordered, level = sorted(room, reverse=True), 0.0
    for k in range(1, len(ordered) + 1):  # the k largest give down to t = (Σ top k − table) / k
        level = (sum(ordered[:k]) - table) / k
        if k == len(ordered) or level >= ordered[k]:
            break
    return [max(x - level, 0.0) for x in room]


def _slots(spec: InferenceExperimentSpec, grid: tuple[int, int]) -> int:
    mesh = spec.hardware.mesh
    return (mesh.rows // grid[0]) * (mesh.cols // grid[1])


def _memory_of(spec: InferenceExperimentSpec, grid: tuple[int, int]) -> Callable[[int, float], StageMemory]:
    m, inf, hw = spec.model, spec.inference, spec.hardware

    def memory(layers: int, weights: float) -> StageMemory:
        return stage_memory(m, weights, layers, grid[0], grid[1], hw.usable_sram_bytes_per_pe,
                            inf.load.prompt_len, inf.load.output_len, inf.scheduler.batch, inf.kv_layout)
    return memory


def _grids_of(spec: InferenceExperimentSpec, layer: int, expert_grids: int) -> int:
    """The grids a stage starting at ``layer`` spans: G from an MoE layer on, one for dense layers."""
    return 1 if spec.model.is_dense(layer) else expert_grids


def _greedy(spec: InferenceExperimentSpec, grid: tuple[int, int], limit: int, layer_bytes: list[float],
            head: float, first_extra: float, expert_grids: int = 1) -> tuple[list[list[int]], str]:
    """Layers per stage (stages on at most ``limit`` grids), the first stage carrying ``first_extra``
    bytes more and the last the LM head's ``head``, or why they do not fit. A stage of dense layers
    spanning one grid stops at the first MoE layer when MoE stages span more (``expert_grids``)."""
    fixed, n = spec.inference.layers_per_stage, spec.model.layers
    memory = _memory_of(spec, grid)
    stages: list[list[int]] = []
    layer = slots = 0
    while layer < n:
        if slots + _grids_of(spec, layer, expert_grids) > limit:
            return stages, _overflow(spec, grid, limit, sum(len(x) for x in stages), expert_grids)
        span = _grids_of(spec, layer, expert_grids)
        take: list[int] = []
        weights = first_extra if not stages else 0.0
        while layer < n and (fixed == "auto" or len(take) < fixed) and (
                not take or _grids_of(spec, layer, expert_grids) == span):
            trial = weights + layer_bytes[layer] + (head if layer == n - 1 else 0.0)
            if fixed == "auto" and not memory(len(take) + 1, trial).fits:
                break
            take, weights, layer = [*take, layer], weights + layer_bytes[layer], layer + 1
        if not take:
            need = memory(1, weights + layer_bytes[layer] + (head if layer == n - 1 else 0.0))
            return stages, (f"layer {layer} alone needs {need.total:,.0f} B per PE on a {grid[0]}x{grid[1]} "
                            f"grid (weights {need.weights:,.0f}, KV cache {need.kv_cache:,.0f}, activations "
                            f"{need.activations:,.0f}) but {need.usable:,.0f} B are usable: "
                            + _too_big(spec, layer, expert_grids))
        stages.append(take)
        slots += span
    return stages, ""


def _too_big(spec: InferenceExperimentSpec, layer: int, expert_grids: int) -> str:
    """What must fit one grid, and for an MoE layer the way out."""
    if spec.model.is_dense(layer):
        return "a layer, all its experts included, must fit one stage's grid"
    if expert_grids == 1:
        return ("a layer, all its experts included, must fit one stage's grid: spread its experts over "
                "more grids (inference.moe.expert_grids)")
    share = experts_per_grid(spec.model.experts, expert_grids)
    return (f"a layer's attention and its {share} experts on the stage's first grid (of {expert_grids}) "
            "must fit it: more grids (inference.moe.expert_grids), or a larger grid")


def _overflow(spec: InferenceExperimentSpec, grid: tuple[int, int], limit: int, held: int,
              expert_grids: int = 1) -> str:
    """Why ``limit`` grids at ``grid`` do not hold the model: with ``systems: N`` raise N; with auto
    the limit is ``MAX_AUTO_SYSTEMS``, so a smaller grid or fewer layers are the ways out."""
    n, per_wafer = spec.model.layers, max(_slots(spec, grid), 1)
    wafers = -(-limit // per_wafer)
    what = "stage" if expert_grids == 1 else f"grid (experts over {expert_grids} grids a stage)"
    plural = "stages" if expert_grids == 1 else f"grids (experts over {expert_grids} grids a stage)"
    head = (f"the weights do not fit {wafers} wafer{'s' if wafers > 1 else ''} at {grid[0]}x{grid[1]} PEs "
            f"per stage: {limit} {plural + ' hold' if limit > 1 else what + ' holds'} {held} of {n} layers; ")
    if spec.inference.systems == "auto":
        return head + f"systems: auto tries at most {MAX_AUTO_SYSTEMS} wafers: a smaller grid, or a model"
    return head + "set inference.systems higher (or auto), or a smaller grid"


def _assign(spec: InferenceExperimentSpec, grid: tuple[int, int], limit: int,
            expert_grids: int = 1) -> tuple[list[list[int]], list[float], str]:
    """Layers per stage, the embedding table's bytes on each stage (``place_table`` over the spares a
    table-free assignment leaves; failing that, on the first stage, which then takes fewer layers), or
    why they do not fit."""
    m = spec.model
    s = LayerShapes(m)
    layer_bytes = [layer_weight_bytes(m, i, expert_grids) for i in range(m.layers)]
    tied = s.lm_head_params == 0
    table = s.embedding_params * m.bytes_per_value
    head = table if tied else s.lm_head_params * m.bytes_per_value
    layers, reason = _greedy(spec, grid, limit, layer_bytes, head, 0.0, expert_grids)
    if reason or tied:
        return layers, [0.0] * len(layers), reason
    memory, pes = _memory_of(spec, grid), grid[0] * grid[1]
    spares = []
    for i, take in enumerate(layers):
        mem = memory(len(take), sum(layer_bytes[j] for j in take) + (head if i == len(layers) - 1 else 0.0))
        spares.append((mem.usable - mem.total) * pes)
    shares = place_table(spares, table)
    if shares is not None:
        return layers, shares, ""
    layers, reason = _greedy(spec, grid, limit, layer_bytes, head, table, expert_grids)
    return layers, [table] + [0.0] * (len(layers) - 1), reason


def _build(spec: InferenceExperimentSpec, grid: tuple[int, int], systems: int | None,
           expert_grids: int = 1) -> Mapping:
    """The mapping at ``grid`` on at most ``systems`` wafers (None: as few as it needs), each stage of
    MoE layers spanning ``expert_grids`` grids."""
    m, inf, hw = spec.model, spec.inference, spec.hardware
    per_wafer = _slots(spec, grid)
    if per_wafer == 0:
        return Mapping(grid, (), 1, 0, f"a {grid[0]}x{grid[1]} grid does not fit the mesh", systems,
                       expert_grids)
    limit = per_wafer * (systems or MAX_AUTO_SYSTEMS)
    layers, shares, reason = _assign(spec, grid, limit, expert_grids)
    spans = [_grids_of(spec, take[0], expert_grids) for take in layers]
    used = -(-max(sum(spans), 1) // per_wafer)
    if not reason and used > 1 and inf.interconnect is None:
        reason = (f"needs {used} wafers at {grid[0]}x{grid[1]} PEs per stage: set inference.interconnect "
                  "(e.g. swarmx) for the links between them, or a grid that fits one wafer")
    s = LayerShapes(m)
    tied = s.lm_head_params == 0
    head = (s.embedding_params if tied else s.lm_head_params) * m.bytes_per_value
    memory = _memory_of(spec, grid)
    across = hw.mesh.cols // grid[1]

    def place(slot: int) -> tuple[int, tuple[int, int]]:
        wafer, slot = divmod(slot, per_wafer)
        return wafer, ((slot // across) * grid[0], (slot % across) * grid[1])

    stages, first_slot = [], 0
    for i, take in enumerate(layers):
        wafer, origin = place(first_slot)
        further = tuple(place(first_slot + g) for g in range(1, spans[i]))
        first_slot += spans[i]
        last = take[-1] == m.layers - 1
        weights = (sum(layer_weight_bytes(m, j, expert_grids) for j in take) + shares[i]
                   + (head if last else 0.0))
        mem = memory(len(take), weights)
        if not reason and not mem.fits:
            reason = (f"stage {i} ({len(take)} layers) needs {mem.total:,.0f} B per PE but {mem.usable:,.0f} "
                      f"B are usable (KV cache {mem.kv_cache:,.0f} B: the longest output that fits is "
                      f"{mem.max_output})")
        stages.append(Stage(i, wafer, origin, grid[0], grid[1], tuple(take), shares[i] > 0 or (tied and last),
                            last, mem, shares[i] or (head if tied and last else 0.0), further))
    return Mapping(grid, tuple(stages), used, per_wafer, reason, systems, expert_grids)


def _expert_grid_options(spec: InferenceExperimentSpec) -> tuple[int, ...]:
    """The G a mapping tries: ``inference.moe.expert_grids``, or with auto every ``EXPERT_GRIDS`` up to the
    model's experts (1 for a dense model)."""
    chosen, experts = spec.inference.moe.expert_grids, spec.model.experts
    if chosen != "auto":
        return (int(chosen),)
    return tuple(g for g in EXPERT_GRIDS if g == 1 or g <= experts)


def _at_grid(spec: InferenceExperimentSpec, grid: tuple[int, int], systems: int | None) -> list[Mapping]:
    """The mapping at ``grid`` for each G ``_expert_grid_options`` gives."""
    return [_build(spec, grid, systems, g) for g in _expert_grid_options(spec)]


def _candidates(spec: InferenceExperimentSpec) -> list[tuple[int, int]]:
    """``grid_candidates``, or ``square_candidates`` when the prefill GEMM needs square grids."""
    mesh = spec.hardware.mesh
    if spec.inference.gemm in SQUARE_GEMMS:
        return square_candidates(mesh.rows, mesh.cols)
    return grid_candidates(mesh.rows, mesh.cols)


def candidate_mappings(spec: InferenceExperimentSpec) -> list[Mapping]:
    """The mapping at every candidate grid, in candidate order, on the wafers ``inference.systems``
    allows (auto: as few as each needs)."""
    inf = spec.inference
    systems = None if inf.systems == "auto" else int(inf.systems)
    return [mp for grid in _candidates(spec) for mp in _at_grid(spec, grid, systems)]


def map_stages(spec: InferenceExperimentSpec) -> Mapping:
    """The mapping ``spec.inference`` asks for, or with ``grid: auto`` the best candidate by ``rank``
    that fits (the first candidate's reason when none does)."""
    inf, mesh = spec.inference, spec.hardware.mesh
    if inf.grid_shape is not None:
        tried = _at_grid(spec, inf.grid_shape, None if inf.systems == "auto" else int(inf.systems))
    else:
        tried = candidate_mappings(spec)
    fits = [mp for mp in tried if mp.feasible]
    if fits:
        return min(fits, key=lambda mp: rank(mp, mesh.rows, mesh.cols))
    return tried[0]
