"""The layer order of /work/shared/STYLE.md ("each importing only those before it"), checked two ways:

* in a fresh interpreter, importing the engine loads no higher layer, and running the engine, runner,
  sweep, tune, trace export, wafer maps and ``wsesim run --json`` never imports matplotlib;
* statically (``ast``, lazy imports inside functions included): no module imports a later layer, only
  ``wsesim/plotting.py`` imports matplotlib, and the pure layers never print or write files.

A new module must be given a layer in ``LAYERS`` (a test fails until it is).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "wsesim"

LAYERS = {
    # 1. units and errors
    "errors": 1, "units": 1,
    # 2. frozen specs
    "specs": 2,
    # 3. the only code that touches raw YAML
    "loader": 3, "yaml_strict": 3,
    # 4. pure models, without SimPy
    "memory": 4, "costs": 4, "mesh": 4, "fabric": 4, "fabric_flow": 4, "fabric_packet": 4, "fabric_traffic": 4,
    "streams": 4, "step": 4,
    # 5. the event engine
    "engine": 5,
    # 6. pure functions over a finished run's trace
    "results": 6, "chrome_trace": 6, "wafer": 6,
    # 7. composition
    "runner": 7, "sweep": 7, "tune": 7,
    # 8. pictures, files and the command line
    "plotting": 8, "files": 8, "cli": 8, "cli_run": 8, "cli_sweep": 8, "cli_fabric": 8, "__main__": 8,
}
UNLAYERED = {"__init__"}  # the package re-exports; the subprocess test guards what importing it costs
PURE = sorted(m for m, layer in LAYERS.items() if layer <= 6)
"""Modules that never print and never write files (the CLI chooses paths and prints)."""


def _modules() -> list[str]:
    return sorted(p.stem for p in PACKAGE.glob("*.py"))


def _tree(module: str) -> ast.Module:
    path = PACKAGE / f"{module}.py"
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imports(module: str) -> set[str]:
    """Top-level names of what ``module`` imports, wsesim modules as ``wsesim.<name>``; with
    ``importlib.import_module("...")`` of a literal name."""
    out: set[str] = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x / from .x import y
                names = [f"wsesim.{a.name}" for a in node.names] if node.module is None else [f"wsesim.{node.module}"]
            else:
                names = [node.module or ""]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)):
            names = [str(node.args[0].value)]
        else:
            continue
        for name in names:
            parts = name.split(".")
            out.add(".".join(parts[:2]) if parts[0] == "wsesim" else parts[0])
    return out


def test_every_module_has_a_layer() -> None:
    assert set(_modules()) - UNLAYERED == set(LAYERS), "give the new module a layer in LAYERS"


@pytest.mark.parametrize("module", sorted(LAYERS))
def test_no_module_imports_a_later_layer(module: str) -> None:
    later = {name for name in _imports(module)
             if name.startswith("wsesim.") and LAYERS.get(name.removeprefix("wsesim."), 0) > LAYERS[module]}
    assert not later, f"{module} (layer {LAYERS[module]}) imports {sorted(later)}"


@pytest.mark.parametrize("module", [m for m in _modules() if m != "plotting"])
def test_only_plotting_imports_matplotlib(module: str) -> None:
    assert "matplotlib" not in _imports(module)


def test_plotting_is_where_matplotlib_is() -> None:
    assert "matplotlib" in _imports("plotting")


_WRITING_METHODS = {"write", "writelines", "write_text", "write_bytes", "mkdir", "makedirs", "touch", "savefig",
                    "dump", "unlink", "rmdir", "rmtree"}


def _side_effects(module: str) -> list[str]:
    """Calls that print or write: print(), open() for writing, and file-writing methods."""
    found = []
    for node in ast.walk(_tree(module)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        where = f"{module}.py:{node.lineno}"
        if name == "print" or name in _WRITING_METHODS and isinstance(func, ast.Attribute):
            found.append(f"{where}: {name}()")
        elif name in ("open", "fdopen"):
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            if mode is not None and not (isinstance(mode, ast.Constant) and not set(str(mode.value)) & set("wax+")):
                found.append(f"{where}: open() for writing")
    return found


@pytest.mark.parametrize("module", PURE)
def test_pure_layers_never_print_or_write(module: str) -> None:
    assert _side_effects(module) == []


def test_the_side_effect_check_sees_them() -> None:
    """The check itself: the CLI and plotting do print and write."""
    assert any("print()" in s for s in _side_effects("cli"))
    assert any("open() for writing" in s for s in _side_effects("files"))  # os.fdopen(fd, "w")
    assert any("write()" in s for s in _side_effects("files"))


_FRESH = """
import json, sys
from wsesim.engine import simulate
engine_loads = sorted(m for m in sys.modules if m.startswith("wsesim."))
from wsesim.chrome_trace import chrome_trace
from wsesim.loader import load_experiment_data
from wsesim.runner import simulate_experiment
from wsesim.sweep import run_sweep, sweep_from_data
from wsesim.tune import tune
from wsesim.wafer import wafer_maps
base = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 2}, "simulation": {"granularity": "pe"}}
loaded = load_experiment_data(base)
run = simulate_experiment(loaded.spec)
assert run.result.feasible
chrome_trace(run.trace, run.plan)
wafer_maps(run)
tune(loaded)
sweep = sweep_from_data({"kind": "sweep", "base": base, "grid": {"training.tiles": [1, "tuned"]}},
                        source="<fresh>", base_dir=None)
assert [r["status"] for r in run_sweep(sweep, workers=1)] == ["ok", "ok"]
from wsesim import cli
assert cli.main(["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
                 "--set", "training.seq_len=16", "--json"]) == 0
print()
print(json.dumps({"engine_loads": engine_loads,
                  "matplotlib": sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib")}))
"""


def test_running_the_engine_never_imports_matplotlib(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-c", _FRESH], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       check=False)
    assert (r.returncode, r.stderr) == (0, "")
    seen = json.loads(r.stdout.splitlines()[-1])
    assert seen["matplotlib"] == []
    loaded_by_engine = {m.removeprefix("wsesim.") for m in seen["engine_loads"]}
    assert "engine" in loaded_by_engine
    assert {m for m in loaded_by_engine if LAYERS.get(m, 0) > LAYERS["engine"]} == set()
