"""Specs of data parallelism (docs/model.md §2.4, §9): the interconnect between MemoryX and the wafers
(``kind: interconnect``), a cluster of them (``cluster:`` in an experiment), and the rule that splits a
global batch over systems, micro-batches and tiles."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, WithJsonSchema, field_validator

from .base import Spec, fail
from .fields import Description, Name, count, quantity

# SwarmX nodes do 1:4 broadcast-reduce (or two 1:2); a switch radix of 512 is past any Ethernet ASIC's.
FanOut = count(512, low=2)
# 100 Gb/s per SwarmX port, 1.2 Tb/s per system; 1 MB/s to 1 PB/s as io.bandwidth.
TreeBandwidth = quantity("bandwidth", "1 MB/s", "1 PB/s", "1.2 Tbit/s")
# a switch hop takes 0.3-5 us; one second per hop is past any network.
HopLatency = quantity("time", "0 s", "1 s", "2 us")
# Cerebras: clusters "up to 192 CS-2s", "up to 2048" CS-3s; 65,536 is 32x that.
Systems = count(65_536)


class InterconnectSpec(Spec):
    """The network between MemoryX and the wafers of a cluster (SwarmX): a tree of broadcast-reduce nodes
    of ``fan_out`` children each; every port carries ``link_bandwidth`` per direction and every node adds
    ``latency`` each way (cut-through)."""

    kind: Literal["interconnect"] = "interconnect"
    name: Name
    description: Description = ""
    fan_out: FanOut
    link_bandwidth_bytes_per_s: TreeBandwidth = Field(alias="link_bandwidth")  # per port, per direction
    latency_s: HopLatency = Field(alias="latency")  # per tree node, each way


_INTERCONNECT_REF = {"description": "an interconnect preset (swarmx), a path, or an inline mapping",
                     "anyOf": [{"type": "string", "minLength": 1},
                               {k: v for k, v in InterconnectSpec.model_json_schema(by_alias=True).items()
                                if k != "title"}]}


class ClusterSpec(Spec):
    """``systems`` wafers training in data parallel, each with its own I/O link, behind an interconnect
    tree that broadcasts the weights and reduces the gradients. One system: no tree."""

    systems: Systems = 1
    interconnect: Annotated[InterconnectSpec | None, WithJsonSchema(_INTERCONNECT_REF)] = Field(
        None, validate_default=True)

    @field_validator("interconnect")
    @classmethod
    def _tree_needed(cls, interconnect: InterconnectSpec | None,
                     info: ValidationInfo) -> InterconnectSpec | None:
        systems = info.data.get("systems")
        if interconnect is None and systems is not None and systems > 1:
            raise fail(f"required with systems > 1 (got {systems}): a preset name (swarmx), a path "
                       "or a mapping")
        return interconnect


def split_problem(global_batch: int, G: int, B: int | str, N: int | str, systems: int = 1) -> str:
    """Why ``global_batch`` does not split into ``systems`` × ``N`` micro-batches of ``G`` tiles of ``B``
    ("auto": any), or ''."""
    split = systems * G * (1 if N == "auto" else int(N)) * (1 if B == "auto" else int(B))
    what = " × ".join([*([f"systems ({systems})"] if systems > 1 else []), f"tiles ({G})",
                       *([] if N == "auto" else [f"micro_batches ({N})"]),
                       *([] if B == "auto" else [f"batch_per_tile ({B})"])])
    exact = B != "auto" and N != "auto"
    if global_batch % split == 0 and (not exact or global_batch == split):
        return ""
    return (f"expected {'exactly' if exact else 'a multiple of'} {what} = {split}, got {global_batch}: "
            "the global batch must split into whole micro-batches of whole tiles on every system")
