"""The layers of wsesim are its folders, each importing only those before it. Checked two ways:

* in a fresh interpreter, importing the engine loads no higher layer, and running the engine, runner,
  sweep, tune, trace export, wafer maps and ``wsesim run --json`` never imports matplotlib, and a training
  run on a wafer loads neither serving's specs nor a GPU's;
* statically (``ast``, lazy imports inside functions and under ``if TYPE_CHECKING:`` included): no module
  imports a later layer, no two modules import each other through any chain (no import cycle, package
  ``__init__`` re-exports included), only ``wsesim/output/mpl.py`` imports matplotlib, and the pure layers
  never print or write files.

A module's layer is its folder's (``LAYERS``); a new folder must be given one (a test fails until it is).
"""

from __future__ import annotations

import ast
import functools
import importlib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
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


@functools.cache
def _modules() -> list[str]:
    """Every module as a dotted name below ``wsesim`` (``sim.executors.engine``, ``__init__``, ``fabric.__init__``)."""
    return sorted(".".join(p.relative_to(PACKAGE).with_suffix("").parts) for p in PACKAGE.rglob("*.py"))


def _folder(module: str) -> str:
    return module.split(".")[0] if "." in module else ""


def _tree(module: str) -> ast.Module:
    path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imported_names(module: str) -> list[str]:
    """Every dotted name ``module`` imports, anywhere in it, relative imports resolved (``from .x import y``
    gives ``….x.y``: a module, or a name in ``….x``); ``importlib.import_module("...")`` of a literal too."""
    package = ["wsesim", *module.split(".")[:-1]]
    out: list[str] = []
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (".".join([*package[: len(package) - node.level + 1], *filter(None, [node.module])])
                    if node.level else node.module or "")
            out += [f"{base}.{a.name}" for a in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)):
            out.append(str(node.args[0].value))
    return out


def _module_of(dotted: str) -> str | None:
    """The wsesim module a dotted name loads, in ``_modules()``'s spelling (None outside wsesim):
    ``wsesim.fabric.mesh.Mesh`` → ``fabric.mesh``, ``wsesim.fabric`` → ``fabric.__init__``, a package's
    lazy export (``wsesim.fabric.Mesh``, ``wsesim.run_experiment``) → the module it comes from, and
    ``wsesim.__version__`` → ``__init__``."""
    parts = dotted.split(".")
    if parts[0] != "wsesim":
        return None
    for n in range(len(parts), 0, -1):
        for candidate in (".".join(parts[1:n]), ".".join([*parts[1:n], "__init__"])):
            if candidate not in _modules():
                continue
            exports = _LAZY_EXPORTS_OF.get(candidate, dict)()
            if candidate.endswith("__init__") and n < len(parts) and parts[n] in exports:
                return _module_of(exports[parts[n]])
            return candidate
    return None


def _package_exports(package: str) -> dict[str, str]:
    """A package's lazy public names (its ``_EXPORTS``) → the dotted module each comes from."""
    exports = importlib.import_module(package)._EXPORTS
    return {name: f"{package}.{module}" for name, module in exports.items()}


_LAZY_EXPORTS_OF: dict[str, Callable[[], dict[str, str]]] = {
    "__init__": lambda: _package_exports("wsesim"),
    "fabric.__init__": lambda: _package_exports("wsesim.fabric"),
    "kernels.__init__": lambda: _package_exports("wsesim.kernels"),
}
"""Packages whose ``__init__`` exports names lazily: importing such a name imports the module it comes from."""


def _references(table: str) -> list[str]:
    """The modules a plug-in table's ``"module:attribute"`` references name (``config.tables.load``)."""
    module, _, name = table.rpartition(".")
    values = getattr(importlib.import_module(module), name).values()
    return [(v if isinstance(v, str) else v.cls).partition(":")[0] for v in values]


TABLE_IMPORTS: dict[str, Callable[[], Iterable[str]]] = {
    **{module: lambda module=module: _LAZY_EXPORTS_OF[module]().values() for module in _LAZY_EXPORTS_OF},
    "cli.main": lambda: importlib.import_module("wsesim.cli.main")._EXTENSION_MODULES,
    "fabric.fidelity": lambda: _references("wsesim.fabric.fidelity.FABRICS"),
}
"""Modules that import through a table, and what they import, read from it: the lazy public API (a
relative name in its own package), the CLI's command table (its own modules), and the plug-in tables
whose entries name code as ``"module:attribute"`` (``config.tables.load`` imports it; the module holding
the table counts as importing it). The layer and cycle checks count these imports."""


def _computed_imports(module: str) -> set[str]:
    """The wsesim modules ``module`` imports through a table (``TABLE_IMPORTS``)."""
    return {m for name in TABLE_IMPORTS.get(module, tuple)() if (m := _module_of(name)) is not None}


def _imports(module: str) -> set[str]:
    """What ``module`` imports: wsesim's own as ``wsesim.<folder>`` (or ``wsesim`` for the package
    root's own names), others by their top-level name; computed imports read from their tables."""
    out = {name.split(".")[0] for name in _imported_names(module) if name.split(".")[0] != "wsesim"}
    for target in _module_imports(module):
        out.add(f"wsesim.{_folder(target)}" if _folder(target) else "wsesim")
    return out


def _module_imports(module: str) -> set[str]:
    """The wsesim modules ``module`` imports (``_modules()``'s spelling), by name or computed, anywhere in
    it: under ``if TYPE_CHECKING:`` and inside functions too (a circle there is a circle in the design)."""
    found = {_module_of(name) for name in _imported_names(module)} | _computed_imports(module)
    return {m for m in found if m is not None and m != module}


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
    root = [n for n in _imported_names(module) if _module_of(n) == "__init__" and n != "wsesim.__version__"]
    assert not root, f"{module} imports the package root ({root}): its lazy API hides what it loads"


SIM_ROOMS = {"programs": 1, "cost": 2, "executors": 3}
"""``wsesim/sim``'s rooms, in the order they may import one another: what a workload is, what it costs,
how it runs (docs/architecture.md, layer 5)."""


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "sim" and len(parts) > 2 else None


def test_every_sim_module_is_in_a_room() -> None:
    assert {m for m in _modules() if m.startswith("sim.") and _room(m) is None} == {"sim.__init__"}
    assert {_room(m) for m in _modules() if _room(m)} == set(SIM_ROOMS)


@pytest.mark.parametrize("module", [m for m in _modules() if _room(m)])
def test_no_sim_room_imports_a_later_room(module: str) -> None:
    """A program never imports its costs or executors, a cost never an executor (function-local imports
    and those under ``TYPE_CHECKING`` included)."""
    room = SIM_ROOMS[_room(module) or ""]
    later = sorted(m for m in _module_imports(module) if _room(m) and SIM_ROOMS[_room(m) or ""] > room)
    assert not later, f"{module} ({_room(module)}) imports {later}"


def test_the_import_reader_resolves_modules_and_lazy_exports() -> None:
    """The reader the layer and cycle checks stand on: submodules, packages, lazy exports, computed names."""
    assert _module_of("wsesim.fabric.mesh.Mesh") == "fabric.mesh"
    assert _module_of("wsesim.fabric") == "fabric.__init__"
    assert _module_of("wsesim.fabric.Mesh") == "fabric.mesh"  # through fabric's lazy exports
    assert _module_of("wsesim.run_experiment") == "experiments.runner"
    assert _module_of("wsesim.__version__") == "__init__"
    assert _module_of("numpy.random") is None
    assert "sim.executors.experts" in _module_imports("sim.executors.engine")
    assert "cli.run" in _module_imports("cli.main")  # its command table
    assert "wsesim.experiments" in _imports("__init__")  # the lazy API's table
    assert {"fabric.packet", "fabric.packet_simpy"} <= _module_imports("fabric.fidelity")  # its FABRICS
    assert "sim.executors.reference" in _module_imports("sim.executors.engines")  # its ENGINES


_REFERENCE = re.compile(r"^wsesim(\.\w+)+:\w+$")


@pytest.mark.parametrize("module", _modules())
def test_every_table_of_references_is_read_by_the_checks(module: str) -> None:
    """A ``"module:attribute"`` string is an import that ``config.tables.load`` makes: the module holding
    it must be in ``TABLE_IMPORTS`` so that the layer and cycle checks count it, and each must load."""
    references = [node.value for node in ast.walk(_tree(module))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and _REFERENCE.match(node.value)]
    if references:
        assert module in TABLE_IMPORTS, f"{module} names {references[0]!r}: read its table in TABLE_IMPORTS"
        assert {_module_of(r.partition(":")[0]) for r in references} <= _computed_imports(module)


def _cycles() -> list[list[str]]:
    """Every import cycle among wsesim's modules: the strongly connected components of more than one
    module (Tarjan), each as one closed path through it (``a → b → … → a``), largest first."""
    graph = {m: sorted(_module_imports(m)) for m in _modules()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            components.append([v, *component])

    for v in graph:
        if v not in index:
            visit(v)
    return [_closed_path(graph, sorted(c)) for c in sorted(components, key=len, reverse=True) if len(c) > 1]


def _closed_path(graph: dict[str, list[str]], component: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside the component."""
    start, inside = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in graph[v]:
                if w in inside and w not in came_from:
                    came_from[w] = v
                    following.append(w)
        if start in came_from:
            break
        frontier = following
    path = [start]
    while (path[-1] != start or len(path) == 1):
        path.append(came_from[path[-1]])
    return path[::-1]


def test_no_import_cycle() -> None:
    """No module imports one that imports it back, through any chain of imports (the layer check alone
    allows a circle inside a folder)."""
    cycles = _cycles()
    assert cycles == [], "import cycles: " + "; ".join(" → ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself: an import added against the grain (the mesh importing the packet fidelity, which
    imports the flow fidelity, which imports the mesh) is found and reported as a closed path."""
    real = _module_imports
    monkeypatch.setattr(sys.modules[__name__], "_module_imports",
                        lambda m: real(m) | ({"fabric.packet"} if m == "fabric.mesh" else set()))
    ring = next(c for c in _cycles() if "fabric.packet" in c)
    assert ring[0] == ring[-1] and "fabric.mesh" in ring
    assert all(b in _module_imports(a) for a, b in zip(ring, ring[1:], strict=False))


def test_a_package_importing_its_own_submodules_is_no_cycle() -> None:
    """``fabric/__init__`` re-exports its submodules, and ``cli/fabric`` imports the package: no cycle,
    since no fabric module imports the package back."""
    assert "fabric.mesh" in _module_imports("fabric.__init__")
    assert "fabric.__init__" in _module_imports("cli.fabric")
    assert not any("fabric.__init__" in c for c in _cycles())


COMPUTED_IMPORTERS = {"__init__", "fabric.__init__", "kernels.__init__", "cli.main", "config.tables"}
"""The modules that call ``importlib.import_module`` with a computed name: the lazy public APIs, the CLI's
command table, and ``config.tables.load``, each importing only what a table in ``TABLE_IMPORTS`` names."""


@pytest.mark.parametrize("module", [m for m in _modules() if m not in COMPUTED_IMPORTERS])
def test_no_import_by_a_computed_name(module: str) -> None:
    """``importlib.import_module`` of a name the static check cannot read could hide a later layer (the
    config layer once loaded the sweep module that way)."""
    hidden = [node.lineno for node in ast.walk(_tree(module))
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and not (node.args and isinstance(node.args[0], ast.Constant))]
    assert hidden == [], f"{module}: import_module of a computed name at line(s) {hidden}"


MATPLOTLIB = "output.mpl"
"""The one module that imports matplotlib (the Agg backend chosen first); the picture modules take
``plt`` from it."""


@pytest.mark.parametrize("module", [m for m in _modules() if m != MATPLOTLIB])
def test_only_mpl_imports_matplotlib(module: str) -> None:
    assert "matplotlib" not in _imports(module)


def test_mpl_is_where_matplotlib_is() -> None:
    assert "matplotlib" in _imports(MATPLOTLIB)
    assert MATPLOTLIB in _module_imports("output.plotting") & _module_imports("output.sweep_figures")


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
from wsesim.sim.executors.engine import simulate
engine_loads = sorted(m for m in sys.modules if m.startswith("wsesim."))
from wsesim.config.loader import load_experiment_data
from wsesim.experiments.runner import simulate_experiment
base = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 2}, "simulation": {"granularity": "pe"}}
loaded = load_experiment_data(base)
run = simulate_experiment(loaded.spec)
assert run.result.feasible
training_loads = sorted(m for m in sys.modules if m.startswith("wsesim."))
from wsesim.analysis.chrome_trace import chrome_trace
from wsesim.experiments.sweep import run_sweep, sweep_from_data
from wsesim.experiments.tune import tune
from wsesim.analysis.wafer import wafer_maps
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
print(json.dumps({"engine_loads": engine_loads, "training_loads": training_loads,
                  "matplotlib": sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib"),
                  "wsesim": sorted(m for m in sys.modules if m.startswith("wsesim."))}))
"""


def test_running_the_engine_never_imports_matplotlib(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-c", _FRESH], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       check=False)
    assert (r.returncode, r.stderr) == (0, "")
    seen = json.loads(r.stdout.splitlines()[-1])
    assert seen["matplotlib"] == []
    loaded_by_engine = {m.removeprefix("wsesim.") for m in seen["engine_loads"]}
    assert "sim.executors.engine" in loaded_by_engine
    assert {m for m in loaded_by_engine if LAYERS.get(_folder(m) or m, 0) > LAYERS["sim"]} == set()
    # flow runs on the fast engine: the fidelity table loads neither packet fidelity
    assert {"wsesim.fabric.flow", "wsesim.sim.executors.engine"} <= set(seen["wsesim"])
    assert {"wsesim.fabric.packet", "wsesim.fabric.packet_simpy"} & set(seen["wsesim"]) == set()
    # a training run on a wafer loads neither serving's specs nor a GPU's (import time of every run)
    assert [m for m in seen["training_loads"] if m.startswith(("wsesim.config.inference", "wsesim.config.gpu"))] == []
    assert "wsesim.config.inference" in seen["wsesim"]  # the check can see it: the sweep's points load it
