"""wsesim: a discrete-event simulator of wafer-scale processors training Mixture-of-Experts models.

The public API, for use from Python (the ``wsesim`` command wraps the same functions; the README's
"Python API" shows more)::

    from wsesim import load_experiment, load_sweep, results_frame, run_experiment, run_sweep, tune
    loaded = load_experiment(overrides={"model.top_k": 1})
    print(run_experiment(loaded.spec).throughput_tokens_per_s, tune(loaded).best.tiles)
    frame = results_frame(run_sweep(load_sweep("workloads/qwen3-30b-a3b/bta-paper.yaml")))  # needs pandas

Serving and kernels the same way, and a run's folder or trace written as the commands write them::

    served = wsesim.infer(overrides={"inference.scheduler.batch": 4})  # a Run; served.result.ttft_s, ...
    wsesim.write_run(served, "out/serve", wsesim.load_inference(overrides={"inference.scheduler.batch": 4}))
    print(wsesim.kernel("gemv", "420x420", shape="1x16384x16384").cycles)

An error in ``overrides`` names the key (``overrides: model.top_k: ...``), not the command line's ``--set``.

The names below are imported on first use, so that ``import wsesim.sim.executors.engine`` loads only the
layers the engine needs. Importing wsesim never imports matplotlib; ``wsesim.output.plotting`` does (through
``wsesim.output.mpl``).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

# wsesim's matrix products are small and many (the dispatch model's, two per MoE layer a step): OpenBLAS's
# worker threads would spin between them, taking the cores the dispatch model's own threads and other
# processes need (a third of a 512-expert run's wall time on a busy two-core machine). One thread gives
# the same bits (numpy's products here are matrix-vector, each output one thread's dot product). Set
# before numpy loads, as OpenBLAS reads it then; a caller's own setting is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .config.version import __version__ as __version__  # noqa: E402 - the one place it is written

_EXPORTS = {
    "ConfigError": "config.errors", "InternalError": "config.errors", "WsesimError": "config.errors",
    "load_experiment": "experiments.api", "load_experiment_data": "experiments.api",
    "load_hardware": "experiments.api", "load_model": "experiments.api", "results_frame": "experiments.api",
    "validate_file": "experiments.api", "load_inference": "experiments.api", "infer": "experiments.api",
    "kernel": "experiments.api", "write_run": "output.run_folder", "write_trace": "output.run_folder",
    "AttentionTiling": "model.attention_tiling", "max_batch_per_tile": "model.memory",
    "max_tiles": "model.memory", "training_memory": "model.memory",
    "RunResult": "analysis.results",
    "Run": "experiments.runs", "run_experiment": "experiments.runner",
    "simulate_experiment": "experiments.runner",
    "load_sweep": "experiments.sweep", "run_sweep": "experiments.sweep",
    "TuneResult": "experiments.tune", "tune": "experiments.tune",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'wsesim' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API and the module's own dunders, not the names this file imports to build it (``Any``,
    ``annotations``, ``importlib``)."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__") and n.endswith("__"))})
