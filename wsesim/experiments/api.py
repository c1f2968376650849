"""The Python face of wsesim (``wsesim.load_experiment``, ``wsesim.results_frame``, ...): the loader's
functions with errors that speak to a Python caller, and results as a pandas DataFrame.

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


def validate_file(path: str | Path) -> tuple[str, Any]:
    """``config.loader.validate_file`` with every kind known, the sweep kind included (registered by
    ``experiments.sweep``, which the config layer may not import); returns (kind, spec)."""
    from ..config import inference  # noqa: F401 - registers the inference kind
    from . import sweep  # noqa: F401 - registers the sweep kind

    return _python_errors(loader.validate_file)(path)


def results_frame(results: Any) -> Any:
    """A pandas DataFrame, one row per run, phases as flat ``phase_<name>_cycles`` columns, from:

    * a ``results.csv`` path (what ``wsesim sweep`` wrote; numbers as numbers, an empty cell as NaN);
    * the rows ``run_sweep`` returns;
    * a ``RunResult``, a ``TuneResult`` (its candidates, with a ``best`` column) or an iterable of either.

    Needs pandas (``pip install 'wsesim[pandas]'``); raises ``ImportError`` saying so without it."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("results_frame needs pandas: pip install 'wsesim[pandas]'") from None
    if isinstance(results, (str, Path)):
        from .table import read_results_table

        header, rows = read_results_table(results)
        frame = pd.DataFrame(rows, columns=header)
        for column in frame.columns:
            frame[column] = _typed(pd, frame[column])
        return frame
    return pd.DataFrame(_records(results))


def _records(results: Any) -> list[dict[str, Any]]:
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
