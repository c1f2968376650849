"""The Python face of wsesim (``wsesim.load_experiment``, ``wsesim.infer``, ``wsesim.kernel``,
``wsesim.results_frame``, ...): the loader's functions with errors that speak to a Python caller, serving
and kernels beside training, and results as a pandas DataFrame.

The loader names the source of an override ``--set``, as the command line gives them; here overrides
come as a mapping, so an error in one names ``overrides`` and the key (``overrides: model.top_k:
expected at most experts (8), got 99``). Everything else is the loader's, unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ..config import loader
from ..config.errors import ConfigError
from ..config.inference import load_inference as load
from ..config.loader import Loaded

OVERRIDES = "overrides"
_F = TypeVar("_F", bound=Callable[..., Any])


def _python_errors(function: _F) -> _F:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except ConfigError as e:
            if e.source != "--set":
                raise
            raise ConfigError(e.message, source=OVERRIDES, path=e.path) from None

    return wrapper  # type: ignore[return-value]


load_experiment = _python_errors(loader.load_experiment)
load_experiment_data = _python_errors(loader.load_experiment_data)
load_hardware = _python_errors(loader.load_hardware)
load_model = _python_errors(loader.load_model)


@_python_errors
def load_inference(path: str | Path | None = None, *, hardware: str | None = None, model: str | None = None,
                   overrides: Mapping[str, Any] | None = None) -> Any:
    """A serving experiment (``kind: inference``; the shipped LLaMA3-8B on WSE-2 when ``path`` is None), as
    ``wsesim infer`` loads it: ``hardware``/``model`` a preset name or a file, ``overrides`` dotted keys
    (``{"inference.scheduler.batch": 4, "model": "llama2-7b"}``). Returns a ``Loaded`` (its ``spec``
    validated)."""
    return load(path, hardware=hardware, model=model, overrides=dict(overrides or {}))


@_python_errors
def infer(experiment: Any = None, *, hardware: str | None = None, model: str | None = None,
          overrides: Mapping[str, Any] | None = None, engine: str | None = None, search: bool = False,
          objective: str = "tpot", spans: bool = False) -> Any:
    """Serve a model as ``wsesim infer`` does: ``experiment`` a ``kind: inference`` file (None: the shipped
    example) or what ``load_inference`` returned; ``search`` tries the rectangles that tile the wafer and
    keeps the best by ``objective`` (``tpot``, ``ttft`` or ``throughput``: ``inference.OBJECTIVES``).
    Returns a ``Run`` (``experiments.runs``): its ``result`` (a ``ServeResult``: ``ttft_s``, ``tpot_s``,
    ``tokens_per_s_per_request``, ``tokens_per_s``, ``feasible``, ...) and what made it (mapping, program,
    costs, trace) for ``wsesim.write_run`` and ``wsesim.write_trace`` (``spans``: the run logs which
    requests each iteration carries, for a trace's spans to name them, as ``infer --trace`` does). A
    mapping that does not fit is a result with its reason; work that cannot finish here is a
    ``ConfigError``. ``engine``: the executor, in place of the experiment's ``simulation.engine``."""
    # local: keeps the engine (SimPy) out of experiments.api's import (the lazy API's loaders)
    from .inference import search_mapping
    from .runner import run_inference

    if isinstance(experiment, Loaded):
        if hardware or model or overrides:
            raise ConfigError("expected hardware=, model= and overrides= only with a file (or None), not "
                              "with an experiment already loaded", source=OVERRIDES)
        loaded = experiment
    else:
        loaded = load_inference(experiment, hardware=hardware, model=model, overrides=overrides)
    spec = loaded.spec if engine is None else loaded.spec.on(engine)
    if search:
        return search_mapping(spec, objective=objective, spans=spans)[0]
    return run_inference(spec, spans=spans)


@_python_errors
def kernel(kind: str, grid: str | tuple[int, int] | None = None, *,
           shape: str | tuple[int, int, int] | None = None, hardware: str | Path = "wse2",
           overrides: Mapping[str, Any] | None = None, dtype: str = "fp16", algorithm: str | None = None,
           wavelets: int = 1, **gpu: Any) -> Any:
    """Simulate one kernel as ``wsesim kernel`` does: ``kind`` gemm, gemv, reduce, allreduce, broadcast or
    alltoall; ``grid`` rows × columns of PEs (``"420x420"`` or ``(420, 420)``; None: the whole mesh);
    ``shape`` M × K × N for a GEMM or GEMV (``"1x16384x16384"`` or a tuple); ``wavelets`` per PE for a
    collective; ``hardware`` a preset or file, ``overrides`` its keys (``{"hardware.pe.sram": "96 KiB"}``).
    Returns a ``KernelResult`` (``cycles``, ``seconds``, ``efficiency``, ``feasible``, ``reason``,
    ``to_dict()`` as ``--json`` prints it). On a GPU preset (``hardware="h100"``) ``grid`` is nodes × GPUs
    (None: one GPU, or a node for a collective), ``wavelets`` values per GPU, ``gpu`` the GPU kernels' own
    arguments (``experts``, ``heads``, ``kv_heads``, ``causal``, ``graphs``), and the result a
    ``GpuKernelResult`` (``kernels.gpu.registry.run_gpu_kernel``, docs/model.md §13)."""
    # local: the table imports both kinds' engines, which the lazy API loads only when asked
    from .hardware_kinds import hardware_kind

    hw = load_hardware(hardware, overrides)
    return hardware_kind(hw).kernel(hw, kind, grid, shape, dtype, algorithm, wavelets, **gpu)


def validate_file(path: str | Path) -> tuple[str, Any]:
    """``config.loader.validate_file`` with every kind known, the sweep kind included (registered by
    ``experiments.sweep``, which the config layer may not import; ``inference``'s by ``config.inference``,
    imported with this module); returns (kind, spec)."""
    # local: keeps the engine (SimPy) out of experiments.api's import; importing it registers the sweep kind
    from . import sweep  # noqa: F401

    return _python_errors(loader.validate_file)(path)


def results_frame(results: Any) -> Any:
    """A pandas DataFrame, one row per run, phases as flat ``phase_<name>_cycles`` columns, from:

    * a ``results.csv`` path (what ``wsesim sweep`` wrote; numbers as numbers, an empty cell as NaN);
    * the rows ``run_sweep`` returns;
    * a ``RunResult``, a ``TuneResult`` (its candidates, with a ``best`` column) or an iterable of either.

    Needs pandas (``pip install 'wsesim[pandas]'``); raises ``ImportError`` saying so without it."""
    try:  # local: pandas is optional (results_frame alone needs it)
        import pandas as pd
    except ImportError:
        raise ImportError("results_frame needs pandas: pip install 'wsesim[pandas]'") from None
    if isinstance(results, (str, Path)):
        # local: keeps the results table's modules (the analysis layer) out of experiments.api's import
        from .table import read_results_table

        header, rows = read_results_table(results)
        frame = pd.DataFrame(rows, columns=header)
        for column in frame.columns:
            frame[column] = _typed(pd, frame[column])
        return frame
    return pd.DataFrame(_records(results))


def _records(results: Any) -> list[dict[str, Any]]:
    # local: keeps the engine (SimPy) out of experiments.api's import (the lazy API's loaders)
    from ..analysis.results import RunResult
    from .tune import TuneResult

    if isinstance(results, RunResult):
        return [results.scalars()]
    if isinstance(results, TuneResult):
        return [{**c.scalars(), "best": c is results.best and c.feasible} for c in results.candidates]
    if isinstance(results, Mapping):
        return [dict(results)]
    if isinstance(results, Iterable):
        return [r for item in results for r in _records(item)]
    raise TypeError("expected a results.csv path, sweep rows, a RunResult or a TuneResult, "
                    f"got {type(results).__name__}")


def _typed(pd: Any, column: Any) -> Any:
    """A CSV column as numbers where every filled cell is one, booleans where all are True/False."""
    filled = column[column != ""]
    if len(filled) and filled.isin(["True", "False"]).all():
        return column.map({"True": True, "False": False, "": None})
    try:
        return pd.to_numeric(column.replace("", None))
    except (ValueError, TypeError):
        return column
