"""The GPU specs (``kind: gpu``): one GPU's SMs, tensor-core rates, HBM and L2, the node it sits in (its
GPUs on an NVSwitch, the network out of the node) and its power, each quantity with its physical bounds.
A GPU preset lives beside the wafers in ``hardware/`` and is named as they are (``--hardware h100``); its
``kind:`` says which spec reads it (``loader.HARDWARE_KINDS``). The loader imports this module only when a
file names a GPU (``loader.spec_of``): a run on a wafer never builds these specs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from .base import Spec, fail
from .fields import Description, Name, count, quantity

# 132 SMs on an H100 SXM, 148 on a B200; 4,096 is past any GPU die or pair of dies.
SMs = count(4_096)
# 1.83 GHz is the clock NVIDIA's H100 tensor rates assume; 100 MHz-5 GHz spans any GPU's core clock.
GpuClock = quantity("frequency", "100 MHz", "5 GHz", "1830 MHz")
# dense FLOP per clock per SM: 4,096 bf16 on Hopper (4 tensor cores x 512 FMAs), 8,192 on Blackwell;
# 1,048,576 is 128x that
SmRate = count(1_048_576)
# special-function results (exp2, rcp) per clock per SM: 16 on Hopper and Blackwell (CUDA guide's table)
SfuRate = count(4_096)
# 80 GB on an H100, 180 GB on a B200; 16 TB is past any package's memory
HbmSize = quantity("size", "1 GB", "16 TB", "80 GB")
# 3.35 TB/s on an H100, 8 TB/s on a B200; 1 GB/s is slower than any GPU's memory, 1 PB/s past any
HbmBandwidth = quantity("bandwidth", "1 GB/s", "1 PB/s", "3.35 TB/s")
# 50 MB on an H100, 126 MB on a B200; 10 GB would be an HBM stack on the die
L2Size = quantity("size", "1 MB", "10 GB", "50 MB")
# 450 GB/s per direction per GPU on NVLink 4, 900 GB/s on NVLink 5; 100 Gbit/s (a NIC) to 100 TB/s
LinkBandwidth = quantity("bandwidth", "100 Mbit/s", "100 TB/s", "450 GB/s")
# per-step latency of a collective: ~0.5 us over NVLink, a few us over InfiniBand; 0 to 10 ms
StepLatency = quantity("time", "0 s", "10 ms", "0.5 us")
# 8 GPUs on an HGX board's NVSwitch; 72 in an NVL72 rack; 1,024 past any NVLink domain
GpusPerNode = count(1_024)
# 700 W an H100 SXM, 1,000 W a B200; 10 kW is past any package
GpuPower = quantity("power", "1 W", "10 kW", "700 W")
# the node's draw beside its GPUs (CPUs, NICs, NVSwitches, fans): 0 W to 100 kW
NodePower = quantity("power", "0 W", "100 kW", "4.6 kW")
# the share of the tensor cores' peak a large GEMM reaches (clocks under load, the pipeline's bubbles);
# below 1 % nothing is a GEMM any more
TensorEfficiency = quantity("fraction", "1 %", "100 %", "80 %")
# a kernel's launch from the host: a few us (0 with CUDA graphs); 0 to 1 ms
LaunchTime = quantity("time", "0 s", "1 ms", "2.4 us")


class TensorSpec(Spec):
    """Dense (no sparsity) FLOP per clock per SM for each data type: the tensor cores' for the 16- and
    8-bit types and TF32, the FP32 lanes' (no tensor core) for fp32. Peak = sms x rate x clock."""

    fp16: SmRate
    bf16: SmRate
    fp8: SmRate
    tf32: SmRate
    fp32: SmRate


class HbmSpec(Spec):
    """The GPU's memory: what it holds and how fast it reads or writes."""

    capacity_bytes: HbmSize = Field(alias="capacity")
    bandwidth_bytes_per_s: HbmBandwidth = Field(alias="bandwidth")


class NodeSpec(Spec):
    """The node a GPU sits in: ``gpus`` on one NVSwitch, each with ``nvlink`` per direction, and the
    network out of the node, ``network`` per GPU per direction (one NIC per GPU); each link's per-step
    latency (a collective's alpha, docs/model.md §13.4)."""

    gpus: GpusPerNode
    nvlink_bytes_per_s: LinkBandwidth = Field(alias="nvlink")
    nvlink_latency_s: StepLatency = Field(alias="nvlink_latency")
    network_bytes_per_s: LinkBandwidth = Field(alias="network")
    network_latency_s: StepLatency = Field(alias="network_latency")


class GpuPowerSpec(Spec):
    """What the node draws: each GPU at its TDP, and the node's own floor (host, NICs, switches, fans)."""

    gpu_watts: GpuPower = Field(alias="gpu")
    node_floor_watts: NodePower = Field(alias="node_floor")


class GpuRuntimeSpec(Spec):
    """The one calibrated key (``tensor_efficiency``, set on one named measurement in each preset) and
    the host's cost of starting a kernel."""

    tensor_efficiency: TensorEfficiency
    kernel_launch_s: LaunchTime = Field(alias="kernel_launch")


class GpuSpec(Spec):
    """A GPU in its node (``kind: gpu``): what the GPU kernels (``wsesim.kernels.gpu``) read."""

    kind: Literal["gpu"] = "gpu"
    name: Name
    description: Description = ""
    sms: SMs
    clock_hz: GpuClock = Field(alias="clock")
    tensor: TensorSpec
    sfu_per_clock: SfuRate = Field(alias="sfu")  # special-function results per clock per SM
    hbm: HbmSpec
    l2_bytes: L2Size = Field(alias="l2")
    node: NodeSpec
    power: GpuPowerSpec
    runtime: GpuRuntimeSpec

    @property
    def system(self) -> str:
        """What one system of this hardware is, in words a count goes before: the node ("8-GPU node")."""
        return f"{self.node.gpus}-GPU node"

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The model dtypes the GPU computes in: those its tensor table gives a rate for, tf32 aside (a
        mode of fp32 matmuls, not a storage type)."""
        return tuple(d for d in TensorSpec.model_fields if d != "tf32")

    def peak_flops_per_s(self, dtype: str) -> float:
        """The GPU's dense peak for ``dtype`` (fp16, bf16, fp8, tf32, fp32): sms x rate x clock."""
        return self.sms * getattr(self.tensor, dtype) * self.clock_hz

    def totals(self) -> dict[str, float]:
        """One GPU's and its node's figures, for ``wsesim hardware show``."""
        return {
            "sms": self.sms,
            **{f"peak_{d}_flops_per_s": self.peak_flops_per_s(d) for d in TensorSpec.model_fields},
            "hbm_bytes": self.hbm.capacity_bytes,
            "hbm_bandwidth_bytes_per_s": self.hbm.bandwidth_bytes_per_s,
            "l2_bytes": self.l2_bytes,
            "gpus_per_node": self.node.gpus,
            "nvlink_bytes_per_s": self.node.nvlink_bytes_per_s,
            "network_bytes_per_s": self.node.network_bytes_per_s,
            "node_hbm_bytes": self.node.gpus * self.hbm.capacity_bytes,
            "node_power_watts": self.node.gpus * self.power.gpu_watts + self.power.node_floor_watts,
        }


class OnAGpu:
    """What a serving run and a training step on a GPU validate alike (a mixin of their specs): no model
    with latent attention (its kernels, FlashMLA's, are not modelled)."""

    @field_validator("model")
    @classmethod
    def _attention_on_a_gpu(cls, model: Any) -> Any:
        if model.kv_lora_rank:
            raise fail(f"expected a model without latent attention on a GPU ({model.name} caches a latent, "
                       "whose GPU kernels, FlashMLA's, are not modelled)")
        return model
