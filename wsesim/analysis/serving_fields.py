"""What each field of a serving result means: ``ServeResult`` (a serving run's ``result.json``, the columns
of a serving sweep's ``results.csv``), its nested blocks (``per_stage``, ``moe``, ``speculative``,
``split_prefill``, the breakdowns, the energy's parts and events), the columns of ``requests.csv`` and of a
serving run's ``ops.csv`` (one decode step).

Tables as ``analysis.result_fields``'s: name -> (unit, meaning[, docs/model.md section]), in the order
the code writes them; tests/output/test_data_dictionary.py checks them against the fields and the keys of
real runs.
"""

from __future__ import annotations

from ..model.energy import PARTS
from .result_fields import Doc

__all__ = ["BREAKDOWN_FIELDS", "DECODE_OPS_FIELDS", "ENERGY_EVENT_FIELDS", "ENERGY_PART_FIELDS", "GPU_FIELDS",
           "MOE_FIELDS",
           "PER_STAGE_FIELDS", "REQUEST_FIELDS", "SERVE_RESULT_FIELDS", "SPECULATIVE_FIELDS",
           "SPLIT_PREFILL_FIELDS"]

SERVE_RESULT_FIELDS: dict[str, Doc] = {
    "hardware": ("", "the hardware's name (its preset or YAML file's `name`)"),
    "model": ("", "the model's name"),
    "prompt_len": ("tokens", "`inference.load.prompt_len`: each request's prompt (the median with lognormal "
                   "lengths)", "§11.7"),
    "output_len": ("tokens", "`inference.load.output_len`: each request's output tokens (likewise)", "§11.7"),
    "batch": ("requests", "`inference.scheduler.batch`: requests in flight at most", "§11.7"),
    "grid": ("PEs", "rows x columns of PEs each pipeline stage runs on", "§11.1"),
    "stages": ("count", "pipeline stages (each a grid of PEs holding whole layers)", "§11.1"),
    "systems": ("count", "systems the run uses (wafers, or on GPUs nodes): the stages' and any draft's or "
                "prefill wafers'", "§11.1"),
    "layers_per_stage": ("layers", "each stage's layers, in order (a sweep's CSV writes `11+11+10`)",
                         "§11.1"),
    "kv_layout": ("", "`inference.kv_layout`: shift (the KV cache balanced over the grid) or concat "
                  "(appended to its last row)", "§11.3"),
    "feasible": ("bool", "whether the model fits this mapping and was served"),
    "software": ("", "`inference.software`: research (WaferLLM's kernels, each launched on its own) or "
                 "production (a layer's kernels fused, collectives and wafer I/O beside compute)", "§11.11"),
    "decode_launches": ("count", "kernels launched for one decode token, every stage (a fused kernel once)",
                        "§11.11"),
    "infeasible_reason": ("", "why not; empty when feasible (a sweep's CSV says it in `reason`)"),
    "ttft_s": ("s", "time to first token: mean over the requests served", "§11.5"),
    "tpot_s": ("s", "time per output token: mean over requests of (last − first token) / (output − 1)",
               "§11.5"),
    "tokens_per_s_per_request": ("tokens/s", "1 / `tpot_s`", "§11.5"),
    "tokens_per_s": ("tokens/s", "output tokens of all requests per second of the run", "§11.5"),
    "end_to_end_s": ("s", "the run's end: the last token of all", "§11.5"),
    "prefill_tokens_per_s": ("tokens/s", "prompt tokens per second of TTFT, mean over requests", "§11.5"),
    "bottleneck": ("", "what limits the run, in words: the part of a decode step that costs most and its "
                   "costliest op, led under load by what requests wait for", "§11.5"),
    "decode_step_cycles": ("cycles", "one decode token through every stage at the longest context, the "
                           "hand-offs between stages included: the sum of `decode_breakdown` but waiting",
                           "§11.5"),
    "decode_breakdown": ("cycles", "that decode step split by what it is (`decode_breakdown.<part>`), "
                         "waiting per token included", "§11.5"),
    "prefill_breakdown": ("cycles", "every stage's prefill split the same way (the prefill wafers' with "
                          "split prefill), waiting not counted", "§11.5"),
    "decode_by_op": ("cycles", "a decode token's cycles by op name (`decode_by_op.<op>`), all layers and "
                     "stages", "§11.5"),
    "layer_decode_cycles": ("cycles", "one layer's decode step (the first stage's first layer)", "§11.2"),
    "layer_by_op": ("cycles", "that layer's cycles by op name (`layer_by_op.<op>`)", "§11.2"),
    "per_stage": ("", "one record per stage (`per_stage[].…` below)", "§11.5"),
    "max_output_len": ("tokens", "the longest output whose KV cache fits every stage at this batch",
                       "§11.3"),
    "warnings": ("", "what the run could not model faithfully, or an overload (a list of sentences)"),
    "events": ("count", "simulation events the engine processed"),
    "wall_s": ("s", "the host's seconds to simulate: printed by `--json`, never written to `result.json` "
               "or `results.csv`"),
    "systems_allowed": ("count", "the wafers `inference.systems` allows the target's stages (0: auto, as "
                        "few as the mapping needs); `systems` is those used", "§11.1"),
    "system": ("", "what one of `systems` is, which the per-system figures and the price count: `wafer`, or "
               "on a GPU preset its node (`8-GPU node`)", "§13.9"),
    "moe": ("", "MoE serving's block when asked for (`moe.…` below; left out otherwise)", "§11.8"),
    "arrival": ("", "`inference.load.arrival`: together, poisson or trace", "§11.7"),
    "batching": ("", "continuous (iteration-level batches) or none (one prompt or decode token an "
                     "iteration)", "§11.7"),
    "requests": ("requests", "requests in the run, the refused and the warm-up included", "§11.7"),
    "refused": ("requests", "requests whose KV cache fits no stage even alone", "§11.7"),
    "ttft_p50_s": ("s", "median TTFT over the requests counted", "§11.7"),
    "ttft_p99_s": ("s", "99th percentile TTFT", "§11.7"),
    "tpot_p50_s": ("s", "median TPOT", "§11.7"),
    "tpot_p99_s": ("s", "99th percentile TPOT", "§11.7"),
    "itl_s": ("s", "inter-token latency: mean gap between two consecutive outputs of a request, pooled "
              "(a speculative verify pass's tokens are one output)", "§11.5"),
    "itl_p50_s": ("s", "median inter-token gap", "§11.5"),
    "itl_p99_s": ("s", "99th percentile inter-token gap", "§11.5"),
    "e2e_mean_s": ("s", "each request's arrival to its last token: mean", "§11.5"),
    "e2e_p50_s": ("s", "the same: median", "§11.5"),
    "e2e_p99_s": ("s", "the same: 99th percentile", "§11.5"),
    "queueing_s": ("s", "mean wait from arrival to the first stage starting the prompt", "§11.7"),
    "tokens_per_s_per_system": ("tokens/s", "`tokens_per_s` / `systems`", "§11.5"),
    "mean_batch": ("requests", "decode tokens per iteration that had any, mean (1 without batching)",
                   "§11.7"),
    "largest_batch": ("requests", "the most requests in flight at once", "§11.7"),
    "slo_ttft_s": ("s", "`inference.slo.ttft_s`, the TTFT target (null: no targets)", "§11.7"),
    "slo_tpot_s": ("s", "`inference.slo.tpot_s`, the TPOT target (null: no targets)", "§11.7"),
    "slo_attainment": ("fraction", "share of the requests meeting both targets, refused ones included "
                       "(empty/null: no targets)", "§11.7"),
    "goodput_requests_per_s": ("requests/s", "requests meeting both targets per second of the run's span",
                               "§11.7"),
    "goodput_tokens_per_s": ("tokens/s", "their output tokens per second of the span", "§11.7"),
    "warmup": ("requests", "`inference.load.warmup`: the first requests left out of the figures", "§11.7"),
    "prompt_tokens_per_s": ("tokens/s", "the counted requests' prompt tokens per second of their span "
                            "(continuous batching)", "§11.7"),
    "capacity_requests_per_s": ("requests/s", "the requests a second the run can serve: the lower of the "
                                "busiest stage's and admission's (0 without continuous batching)", "§11.7"),
    "kv_block": ("tokens", "`inference.scheduler.kv_block`: tokens a block of the paged KV cache (0: each "
                 "request's cache reserved whole at admission)", "§11.7"),
    "kv_blocks": ("count", "blocks in the pool: the tightest stage's SRAM for KV beside its weights and "
                  "activations, in blocks (0 without blocks)", "§11.7"),
    "preemption": ("", "`inference.scheduler.preemption`: recompute or swap (empty without blocks)", "§11.7"),
    "preemptions": ("count", "times a request was preempted for blocks another decode needed, the warm-up "
                    "included", "§11.7"),
    "swap_s": ("s", "the I/O's seconds moving preempted caches to MemoryX and back (0 with recompute)",
               "§11.7"),
    "energy_j": ("J", "the run's energy on all its systems, end to end (null: no energy section)", "§12"),
    "energy_by_part_j": ("J", "that energy by part (`energy_by_part_j.<part>`)", "§12"),
    "power_w": ("W", "the systems' mean power over the run (all of them)", "§12"),
    "joules_per_token": ("J/token", "`energy_j` per output token", "§12"),
    "tokens_per_s_per_kw": ("tokens/s/kW", "output tokens per second per kW of mean power", "§12"),
    "usd_per_million_tokens": ("USD", "the systems' hours at `inference.economics.price_per_system_hour` per "
                               "million output tokens (null: no price)", "§12"),
    "energy_events": ("", "the event counts priced (`energy_events.<event>`)", "§12.1"),
    "speculative": ("", "speculative decoding's block (`speculative.…` below; left out when off)",
                    "§11.9"),
    "split_prefill": ("", "split prefill's block (`split_prefill.…` below; left out when off)", "§11.10"),
    "gpu": ("", "on a GPU preset, how the run sits on its nodes (`gpu.…` below; left out on a wafer)",
            "§13.7"),
}

BREAKDOWN_FIELDS: dict[str, Doc] = {
    "instructions": ("cycles", "instruction issue and kernel launches on the PEs", "§10.1"),
    "compute": ("cycles", "arithmetic (the rest of a kernel's cycles on the PE)", "§10.1"),
    "communication": ("cycles", "wavelets on the fabric along the kernels' critical paths", "§10.1"),
    "handoff": ("cycles", "the activations handed from stage to stage", "§11.4"),
    "waiting": ("cycles", "a decode token's wait between steps (decode_breakdown only)", "§11.5"),
}
"""The keys of ``decode_breakdown`` and ``prefill_breakdown`` (``sim.cost.costing.split_costs``)."""

PER_STAGE_FIELDS: dict[str, Doc] = {
    "stage": ("", "the stage's index, first to last"),
    "wafer": ("", "the wafer it runs on"),
    "layers": ("", "its first and last layer"),
    "embedding": ("bool", "whether it holds the embedding"),
    "lm_head": ("bool", "whether it holds the LM head"),
    "prefill_cycles": ("cycles", "one prompt's prefill on it (0 with split prefill)"),
    "decode_cycles": ("cycles", "one decode token on it at the longest context"),
    "handoff_decode_cycles": ("cycles", "a decode token's hand-off to the next stage"),
    "busy": ("fraction", "its busy share of the run"),
    "waiting_cycles": ("cycles", "work's time queued at it before an iteration took it, summed over "
                       "its prompts and tokens"),
    "sram_bytes_per_pe.weights": ("B", "SRAM per PE for its weights", "§11.3"),
    "sram_bytes_per_pe.kv_cache": ("B", "for the KV cache at the longest context", "§11.3"),
    "sram_bytes_per_pe.activations": ("B", "for activations", "§11.3"),
    "sram_bytes_per_pe.total": ("B", "their sum", "§11.3"),
    "sram_bytes_per_pe.usable": ("B", "a PE's usable SRAM", "§11.3"),
    "grids": ("count", "MoE serving: the grids the stage spans", "§11.8"),
    "expert_grid_use": ("fraction", "sampled routing: share of (token, MoE layer) pairs with an expert on "
                        "each grid", "§11.8"),
    "expert_load": ("ratio", "sampled routing: the busiest expert's draws over the mean", "§11.8"),
}

GPU_FIELDS: dict[str, Doc] = {
    "gpus_per_node": ("count", "the preset's `node.gpus`", "§13.7"),
    "tensor_parallel": ("count", "GPUs a stage spans (`inference.tensor_parallel`)", "§13.7"),
    "kv_shards": ("count", "the KV heads' shards over them: min(tensor_parallel, kv_heads)", "§13.7"),
    "nodes": ("count", "nodes in use, a pipeline stage each (`systems` counts them)", "§13.7"),
    "experts_per_gpu": ("count", "an MoE layer's experts on each GPU (the model's experts, 0 if dense, "
                        "over tensor_parallel)", "§13.7"),
    "hbm_bytes_per_gpu": ("B", "each GPU's HBM (`hbm.capacity`)", "§13.7"),
    "gpu_busy_seconds": ("s", "GPU-seconds at TDP: each stage's busy seconds times its GPUs (the run's "
                         "`energy_by_part_j` is then `gpus`, these at TDP, and `static`, the nodes' floor; "
                         "`energy_events` is empty)", "§13.7"),
    "node_seconds": ("s", "nodes times the run's seconds, at the nodes' floor", "§13.7"),
}
"""The keys of a GPU run's ``gpu`` block (docs/model.md §13.7)."""

MOE_FIELDS: dict[str, Doc] = {
    "routing": ("", "`inference.moe.routing`: how decode tokens pick experts", "§11.8"),
    "seed": ("", "`inference.load.seed`: the seed of sampled routing", "§11.8"),
    "expert_grids": ("count", "G: grids the experts of a layer are spread over", "§11.8"),
    "experts_per_grid": ("count", "experts each grid holds", "§11.8"),
    "grids": ("count", "grids in all", "§11.8"),
}

_WHERE: dict[str, Doc] = {
    "grid": ("PEs", "rows x columns of PEs a stage of its own wafers runs on"),
    "stages": ("count", "its stages"),
    "systems": ("count", "its wafers"),
    "layers_per_stage": ("layers", "each of its stages' layers"),
}

SPECULATIVE_FIELDS: dict[str, Doc] = {
    "draft": ("", "the draft model's name", "§11.9"),
    "tokens": ("tokens", "K: tokens the draft proposes a round", "§11.9"),
    "acceptance": ("fraction", "α: the chance each proposed token is accepted", "§11.9"),
    "placement": ("", "where the draft runs, in words", "§11.9"),
    **{k: (u, f"the draft's {m.removeprefix('its ')}", "§11.9") for k, (u, m, *_) in _WHERE.items()},
    "expected_tokens_per_verify": ("tokens", "(1 − α^(K+1)) / (1 − α): tokens a verify pass yields",
                                   "§11.9"),
    "rounds": ("count", "verify passes of all the requests served", "§11.9"),
    "draft_prefill_cycles": ("cycles", "the draft's prefill of one `prompt_len` prompt", "§11.9"),
    "draft_prefill_late_cycles": ("cycles", "how much later that ends than the target's prefill of it",
                                  "§11.9"),
    "draft_cycles_per_round": ("cycles", "the draft's K steps of one request's first round", "§11.9"),
    "verify_cycles_per_round": ("cycles", "the target's verify pass of K + 1 tokens of one request, all "
                                "stages, at the first round", "§11.9"),
    "handoff_cycles_per_round": ("cycles", "a round's hand-offs, between the target's stages and the "
                                 "draft's wafers", "§11.9"),
    "tokens_per_s_per_request_without": ("tokens/s", "one request alone: `tokens_per_s_per_request` of the "
                                         "same request without the draft, on the same mapping", "§11.9"),
    "ttft_s_without": ("s", "`ttft_s` without it", "§11.9"),
    "speedup": ("ratio", "`tokens_per_s_per_request` over that without the draft", "§11.9"),
}
"""``speculative``'s keys: one request alone's block has them all, any other load's those up to
``handoff_cycles_per_round``."""

SPLIT_PREFILL_FIELDS: dict[str, Doc] = {
    "placement": ("", "where the prefill runs, in words", "§11.10"),
    **{k: (u, f"the prefill wafers' {m.removeprefix('its ')}", "§11.10") for k, (u, m, *_) in _WHERE.items()},
    "kv_bytes_per_token": ("B", "the KV cache's bytes per prompt token, all layers", "§11.10"),
    "kv_busiest_link_bytes_per_token": ("B", "those bytes on the busiest link between wafers, per token",
                                        "§11.10"),
    "kv_bytes": ("B", "the KV cache of a `prompt_len` prompt, handed from the prefill wafers to the decode "
                 "ones", "§11.10"),
    "kv_handoff_cycles": ("cycles", "the time to hand it over, on idle links", "§11.10"),
    "kv_handoff_s": ("s", "the same in seconds", "§11.10"),
    "prefill_cycles": ("cycles", "one prompt through the prefill wafers' stages", "§11.10"),
    "tokens_per_s_per_request_without": ("tokens/s", "one request alone: `tokens_per_s_per_request` of the "
                                         "same request on the decode wafers alone", "§11.10"),
    "ttft_s_without": ("s", "`ttft_s` on the decode wafers alone", "§11.10"),
}
"""``split_prefill``'s keys: one request alone's block has them all, any other load's those up to
``prefill_cycles``."""

ENERGY_PART_FIELDS: dict[str, Doc] = {
    part: ("J", what, "§12") for part, what in zip(PARTS, (
        "arithmetic (FMACs)", "SRAM reads and writes", "wavelet-hops on the fabric",
        "bytes through the systems' I/O", "the PEs' instruction streams (issues and kernel launches)",
        "the systems' floor (static power) over the run"), strict=True)}
"""The keys of ``energy_by_part_j`` (``model.energy.PARTS``)."""

ENERGY_EVENT_FIELDS: dict[str, Doc] = {
    "fmacs_fp16": ("count", "FMACs on fp16 lanes", "§12.1"),
    "fmacs_fp32": ("count", "FMACs on fp32 lanes", "§12.1"),
    "sram_read_bytes": ("B", "SRAM bytes read", "§12.1"),
    "sram_write_bytes": ("B", "SRAM bytes written", "§12.1"),
    "wavelet_hops": ("count", "wavelets times router hops on the fabric", "§12.1"),
    "io_bytes": ("B", "bytes through the systems' I/O, in and out", "§12.1"),
    "instruction_cycles": ("cycles", "cycles of the PEs' instruction streams, summed over PEs (a scalar "
                           "instruction issued in each)", "§12.1"),
}
"""The keys of ``energy_events`` (``model.energy.EventCounts``)."""

REQUEST_FIELDS: dict[str, Doc] = {
    "request": ("", "the request's index, in arrival order", "§11.7"),
    "status": ("", "served, or refused (its KV cache fits no stage even alone)", "§11.7"),
    "arrival_s": ("s", "when it arrived, from the run's start", "§11.7"),
    "prompt_len": ("tokens", "its prompt", "§11.7"),
    "output_len": ("tokens", "its output", "§11.7"),
    "admitted_s": ("s", "when it was admitted into the batch (empty: refused)", "§11.7"),
    "first_token_s": ("s", "when its first token left the last stage", "§11.7"),
    "finish_s": ("s", "when its last token did", "§11.7"),
    "queueing_s": ("s", "from arrival to the first stage starting its prompt", "§11.7"),
    "ttft_s": ("s", "from arrival to its first token", "§11.5"),
    "tpot_s": ("s", "(finish − first token) / (output − 1); empty for a one-token output", "§11.5"),
    "end_to_end_s": ("s", "from arrival to its last token", "§11.5"),
}
"""The columns of ``requests.csv`` (``analysis.requests.REQUEST_COLUMNS``)."""

DECODE_OPS_FIELDS: dict[str, Doc] = {
    "stage": ("", "the stage, in pipeline order", "§11.2"),
    "wafer": ("", "the wafer it runs on", "§11.1"),
    "op": ("", "the op's name (`handoff`: the token's activations to the next stage)", "§11.2"),
    "kind": ("", "gemv, allreduce, elementwise, ... or handoff", "§11.2"),
    "layer": ("", "its layer (empty: none)", "§11.2"),
    "dims": ("", "its dimensions at `context` (`x`-joined); a hand-off: the values it sends", "§11.2"),
    "region": ("PEs", "rows x columns of the stage's grid it runs on (empty: the whole grid)", "§11.2"),
    "context": ("tokens", "the context the step is costed at: the last decode step's", "§11.2"),
    "start": ("cycles", "when it starts, from the stage's start of the step (ops run one after another)"),
    "cycles": ("cycles", "how long it takes", "§10.1"),
    "instruction_cycles": ("cycles", "instruction issue on its critical path", "§10.1"),
    "compute_cycles": ("cycles", "arithmetic on its critical path", "§10.1"),
    "communication_cycles": ("cycles", "wavelets on its critical path", "§10.1"),
    "waiting_cycles": ("cycles", "the rest: waiting on a busy ramp or a slower neighbour", "§10.1"),
    "fits": ("bool", "whether the kernel fits the PEs' SRAM"),
    "reason": ("", "why not (empty when it fits)"),
}
"""The columns of a serving run's ``ops.csv`` (``analysis.serving_ops.DECODE_OPS_COLUMNS``)."""
