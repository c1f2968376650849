"""wsesim: a discrete-event simulator of wafer-scale processors training Mixture-of-Experts models.

The public API, for use from Python (the ``wsesim`` command wraps the same functions)::

    from wsesim import load_experiment, run_experiment, tune
    loaded = load_experiment(overrides={"model.top_k": 1})
    print(run_experiment(loaded.spec).throughput_tokens_per_s, tune(loaded).best.tiles)

The names below are imported on first use, so that ``import wsesim.engine`` loads only the layers the
engine needs. Importing wsesim never imports matplotlib; ``wsesim.plotting`` does.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "ConfigError": "errors", "WsesimError": "errors",
    "load_experiment": "loader", "load_experiment_data": "loader", "load_hardware": "loader",
    "load_model": "loader", "validate_file": "loader",
    "AttentionTiling": "memory", "max_batch_per_tile": "memory", "max_tiles": "memory",
    "training_memory": "memory",
    "RunResult": "results",
    "Run": "runner", "run_experiment": "runner", "simulate_experiment": "runner",
    "load_sweep": "sweep", "run_sweep": "sweep",
    "TuneResult": "tune", "tune": "tune",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'wsesim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return [*globals(), *__all__]
