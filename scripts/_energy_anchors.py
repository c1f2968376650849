"""wsesim's energy figures beside the published power of a system (docs/model.md §12), as
``scripts/validation.py`` shows them. No per-event energy of a wafer is published: the per-event values
are modelled and nothing was fitted to these rows; the residual is the model's."""

from __future__ import annotations

from functools import cache

from wsesim.config.inference import load_inference
from wsesim.config.loader import load_experiment, load_hardware
from wsesim.experiments.runner import run_experiment, run_inference
from wsesim.model.energy import full_load

GROUP = "energy against published system power"
CS3 = "~23 kW per CS-3 (secondary sources, no datasheet found; medium confidence)"
CS2 = ("CS-2: \"more than 20 kW of heat from the wafer\" (Cerebras CS-2 white paper); ~23 kW in secondary "
       "sources (medium-low confidence)")


def _full_load_kw(hardware: str) -> float:
    return full_load(load_hardware(hardware))["energy"].joules / 1e3


@cache
def _gptj():
    return run_experiment(load_experiment(hardware="wse2", model="gpt-j-6b", overrides={
        "training.seq_len": 2048, "training.global_batch": 66}).spec)


@cache
def _serve(model: str):
    """One user on CS-3s, one stage a wafer of 755 × 1,170 PEs (the layout Cerebras describes)."""
    return run_inference(load_inference(model=model, hardware="wse3",
                                        overrides={"inference.grid": "755x1170"}).spec).result


def energy_anchors(anchor: type, prediction: str) -> list:
    """The validation table's energy rows (``anchor`` is ``scripts/validation.py``'s record)."""
    none = "— (none published)"
    return [
        anchor(GROUP, "CS-2 with every PE, SRAM port and link busy", "20–23 kW", 23.0, "kW", CS2, prediction,
               lambda: _full_load_kw("wse2"),
               note="the most the model lets a CS-2 draw: floor 10.4 kW + 6.3 kW of events + 6.3 kW of instruction "
                    "streams issuing every cycle (docs/model.md §12.2)"),
        anchor(GROUP, "CS-3 with every PE, SRAM port and link busy", "~23 kW", 23.0, "kW", CS3, prediction,
               lambda: _full_load_kw("wse3"),
               note="floor 10.4 kW + 9.9 kW of events (all 8 lanes fed) + 5.6 kW of instruction streams issuing "
                    "every cycle: a bound no program reaches with the lanes busy too (docs/model.md §12.2)"),
        anchor(GROUP, "GPT-J 6B training, 1 CS-2, global batch 66: mean power", "20–23 kW", 23.0, "kW", CS2,
               prediction, lambda: _gptj().power_w / 1e3,
               note="the dense row above (S = 2,048, 6 micro-batches); no wavelet-hops counted in training"),
        anchor(GROUP, "GPT-J 6B training, 1 CS-2, global batch 66: joules per token", none, None, "J", CS2,
               prediction, lambda: _gptj().joules_per_token, digits=3,
               note="drawing 23 kW at the published 19.80 samples/s (S = 2,048) it would be 0.57 J"),
        anchor(GROUP, "LLaMA3-8B serving, 1 CS-3, one user: mean power", "~23 kW", 23.0, "kW", CS3, prediction,
               lambda: _serve("llama3-8b").power_w / 1e3,
               note="4,096-token prompt, 128 out, one 755 × 1,170 stage; 84 % of it the floor, 14 % the "
                    "instruction streams (issues and kernel launches on every PE)"),
        anchor(GROUP, "LLaMA3-8B serving, 1 CS-3, one user: joules per output token", none, None, "J", CS3,
               prediction, lambda: _serve("llama3-8b").joules_per_token,
               note="prefill included; drawing 23 kW it would be 23 kW over wsesim's tokens/s"),
        anchor(GROUP, "LLaMA-3.1-70B serving, 4 CS-3s, one user: mean power per system", "~23 kW", 23.0, "kW", CS3,
               prediction, lambda: _serve("llama3.1-70b").power_w / 4e3, note="the serving row above's mapping"),
        anchor(GROUP, "LLaMA-3.1-70B serving, 4 CS-3s, one user: joules per output token", none, None, "J", CS3,
               prediction, lambda: _serve("llama3.1-70b").joules_per_token, digits=4,
               note="prefill included; 92 % of it four systems' floor, 7 % the instruction streams"),
    ]
