"""NCCL's collectives over a node's NVLink and the network between nodes (docs/model.md §13.4, which
tabulates each one's steps and bytes).

``nodes × gpus`` GPUs, each holding ``nbytes`` (an all-reduce's buffer, an all-gather's output, a
reduce-scatter's input, an all-to-all's send buffer). Each collective is alpha-beta: its steps, each
paying the latency of the link it crosses (as NCCL's own tuning model counts them), and the bytes a GPU
sends over the slowest link it uses — NVLink inside one node, the GPU's NIC once the ring leaves it; an
all-to-all's two shares go side by side. NCCL's protocol overhead is not modelled: large collectives
here run at the links' line rate.
"""

from __future__ import annotations

import math

from ...config.errors import ConfigError
from .device import Gpu, GpuKernelResult

__all__ = ["COLLECTIVE_ALGORITHMS", "collective"]

COLLECTIVE_ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring", "tree"), "allgather": ("ring",), "reducescatter": ("ring",),
    "alltoall": ("direct",), "broadcast": ("ring",)}
"""Each collective's algorithms, NCCL's default first."""


def _bus(gpu: Gpu, nodes: int, gpus: int) -> float:
    """The bus bandwidth of a ring or tree: NVLink in one node; across nodes, NVLink or the node's NICs,
    whichever is slower — NCCL runs one ring per NIC, so the node's ``gpus`` NICs carry the crossing
    traffic side by side (each ring crosses a node's boundary on one NIC)."""
    if nodes == 1:
        return gpu.nvlink_bytes_per_s
    return min(gpu.nvlink_bytes_per_s, gpus * gpu.network_bytes_per_s)


def collective(gpu: Gpu, kind: str, nodes: int, gpus: int, nbytes: float, algorithm: str = "", *,
               graphs: bool = False) -> GpuKernelResult:
    """``kind`` over ``nodes`` nodes of ``gpus`` GPUs each, ``nbytes`` per GPU. Raises ``ConfigError``
    at ``grid`` when the node holds fewer GPUs than asked, at ``algorithm`` for one it does not run."""
    if gpus > gpu.gpus_per_node:
        raise ConfigError(f"expected at most {gpu.gpus_per_node} GPUs a node (node.gpus of {gpu.name}), "
                          f"got {gpus}", path="grid")
    choices = COLLECTIVE_ALGORITHMS[kind]
    algorithm = algorithm or choices[0]
    if algorithm not in choices:
        raise ConfigError(f"expected one of {', '.join(choices)} for {kind} on a GPU, got \"{algorithm}\"",
                          path="algorithm")
    n = nodes * gpus
    a_nvl, a_net = gpu.nvlink_latency_s, gpu.network_latency_s
    bus = _bus(gpu, nodes, gpus)
    if n == 1:
        steps_time, sent, wire = 0.0, 0.0, 0.0
    elif kind == "allreduce" and algorithm == "tree":
        steps_time = 2 * ((gpus - 1) * a_nvl + math.ceil(math.log2(nodes)) * a_net)
        sent = 2 * nbytes
        wire = sent / bus
    elif kind == "alltoall":
        inside, outside = (gpus - 1) / n * nbytes, (n - gpus) / n * nbytes
        steps_time = a_net if nodes > 1 else a_nvl
        sent = inside + outside
        wire = max(inside / gpu.nvlink_bytes_per_s, outside / gpu.network_bytes_per_s if outside else 0.0)
    else:
        passes = 2 if kind == "allreduce" else 1
        steps, crossing = passes * (n - 1), passes * (nodes - 1)
        steps_time = (steps - crossing) * a_nvl + crossing * a_net
        sent = nbytes if kind == "broadcast" else passes * (n - 1) / n * nbytes
        wire = sent / bus
    launch = gpu.launch(graphs)
    return GpuKernelResult(kind, algorithm, gpu, nodes, gpus, (int(nbytes // 4),), launch + steps_time + wire,
                           launch=launch, communication=steps_time + wire, link_bytes=sent)
