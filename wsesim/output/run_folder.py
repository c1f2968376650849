"""What a command writes into its folder, each file once, for the command line and for Python alike:

* ``records_csv`` — a list of flat records as CSV (the columns in order of first appearance), and
  ``flat``, a nested record (a kernel's ``critical_path``, a fabric run's ``mesh``) as one flat row
  (``critical_path_compute``); ``tune --out``'s ``candidates.csv``, ``kernel --out``'s ``kernels.csv``,
  ``fabric --out``'s ``fabric.csv``.
* ``write_trace`` — a finished run's Chrome/Perfetto trace (a training step's or a serving run's),
  gzip-compressed when the name ends in ``.gz`` (no timestamp in the header: the same trace, the same
  bytes).
* ``run_files`` — what ``run --out`` and ``infer --out`` hold besides the manifest, for either kind:
  ``result.json`` (``saved_result``: without the host's seconds), ``ops.csv`` (the step's ops, or one
  decode step's), a training run's ``wafer.json`` and a serving run's ``requests.csv``; ``write_run``
  writes them with the ``manifest.json`` (``manifest.write_manifest``), for Python (``wsesim.write_run``).

Nothing here runs a simulation or prints; the folder is held (``files.command_folder``) while written.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .files import atomic_write_bytes, atomic_write_text, command_folder, prepare_dir
from .manifest import write_manifest

__all__ = ["flat", "records_csv", "run_files", "saved_result", "write_records", "write_run", "write_trace"]


def flat(record: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested record as one flat row: ``{"grid": {"rows": 4}}`` -> ``{"grid_rows": 4}``; a list of plain
    values joined by "; " (a list of records is left out: ``records_csv`` is one row per record)."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat(value, f"{name}_"))
        elif isinstance(value, (list, tuple)):
            if all(not isinstance(v, (Mapping, list, tuple)) for v in value):
                out[name] = "; ".join(str(v) for v in value)
        else:
            out[name] = "" if value is None else value
    return out


def records_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as CSV text, one column per key in order of first appearance (a key a row lacks: empty)."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def write_records(folder: str | Path, kind: str, argv: list[str] | None,
                  tables: Mapping[str, Sequence[Mapping[str, Any]]], **content: Any) -> list[Path]:
    """``tables`` (a file's name -> its records; one without records is not written) as CSV files into
    ``folder``, held for command ``kind``, and its manifest.json (``content``: the flags, the hardware);
    the paths written."""
    with command_folder(prepare_dir(folder), kind) as out:
        names = [name for name, rows in tables.items() if rows]
        for name in names:
            atomic_write_text(out / name, records_csv(tables[name]))
        return [*(out / name for name in names), write_manifest(out, kind, argv, names, **content)]


def write_trace(run: Any, path: str | Path, loaded: Any = None) -> Path | None:
    """Write ``run``'s Chrome/Perfetto trace to ``path`` (``.json``, or gzip for ``.json.gz`` with no
    timestamp in its header: the same trace, the same bytes); its folder is made. A serving run needs the
    ``loaded`` experiment it served (its timestamps need its clock). Returns the path, or None when nothing
    ran (an infeasible configuration)."""
    # local: keeps numpy and the analysis layer out of output.run_folder's import
    from ..analysis.chrome_trace import chrome_trace

    clock = loaded.spec.hardware.clock_hz if loaded is not None else None
    if run.serving and clock is None:
        raise ValueError("a serving run's trace needs loaded= (the experiment it served: its clock)")
    if run.trace is None or not run.result.feasible:
        return None
    data = json.dumps(chrome_trace(run.trace, clock_hz=clock) if run.serving
                      else chrome_trace(run.trace, run.plan)).encode()
    prepare_dir(Path(path).parent)
    atomic_write_bytes(path, gzip.compress(data, 6, mtime=0) if str(path).endswith(".gz") else data)
    return Path(path)


def saved_result(result: Any) -> dict[str, Any]:
    """A result as ``result.json`` and ``candidates.json`` hold it, of either kind: every field but the
    host's seconds (``WALL_CLOCK_FIELDS``: they are the manifest's), so that the file is the same bytes for
    the same inputs."""
    # local: keeps numpy and the analysis layer out of output.run_folder's import
    from ..analysis.results import WALL_CLOCK_FIELDS

    return {k: v for k, v in result.to_dict().items() if k not in WALL_CLOCK_FIELDS}


def run_files(folder: Path, run: Any, spec: Any, maps: Any = None, candidates: Any = ()) -> list[Path]:
    """A run's files besides the manifest, into ``folder``; the paths written. Either kind: its
    ``result.json`` (``saved_result``); when a training step ran, its ``ops.csv`` and (``maps``: its wafer
    maps, made here when not given) ``wafer.json``; a serving run of ``spec``, when it was served, its
    ``requests.csv`` (each request's times, ``analysis.requests``) and ``ops.csv`` (one decode step's ops,
    stage by stage, ``analysis.serving_ops``), and a search's ``candidates`` (``candidates.json``)."""
    saved = json.dumps(saved_result(run.result), indent=2) + "\n"
    files: list[tuple[str, Any]] = [("result.json", lambda: saved)]
    if run.serving:
        # local: keeps numpy and the analysis layer out of output.run_folder's import
        from ..analysis.ops import table_csv
        from ..analysis.requests import request_times, requests_csv
        from ..analysis.serving_ops import DECODE_OPS_COLUMNS, decode_ops

        if run.trace is not None and run.program is not None:
            files.append(("requests.csv", lambda: requests_csv(request_times(spec, run.program, run.trace))))
        if run.result.feasible and run.program is not None and run.costs is not None:
            files.append(("ops.csv", lambda: table_csv(decode_ops(spec, run.program, run.costs),
                                                       DECODE_OPS_COLUMNS)))
        (folder / "candidates.json").unlink(missing_ok=True)  # an earlier search's would read as this run's
        if candidates:
            shown = [{k: v for k, v in saved_result(c).items() if k != "per_stage"} for c in candidates]
            files.append(("candidates.json", lambda: json.dumps(shown, indent=2) + "\n"))
    elif run.result.feasible:
        # local: keeps numpy and the analysis layer out of output.run_folder's import
        from ..analysis.ops import OPS_COLUMNS, ops_table, table_csv
        from ..analysis.wafer import wafer_maps

        files += [("ops.csv", lambda: table_csv(ops_table(run.trace), OPS_COLUMNS)),
                  ("wafer.json", lambda: json.dumps((maps or wafer_maps(run)).to_dict()))]
    for name, text in files:
        atomic_write_text(folder / name, text())
    return [folder / name for name, _ in files]


def write_run(run: Any, folder: str | Path, loaded: Any) -> list[Path]:
    """``wsesim run --out`` (a training ``Run``) or ``wsesim infer --out`` (a serving ``Run``) from Python:
    the run's files and a ``manifest.json`` (command ``python``, the ``loaded`` experiment resolved) into
    ``folder``, held while written; the paths written."""
    kind = "infer" if run.serving else "run"
    with command_folder(prepare_dir(folder), kind) as out:
        written = run_files(out, run, loaded.spec)
        return [*written, write_manifest(out, kind, None, written, loaded=loaded, overrides={"python": True},
                                         wall_s=run.result.wall_s, command="python: wsesim.write_run")]
