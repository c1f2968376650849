"""What differs by the hardware's ``kind`` (a wafer, ``kind: hardware``; a GPU node, ``kind: gpu``), in one
table: what runs a kernel on it, what the tuner's memory model is, what a sweep's work estimate reads, and
what a command refuses on it. Everything that composes a run asks ``hardware_kind(spec.hardware)`` once
instead of testing the kind, so a new kind of hardware is one more entry here, and its training and serving
steps one entry each in the runner's table (``runner.COMPOSERS``, keyed by the spec's kind and the
hardware's)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..config.fields import parse_grid, parse_shape
from ..kernels import run_kernel
from ..kernels.gpu.registry import COMPUTE_KINDS, run_gpu_kernel
from ..model.gpu_memory import max_gpu_batch, max_gpu_tiles
from ..model.memory import max_batch_per_tile, max_tiles
from .gpu_training import gpu_batch
from .training import size_step

__all__ = ["KINDS", "HardwareKind", "hardware_kind"]


@dataclass(frozen=True)
class HardwareKind:
    """One kind of hardware as composition sees it.

    ``kernel(hw, kind, grid, shape, dtype, algorithm, values, **flags)`` simulates one kernel, ``grid`` as
    given (None: the kind's default). ``fits`` is the tuner's memory model, (largest B, largest G);
    ``baseline_batch(spec)`` the B a G = 1 run takes. ``step_seconds`` is what a sweep counts for one
    training step it cannot size (None: the work estimator's figure from the mesh); ``maps_serving``
    whether a sweep's serving point is sized by the wafer's stage mapping. ``refusals`` maps a capability
    a command needs to the one line it refuses with on this kind (``refusal``)."""

    kernel: Callable[..., Any]
    fits: tuple[Callable[..., int], Callable[..., int]]
    baseline_batch: Callable[[Any], int]
    step_seconds: float | None
    maps_serving: bool
    refusals: dict[str, str] = field(default_factory=dict)

    def refusal(self, need: str) -> str:
        """The line a command needing ``need`` refuses with on this kind ("" where it can run)."""
        return self.refusals.get(need, "")


def _wafer_kernel(hw: Any, kind: str, grid: Any, shape: Any, dtype: str, algorithm: str | None, values: int,
                  **gpu: Any) -> Any:
    """One kernel on a wafer: ``grid`` rows × columns of PEs (None: the whole mesh); a GPU kernel's own
    arguments (``gpu``) have nothing to say here."""
    rows, cols = (parse_grid(grid) if isinstance(grid, str) else grid) if grid is not None else (
        hw.mesh.rows, hw.mesh.cols)
    if isinstance(shape, str):
        shape = parse_shape(shape)
    return run_kernel(hw, kind, int(rows), int(cols), dtype=dtype, algorithm=algorithm, shape=shape,
                      wavelets=values)


def _gpu_kernel(hw: Any, kind: str, grid: Any, shape: Any, dtype: str, algorithm: str | None, values: int,
                **gpu: Any) -> Any:
    """One kernel on GPUs: ``grid`` nodes × GPUs (None: one GPU, or a node for a collective)."""
    nodes, gpus = ((parse_grid(grid) if isinstance(grid, str) else grid) if grid is not None
                   else (1, 1 if kind in COMPUTE_KINDS else hw.node.gpus))
    return run_gpu_kernel(hw, kind, int(nodes), int(gpus), dtype=dtype, algorithm=algorithm,
                          shape=parse_shape(shape) if isinstance(shape, str) else shape, values=values, **gpu)


GPU_STEP_SECONDS = 4.0
"""What a training step on a GPU node is costed for dealing points (it has no mesh to size): Qwen3-30B-A3B's
on H100 took 3.5 s on the 2-core machine (its kernels' schedules, most of it the grouped GEMMs'), LLaMA3-8B's
8 s."""

KINDS: dict[str, HardwareKind] = {
    "hardware": HardwareKind(
        kernel=_wafer_kernel, fits=(max_batch_per_tile, max_tiles),
        baseline_batch=lambda spec: size_step(spec).batch_per_tile,
        step_seconds=None, maps_serving=True),
    "gpu": HardwareKind(
        kernel=_gpu_kernel, fits=(max_gpu_batch, max_gpu_tiles),
        baseline_batch=lambda spec: gpu_batch(spec)[0], step_seconds=GPU_STEP_SECONDS, maps_serving=False,
        refusals={
            "wafer": "expected a wafer (kind: hardware), got a GPU (kind: gpu): `{command}` needs a wafer "
                     "(`wsesim run` and `sweep` train on a GPU node, `infer` serves)",
            "grid search": "expected a wafer with --search (it tries the grids that tile a wafer; on a GPU "
                           "set inference.tensor_parallel)",
        }),
}
"""Every kind of hardware by its ``kind:`` key."""


def hardware_kind(hw: Any) -> HardwareKind:
    """The table's entry for the hardware spec ``hw`` (by its ``kind``)."""
    return KINDS[hw.kind]
