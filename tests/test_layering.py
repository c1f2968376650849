"""The layers of wsesim are its folders, each importing only those before it. Checked two ways:

* in a fresh interpreter, importing the engine loads no higher layer, and running the engine, runner,
  sweep, tune, trace export, wafer maps and ``wsesim run --json`` never imports matplotlib;
* statically (``ast``, lazy imports inside functions included): no module imports a later layer, only
  ``wsesim/output/plotting.py`` imports matplotlib, and the pure layers never print or write files.

A module's layer is its folder's (``LAYERS``); a new folder must be given one (a test fails until it is).
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
    "config": 1,       # units, errors, frozen specs, strict YAML, the loader: the only code that sees raw YAML
    "model": 2,        # pure models without SimPy: counts, op costs, SRAM, routing
    "fabric": 3,       # mesh, placement, traffic, the flow and packet fidelities
    "kernels": 4,      # GEMM, GEMV and collectives as schedules on the mesh; the training step's kernel cost
    "sim": 5,          # the step plan, trace records, the I/O links, the engines
    "analysis": 6,     # pure functions over a finished trace
    "experiments": 7,  # composition: runner, tune, sweep
    "output": 8,       # files and pictures (the only matplotlib importer)
    "cli": 9,          # the command line: chooses paths and prints
}
TOP_LEVEL = {"__init__", "__main__"}  # the lazy public API and ``python -m wsesim``
PURE = ("config", "model", "fabric", "kernels", "sim", "analysis", "experiments")
"""Folders whose modules never print and never write files (the CLI and ``output`` choose paths)."""
MAX_LINES = 420


def _modules() -> list[str]:
    """Every module as a dotted name below ``wsesim`` (``sim.engine``, ``__init__``, ``fabric.__init__``)."""
    return sorted(".".join(p.relative_to(PACKAGE).with_suffix("").parts) for p in PACKAGE.rglob("*.py"))


def _folder(module: str) -> str:
    return module.split(".")[0] if "." in module else ""


def _tree(module: str) -> ast.Module:
    path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imports(module: str) -> set[str]:
    """What ``module`` imports: wsesim's own as ``wsesim.<folder>`` (or ``wsesim`` for the package
    itself), others by their top-level name; ``importlib.import_module("...")`` of a literal name too."""
    package = ["wsesim", *module.split(".")[:-1]]
    out: set[str] = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = package[: len(package) - node.level + 1]
                if node.module is None:
                    names = [".".join([*base, a.name]) for a in node.names]
                else:
                    names = [".".join([*base, node.module])]
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


def test_every_folder_has_a_layer_and_the_top_level_is_small() -> None:
    folders = {_folder(m) for m in _modules()} - {""}
    assert folders <= set(LAYERS), f"give the new folder a layer in LAYERS: {sorted(folders - set(LAYERS))}"
    assert {m for m in _modules() if "." not in m} == TOP_LEVEL


@pytest.mark.parametrize("module", _modules())
def test_no_module_is_longer_than_a_reader_can_hold(module: str) -> None:
    path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


@pytest.mark.parametrize("module", [m for m in _modules() if _folder(m)])
def test_no_module_imports_a_later_layer(module: str) -> None:
    layer = LAYERS[_folder(module)]
    later = {name for name in _imports(module)
             if name.startswith("wsesim.") and LAYERS.get(name.removeprefix("wsesim."), 0) > layer}
    assert not later, f"{module} (layer {layer}) imports {sorted(later)}"
    assert "wsesim" not in _imports(module), f"{module} imports the package root (a cycle through the lazy API)"


LAZY_EXPORTS = {"__init__", "fabric.__init__", "cli.main"}
"""Modules that import by a computed name: the lazy public API (a relative name in their own package) and
the CLI's command registry (its own modules)."""


@pytest.mark.parametrize("module", [m for m in _modules() if m not in LAZY_EXPORTS])
def test_no_import_by_a_computed_name(module: str) -> None:
    """``importlib.import_module`` of a name the static check cannot read could hide a later layer (the
    config layer once loaded the sweep module that way)."""
    hidden = [node.lineno for node in ast.walk(_tree(module))
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and not (node.args and isinstance(node.args[0], ast.Constant))]
    assert hidden == [], f"{module}: import_module of a computed name at line(s) {hidden}"


@pytest.mark.parametrize("module", [m for m in _modules() if m != "output.plotting"])
def test_only_plotting_imports_matplotlib(module: str) -> None:
    assert "matplotlib" not in _imports(module)


def test_plotting_is_where_matplotlib_is() -> None:
    assert "matplotlib" in _imports("output.plotting")


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
        where = f"{module}:{node.lineno}"
        if name == "print" or name in _WRITING_METHODS and isinstance(func, ast.Attribute):
            found.append(f"{where}: {name}()")
        elif name in ("open", "fdopen"):
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
            if mode is not None and not (isinstance(mode, ast.Constant) and not set(str(mode.value)) & set("wax+")):
                found.append(f"{where}: open() for writing")
    return found


@pytest.mark.parametrize("module", [m for m in _modules() if _folder(m) in PURE])
def test_pure_layers_never_print_or_write(module: str) -> None:
    assert _side_effects(module) == []


def test_the_side_effect_check_sees_them() -> None:
    """The check itself: the CLI and plotting do print and write."""
    assert any("print()" in s for s in _side_effects("cli.hardware"))
    assert any("open() for writing" in s for s in _side_effects("output.files"))  # os.fdopen(fd, "w")
    assert any("write()" in s for s in _side_effects("output.files"))


_FRESH = """
import json, sys
from wsesim.sim.engine import simulate
engine_loads = sorted(m for m in sys.modules if m.startswith("wsesim."))
from wsesim.analysis.chrome_trace import chrome_trace
from wsesim.config.loader import load_experiment_data
from wsesim.experiments.runner import simulate_experiment
from wsesim.experiments.sweep import run_sweep, sweep_from_data
from wsesim.experiments.tune import tune
from wsesim.analysis.wafer import wafer_maps
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
    assert "sim.engine" in loaded_by_engine
    assert {m for m in loaded_by_engine if LAYERS.get(_folder(m) or m, 0) > LAYERS["sim"]} == set()
