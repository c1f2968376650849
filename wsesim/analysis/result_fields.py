"""What each field of a training result means: ``RunResult`` (a run's ``result.json``, the result columns of
a training sweep's ``results.csv``), its ``phases`` and the columns of its ``ops.csv``.

Each table maps a name to (unit, meaning) or (unit, meaning, docs/model.md section), in the order the code
writes them; the unit is "" for a name or text. ``output.data_dictionary`` makes docs/outputs.md and
``wsesim schema --outputs`` from them, and tests/output/test_data_dictionary.py fails when a field exists
without a description here, or a description without a field.
"""

from __future__ import annotations

from ..model.vocabulary import Phase

__all__ = ["Doc", "GPU_TRAINING_FIELDS", "OPS_FIELDS", "PHASE_FIELDS", "RUN_RESULT_FIELDS"]

Doc = tuple[str, str] | tuple[str, str, str]
"""(unit, meaning) or (unit, meaning, the docs/model.md section that says more)."""

RUN_RESULT_FIELDS: dict[str, Doc] = {
    "hardware": ("", "the hardware's name (its preset or YAML file's `name`)", "§1"),
    "model": ("", "the model's name"),
    "experts": ("count", "routed experts per MoE layer (`model.experts`; 0: a dense model)"),
    "top_k": ("count", "experts each token is routed to (`model.top_k`)"),
    "seq_len": ("tokens", "tokens per sequence (`training.seq_len`)"),
    "batch_per_tile": ("sequences", "B: sequences per tile per micro-batch (`training.batch_per_tile`, or "
                       "the auto batch it resolved to)", "§5.3"),
    "tiles": ("count", "G: batch tiles the attention runs on (`training.tiles`)", "§3.2"),
    "global_batch": ("sequences", "sequences per step on all systems: systems × micro_batches × G × B",
                     "§2.4"),
    "activations": ("", "`training.activations`: store, or recompute in the backward pass", "§5.2"),
    "attention_kernel": ("", "`training.attention_kernel`: standard or flash", "§5.2"),
    "routing": ("", "`training.routing`: `uniform` or `zipf:<alpha>` (tokens to experts)", "§3.5"),
    "fabric": ("", "`simulation.fabric`: the fidelity that timed dispatch and combine", "§6.2"),
    "moe_mapping": ("", "`simulation.moe_mapping`: how experts are mapped onto the wafer", "§3.4"),
    "engine": ("", "`simulation.engine`: fast, or the plain-SimPy reference"),
    "granularity": ("", "`simulation.granularity`: one fabric node per PE, or per K × K PEs (block:K)",
                    "§6.1"),
    "placement": ("", "`simulation.placement`: how expert regions are laid out (grid, snake, random)",
                  "§6.3"),
    "compute": ("", "`simulation.compute`: constant op costs, or the kernel model's", "§4.1"),
    "seed": ("", "`training.seed`: the seed of sampled routing and random placement"),
    "feasible": ("bool", "whether the configuration fits and was simulated"),
    "infeasible_reason": ("", "why it does not fit (the phase, the bytes it needs, the capacity); empty "
                          "when feasible (a sweep's CSV says it in `reason`)"),
    "step_cycles": ("cycles", "one step of one system, its first op to its last", "§7"),
    "step_time_s": ("s", "`step_cycles` at the hardware's clock", "§7"),
    "tokens_per_step": ("tokens", "one system's tokens a step: micro_batches × G × B × seq_len", "§7"),
    "throughput_tokens_per_s": ("tokens/s", "one system's `tokens_per_step` / `step_time_s`", "§7"),
    "model_flops_per_step": ("FLOP", "3 × the forward FLOPs of the step's tokens (recomputation is not "
                             "model FLOPs)", "§3.1"),
    "mfu": ("fraction", "model FLOPs utilisation: `model_flops_per_step` / (`step_time_s` × the wafer's "
            "peak FLOP/s)", "§7"),
    "phases": ("cycles", "the step's own timeline by phase (`phases.<phase>` below); they sum to "
               "`step_cycles`", "§3.3"),
    "io_bytes_in": ("B", "bytes the inbound I/O link carried in the step (weights streamed in)", "§2.2"),
    "io_bytes_out": ("B", "bytes the outbound I/O link carried in the step (weight gradients)", "§2.3"),
    "io_in_utilisation": ("fraction", "`io_bytes_in` over what the inbound link can carry in the step",
                          "§2.2"),
    "dispatched_bytes": ("B", "bytes the MoE dispatches sent from the tokens to the expert regions",
                         "§6.4"),
    "combined_bytes": ("B", "bytes the MoE combines returned from the expert regions", "§6.4"),
    "max_link_load_bytes": ("B", "the busiest fabric link's bytes in any one dispatch or combine", "§6.4"),
    "peak_sram_bytes_per_pe": ("B", "the most SRAM a PE needs in any phase of the step", "§5.2"),
    "sram_capacity_bytes_per_pe": ("B", "a PE's usable SRAM (`pe.sram` less `pe.reserved_sram`)", "§5.2"),
    "binding_memory_phase": ("", "the phase whose SRAM need is `peak_sram_bytes_per_pe`", "§5.2"),
    "expert_load_imbalance": ("ratio", "the busiest expert's tokens over the mean, averaged over the MoE "
                              "layers (1: balanced; 0: a dense model)", "§3.5"),
    "expert_region_load": ("ratio", "the busiest expert region's tokens per PE over the wafer's mean (it "
                           "sizes the regions' SRAM)", "§5.2"),
    "expert_weight_wait_fraction": ("fraction", "of the expert regions' time in expert phases, the share "
                                    "spent waiting for weights", "§3.4"),
    "restreamed_for_recompute": ("bool", "whether weights are streamed in again for the backward pass's "
                                 "recomputation", "§2.1"),
    "micro_batches": ("count", "micro-batches of G × B sequences a step (gradient accumulation)", "§2.4"),
    "systems": ("count", "systems (wafers) in the cluster; the fields above are one system's", "§9"),
    "cluster_throughput_tokens_per_s": ("tokens/s", "systems × `throughput_tokens_per_s`", "§9"),
    "scaling_efficiency": ("fraction", "cluster throughput over systems × one system's alone (the same "
                           "experiment on one system: the same global batch when set, else the same "
                           "per-system batch)", "§9"),
    "tree_efficiency": ("fraction", "this system's step alone over its step in the cluster: what the "
                        "reduce tree alone costs", "§9"),
    "energy_per_step_j": ("J", "the step's energy on all systems (empty/null: the hardware has no energy "
                          "section)", "§12"),
    "joules_per_token": ("J/token", "`energy_per_step_j` per token of the global batch", "§12"),
    "power_w": ("W", "one system's mean power over the step", "§12"),
    "energy_fmac_j": ("J", "the step's energy in FMACs (arithmetic), all systems", "§12"),
    "energy_sram_j": ("J", "the step's energy in SRAM reads and writes, all systems", "§12"),
    "energy_fabric_j": ("J", "the step's energy in wavelet-hops on the fabric (a training step counts "
                        "none)", "§12"),
    "energy_io_j": ("J", "the step's energy in bytes through the systems' I/O", "§12"),
    "energy_instruction_j": ("J", "the step's energy in the PEs' instruction streams (a training step "
                             "counts none: its compute is FLOPs at an efficiency, not instructions)", "§12"),
    "energy_static_j": ("J", "the systems' floor (static power) over the step", "§12"),
    "events": ("count", "simulation events the engine processed"),
    "wall_s": ("s", "the host's seconds to simulate: printed by `--json`, never written to `result.json` "
               "or `results.csv` (it differs run to run)"),
    "gpu": ("", "on a GPU preset, how the step sits on its node (`gpu.…` below; left out on a wafer, and "
            "from `results.csv`)", "§13.8"),
}

GPU_TRAINING_FIELDS: dict[str, Doc] = {
    "gpus": ("count", "the node's GPUs (`node.gpus`)", "§13.8"),
    "data_parallel": ("count", "groups of `tensor_parallel` GPUs, each running the step's program on its own "
                      "G × B sequences (the node's GPUs / tensor_parallel)", "§13.8"),
    "tensor_parallel": ("count", "GPUs a group splits each layer's weights over (`training.tensor_parallel`)",
                        "§13.8"),
    "expert_parallel": ("count", "GPUs an MoE layer's experts are split over (1: a dense model)", "§13.8"),
    "experts_per_gpu": ("count", "⌈experts / GPUs⌉ (0: a dense model)", "§13.8"),
    "hbm_bytes_per_gpu": ("B", "one GPU's HBM in the step", "§13.8"),
    "hbm_capacity_bytes": ("B", "one GPU's HBM (`hbm.capacity`)", "§13.8"),
    "hbm_by_part_bytes": ("B", "`hbm_bytes_per_gpu` by part: weights, gradients, optimizer, activations, "
                          "logits", "§13.8"),
    "kernels_per_gpu": ("count", "kernels one GPU ran in the step (also `events`)", "§13.8"),
    "executed_flops_per_gpu": ("FLOP", "the FLOPs its kernels computed, recomputation included", "§13.8"),
    "link_bytes_per_gpu": ("B", "bytes its all-to-alls and all-reduce sent (also `dispatched_bytes`)",
                           "§13.8"),
    "seconds_by_part": ("s", "the step by part (attention, attention_core, norms, ffn, router, experts, "
                        "dispatch, combine, lm_head, gradient_allreduce, optimizer, and tensor_allreduce "
                        "when tensor_parallel > 1; `phases` holds them in cycles)", "§13.8"),
}
"""The keys of a GPU step's ``gpu`` block (docs/model.md §13.8)."""

PHASE_FIELDS: dict[str, Doc] = {
    Phase.ATTENTION: ("cycles", "attention (QKV, scores, output projection) on the whole wafer", "§3.3"),
    Phase.FFN: ("cycles", "the dense FFN on the whole wafer", "§3.6"),
    Phase.ROUTER: ("cycles", "the MoE router's scores and top-k", "§3.3"),
    Phase.DISPATCH: ("cycles", "tokens sent to the expert regions over the fabric", "§6.4"),
    Phase.EXPAND: ("cycles", "tokens copied out to their top_k experts", "§3.3"),
    Phase.EXPERTS: ("cycles", "the expert FFNs on their regions", "§3.4"),
    Phase.WEIGHTED_SUM: ("cycles", "the experts' outputs summed by their router weights", "§3.3"),
    Phase.COMBINE: ("cycles", "the experts' outputs returned over the fabric", "§6.4"),
    Phase.LM_HEAD: ("cycles", "the LM head and loss", "§3.3"),
    Phase.WEIGHT_STALL: ("cycles", "waiting for weights on the inbound link", "§2.2"),
    Phase.GRADIENT_STALL: ("cycles", "waiting for the outbound link to take gradients", "§2.3"),
    Phase.GRADIENT_DRAIN: ("cycles", "the last gradients leaving after the last op", "§2.3"),
    Phase.REDUCE_DRAIN: ("cycles", "the cluster's reduce tree finishing after this system", "§9"),
    Phase.OPTIMIZER_STEP: ("cycles", "MemoryX's optimizer step, past what the drain hides", "§2.5"),
}
"""The keys of ``phases`` (``STEP_PHASES``), each a sweep's ``phase_<name>_cycles`` column."""

OPS_FIELDS: dict[str, Doc] = {
    "op": ("", "the op: a phase of the step (`phases.<phase>`), or an expert op (gate_up, down)", "§3.3"),
    "pass": ("", "forward or backward (empty: neither, e.g. a stall)"),
    "layer": ("", "the layer it belongs to (empty: none)"),
    "tile": ("", "the attention tile it ran for (empty: none)", "§3.2"),
    "where": ("", "where it ran: the wafer, the fabric, the expert regions, a link, between wafers or "
              "MemoryX"),
    "start": ("cycles", "when it started, from the step's start"),
    "cycles": ("cycles", "how long it took (an expert op: the earliest start to the latest end)"),
    "busy_cycles": ("cycles", "an expert op's cycles summed over experts and pieces (empty otherwise)"),
    "experts": ("count", "an expert op's distinct experts (empty otherwise)"),
    "flops": ("FLOP", "the FLOPs it computed (empty for an expert op: they are the experts phase's)"),
    "weight_bytes": ("B", "the weight bytes it used"),
    "bytes": ("B", "the bytes it moved over the fabric (dispatch, combine)", "§6.4"),
}
"""The columns of a training run's ``ops.csv`` (``analysis.ops.OPS_COLUMNS``), one row per op."""
