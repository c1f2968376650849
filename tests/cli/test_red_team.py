"""The red-team corpus: hostile inputs a user tried (issue 22 and after), each the exact command and the one
line wsesim must answer with. Bad input is exactly one line on stderr, exit code 2, no traceback and no
file written; work that cannot finish is refused before it starts.

A new finding is one more ``Case`` in ``CASES`` (a folder of files it needs, the arguments, and a regular
expression the one line must match); what needs more than one command has a test of its own below.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from wsesim import cli
from wsesim.config.loader import default_experiment_path

SHIPPED = default_experiment_path()

TINY: dict[str, Any] = {"kind": "experiment", "hardware": "tiny8", "model": "tiny-moe",
                        "training": {"seq_len": 16, "batch_per_tile": 1, "tiles": 1},
                        "simulation": {"granularity": "pe"}}


def _write(folder: Path, name: str, data: Any) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _sweep(folder: Path, *, points: list[Any] | None = None, grid: dict[str, Any] | None = None,
           base: Any = None, name: str = "s") -> Path:
    data: dict[str, Any] = {"kind": "sweep", "name": name, "base": base if base is not None else TINY}
    if grid is not None:
        data["grid"] = grid
    if points is not None:
        data["points"] = points
    return _write(folder, f"{name}.yaml", data)


@dataclass(frozen=True)
class Case:
    """One hostile command: ``argv(folder)`` (the folder holds whatever files it wrote) and the pattern its
    one line of stderr matches (after ``wsesim: ``)."""

    id: str
    argv: Callable[[Path], list[str]]
    line: str
    code: int = 2
    env: dict[str, str] = field(default_factory=dict)


def _experiment(overrides: dict[str, Any]) -> Callable[[Path], list[str]]:
    def argv(folder: Path) -> list[str]:
        data = {k: v for k, v in TINY.items()}
        for dotted, value in overrides.items():
            node = data
            *parents, last = dotted.split(".")
            for part in parents:
                node[part] = dict(node.get(part) or {})
                node = node[part]
            node[last] = value
        return ["validate", str(_write(folder, "e.yaml", data))]
    return argv


CASES: list[Case] = [
    # 2. a quantity is a number and a unit, never arithmetic; the key path is named
    Case("unit-power-tower", _experiment({"hardware": {"kind": "hardware", **yaml.safe_load(
        (Path(__file__).parents[2] / "hardware" / "tiny8.yaml").read_text())} | {"pe": {"sram": "9**9**9 KiB"}}}),
         r".*e\.yaml: hardware\.pe\.sram: expected a size like \"48 KiB\", got \"9\*\*9\*\*9 KiB\" \(not a number and a unit\)"),
    Case("unit-set-sum", lambda f: ["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "hardware.pe.sram=48 KiB + 1 B"],
         r"--set: hardware\.pe\.sram: expected a size .*got \"48 KiB \+ 1 B\" \(not a number and a unit\)"),
    Case("unit-percent-twice", lambda f: ["run", "--hardware", "tiny8", "--model", "tiny-moe",
                                          "--set", "hardware.runtime.gemm_efficiency=25 % %"],
         r"--set: hardware\.runtime\.gemm_efficiency: expected a fraction .*\(not a number and a unit\)"),
    Case("unit-fabric-bytes", lambda f: ["fabric", "tiny8", "--pattern", "hotspot", "--bytes", "10**10**10 B"],
         r"--bytes: expected a size .*\(not a number and a unit\)"),
    Case("unit-memory-bytes-per-value", lambda f: ["memory", "attention", "--seq-len", "8", "--head-dim", "8", "--tile", "4",
                                                   "--heads", "1", "--bytes-per-value", "2**2**40 B"],
         r".*bytes.per.value.*not a number and a unit.*"),
]



def _grid_sweep(grid: dict[str, Any]) -> Callable[[Path], list[str]]:
    return lambda f: ["sweep", str(_sweep(f, grid=grid)), "--out", str(f / "o")]


CASES += [
    # 1. the estimate counts micro-batches, tiles, the global batch, every tuning candidate; a refusal names the
    # dominant term, the predicted time and memory, and the override that would fit
    Case("global-batch-2^24", lambda f: ["run", "--set", "training.global_batch=16777216"],
         r"this run cannot finish here: it needs more memory than this machine has \(.*\): about .* and .*, "
         r"8,388,608 micro-batches × 48 layers × 128 experts\), mostly micro-batches; "
         r"--set training\.global_batch=\d+ would fit \(now 16,777,216: 8,388,608 micro-batches\)"),
    Case("micro-batches", lambda f: ["run", "--set", "training.micro_batches=100000"],
         r"this run cannot finish here: .*100,000 micro-batches × 48 layers × 128 experts\), mostly micro-batches; "
         r"--set training\.micro_batches=\d+ would fit \(now 100,000\)"),
    Case("tiles", lambda f: ["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
                             "--set", "hardware.pe.sram=1 TiB", "--set", "training.tiles=4194304"],
         r"this run cannot finish here: .* × 4,194,304 tiles\), mostly tiles; --set training\.tiles=\d+ would fit "
         r"\(now 4,194,304\)", env={"WSESIM_MAX_RUN_S": "30"}),
    Case("tune-global-batch", lambda f: ["tune", "--set", "training.global_batch=4096"],
         r"this run cannot finish here: it would run longer than 60 s \(WSESIM_MAX_RUN_S\): about .* for \d+ runs "
         r".*2,048 micro-batches.*; --set training\.global_batch=\d+ would fit .*", env={"WSESIM_MAX_RUN_S": "60"}),
    Case("reference-micro-batches", lambda f: ["run", "--set", "simulation.engine=reference", "--set", "training.micro_batches=20"],
         r"this run cannot finish here: it would run longer than 30 s .*20 micro-batches.*; --set training\.micro_batches=\d+ "
         r"would fit \(now 20\)", env={"WSESIM_MAX_RUN_S": "30"}),
    # issue 30.2: a cluster's scaling efficiency runs the experiment on one system at the same global batch
    # (systems × the micro-batches): estimated "about 2 s", it ran 354 s to 11.5 GB then MemoryError
    Case("cluster-one-system-reference", lambda f: ["run", "--set", "cluster.systems=256", "--set", "cluster.interconnect=swarmx",
                                                    "--set", "training.global_batch=6144"],
         r"this run cannot finish here: it would run longer than 60 s .*256 systems \(simulated twice, then one system "
         r"alone at the same batch: 2,048 micro-batches\)\), mostly micro-batches; --set training\.global_batch=\d+ would fit "
         r"\(now 6,144: 8 micro-batches\)", env={"WSESIM_MAX_RUN_S": "60"}),
    # issue 30.4: serving has a work estimate (stages × requests × output tokens), a search and --vary too
    Case("infer-output-len", lambda f: ["infer", "--set", "inference.scheduler.batch=16", "--set", "inference.load.output_len=10000"],
         r"this serving run cannot finish here: it would run longer than 1 s \(WSESIM_MAX_RUN_S\): about \d+ s and .* "
         r"\(\d+ stages × 16 requests × 10,000 output tokens = [\d,]+ stage iterations at most, .*, on the fast engine\); "
         r"--set inference\.load\.output_len=\d+ would fit \(now 10,000\), or a smaller inference\.scheduler\.batch",
         env={"WSESIM_MAX_RUN_S": "1"}),
    # issue 40: a load under continuous batching is its requests' tokens: the advice is fewer requests (a
    # trace's first rows), never a smaller batch (the same tokens are served)
    Case("infer-poisson-too-long", lambda f: ["infer", "--hardware", "tiny8", "--model", "tiny-moe",
                                              "--set", "hardware.pe.sram=1 MiB", *_POISSON],
         r"this serving run cannot finish here: .*\(1 stage × 3,000 requests × 400 output tokens = 1,203,000 stage "
         r"iterations at most, .*, on the fast engine\); --set inference\.load\.requests=\d+ would fit \(now 3,000\), or a shorter "
         r"inference\.load\.output_len", env={"WSESIM_MAX_RUN_S": "1"}),
    Case("infer-trace-too-long", lambda f: ["infer", "--hardware", "tiny8", "--model", "tiny-moe",
                                            "--set", "hardware.pe.sram=1 MiB", "--set", "inference.load.prompt_len=16",
                                            "--set", "inference.load.arrival=trace", "--set", f"inference.load.file={_trace(f)}"],
         r"this serving run cannot finish here: .*; --set inference\.load\.requests=(\d+) \(the trace's first [\d,]+ rows\) "
         r"would fit \(now 3,000\)", env={"WSESIM_MAX_RUN_S": "1"}),
    Case("infer-search-output-len", lambda f: ["infer", "--search", "--set", "inference.scheduler.batch=16",
                                               "--set", "inference.load.output_len=10000"],
         r"this search cannot finish here: .*stage iterations at most over \d+ candidate mappings, the largest .*; "
         r"--set inference\.load\.output_len=\d+ would fit .*", env={"WSESIM_MAX_RUN_S": "1"}),
    Case("infer-vary-too-long", lambda f: ["infer", "--vary", "inference.load.output_len=5000,10000", "--set", "inference.scheduler.batch=16"],
         r"this sweep cannot finish here: it would run longer than 1 s \(WSESIM_MAX_SWEEP_S\): about \d+ s for 2 points .*",
         env={"WSESIM_MAX_SWEEP_S": "1"}),
    Case("infer-vary-points", lambda f: ["infer", "--vary", "inference.scheduler.batch=" + ",".join(map(str, range(1, 201))),
                                         "--vary", "inference.load.output_len=" + ",".join(map(str, range(1, 101)))],
         r".*serve\.yaml: grid: expected at most 10,000 points, got 20,000 \(200 × 100\): split the sweep into "
         r"several files"),
    # issue 30.5: wsesim kernel has a work estimate, a bound on its comma-lists, and ASCII digits only
    Case("kernel-gemm-long-k", lambda f: ["kernel", "gemm", "--shape", "1x100000000x1", "--grid", "4x4"],
         r"this kernel cannot finish here: it would run longer than 10 s \(WSESIM_MAX_RUN_S\): up to \d+ s and .* for 1 run "
         r"\(the largest gemm summa on 4x4 PEs, shape 1x100000000x1\); use a smaller --shape or grid",
         env={"WSESIM_MAX_RUN_S": "10"}),
    Case("kernel-allreduce-wavelets", lambda f: ["kernel", "allreduce", "--wavelets", "100000000"],
         r"this kernel cannot finish here: it needs more memory than this machine has .*100,000,000 wavelets per PE\); "
         r"use a smaller --wavelets or grid"),
    Case("kernel-lists", lambda f: ["kernel", "allreduce", "--grid", "4x4,8x8",
                                    "--wavelets", ",".join(map(str, range(1, 10001)))],
         r"--wavelets: expected at most 10,000 runs \(the product of the comma-lists\), got 20,000 "
         r"\(2 × 1 × 1 × 1 × 10,000\): split them into several commands"),
    *[Case(f"kernel-wavelets-{name}", lambda f, text=text: ["kernel", "allreduce", "--grid", "4x4", "--wavelets", text],
           r"--wavelets: expected a positive integer of ASCII digits \(at most 15\), got \"" + re.escape(text) + r"\"")
      for name, text in [("superscript", "²"), ("20-digits", "12345678901234567890"), ("arabic-indic", "٣")]],
    Case("kernel-shape-20-digits", lambda f: ["kernel", "gemm", "--shape", "1x12345678901234567890x1", "--grid", "4x4"],
         r"--shape: expected MxKxN of positive integers .*"),
    # issue 30.6: a trace replaces only a regular file (a FIFO, a link to a device: refused) and is .json[.gz]
    Case("infer-trace-fifo", lambda f: ["infer", "--trace", str(_fifo(f, "t.json"))],
         r".*t\.json: expected a regular file to replace with the trace, got a FIFO \(named pipe\)"),
    Case("infer-trace-symlink", lambda f: ["infer", "--trace", str(_link(f, "t.json", "/dev/null"))],
         r".*t\.json: expected a regular file to replace with the trace, got a symbolic link"),
    Case("run-trace-fifo", lambda f: [*TINY_RUN, "--trace", str(_fifo(f, "t.json.gz"))],
         r".*t\.json\.gz: expected a regular file to replace with the trace, got a FIFO \(named pipe\)"),
    Case("infer-trace-extension", lambda f: ["infer", "--trace", str(f / "t.txt")],
         r"--trace: expected a \.json or \.json\.gz file name for the trace, got '.*t\.txt'"),
    # issue 30.8: a hostile Hugging Face config.json is one line, never an internal error
    *[Case(f"hf-{name}", lambda f, base=base, change=change: ["memory", "training", "--model", str(_hf(f, base, change))],
           r".*c\.json: " + line)
      for name, base, change, line in [
          ("model-type-list", "qwen3-30b-a3b", {"model_type": ["qwen3_moe"]}, r"model_type: expected one of .*, got \[.*"),
          ("torch-dtype-mapping", "qwen3-30b-a3b", {"torch_dtype": {"a": 1}}, r"torch_dtype: expected one of .*"),
          ("hidden-act-list", "qwen3-30b-a3b", {"hidden_act": ["silu"]}, r"hidden_act: expected one of .*"),
          ("layer-types-lists", "qwen3-30b-a3b", {"layer_types": [["full_attention"]]}, r"layer_types: expected every layer full_attention.*"),
          ("mlp-only-layers-int", "qwen3-30b-a3b", {"mlp_only_layers": 5}, r"mlp_only_layers: expected \[\] or the first layers.*got 5"),
          ("gptj-no-heads", "gpt-j-6b", {"n_head": 0}, r"n_head: expected a positive number of heads, got 0"),
          ("deep-nesting", "qwen3-30b-a3b", "[" * 100_000 + "]" * 100_000,
           r"expected a Hugging Face config\.json, got JSON nested too deep to read"),
      ]],
    # 8. the routing arrays, the wafer maps, fabric --experts, workers' memory: refused before they are built
    Case("layers-times-experts", lambda f: ["run", "--set", "model.layers=16384", "--set", "model.experts=65536"],
         r"this run cannot finish here: it needs more memory .*16384 layers × 65,536 experts\), mostly (experts|routing); "
         r"--set model\.experts=\d+ would fit \(now 65,536\)"),
    Case("memory-training-routing", lambda f: ["memory", "training", "--set", "model.layers=16384", "--set", "model.experts=65536"],
         r"this cannot be sized here: its routing needs more memory than this machine has .*\(16,384 layers × 65,536 "
         r"experts\); --set model\.experts=\d+ would fit \(now 65,536\)"),
    Case("wafer-maps", lambda f: ["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "hardware.mesh.rows=16384",
                                  "--set", "hardware.mesh.cols=16384", "--set", "simulation.granularity=block:512",
                                  "--out", str(f / "out")],
         r"this run cannot finish here: .*mostly wafer maps; leave out --out and --png \(the maps of 268,435,456 PEs\).*"),
    Case("fabric-experts-past-the-pes", lambda f: ["fabric", "tiny8", "--pattern", "dispatch", "--experts", "1000000"],
         r"--experts: expected at most one expert region per PE \(at most 64 here\), got 1,000,000"),
    Case("fabric-experts-memory", lambda f: ["fabric", "wse2", "--pattern", "dispatch", "--experts", "500000"],
         r"--experts: expected at most [\d,]+ expert regions on 745,500 mesh nodes here .*got 500,000: use fewer --experts "
         r"or a coarser --granularity"),
    Case("workers-memory", lambda f: ["sweep", str(_sweep(f, grid={"training.seed": list(range(300))})), "--workers", "300",
                                      "--out", str(f / "o")],
         r"--workers: expected at most --workers \d+ here: 300 workers would hold up to .*"),
    # 9. a sweep's size is bounded, and its whole time estimated
    Case("sweep-million-points", _grid_sweep({"training.seed": list(range(1000)), "model.top_k": list(range(1000))}),
         r".*s\.yaml: grid: expected at most 10,000 points, got 1,000,000 \(1,000 × 1,000\): split the sweep into "
         r"several files"),
    Case("sweep-too-long", lambda f: ["sweep", str(_sweep(f, base=str(SHIPPED), grid={"training.seed": list(range(40))})),
                                      "--out", str(f / "o")],
         r"this sweep cannot finish here: it would run longer than 2 s \(WSESIM_MAX_SWEEP_S\): about \d+ s for 40 points "
         r"on 2 workers .*", env={"WSESIM_MAX_SWEEP_S": "2"}),
    # 16. a dense model refuses what it would ignore; --workers 0 and -3 are refused
    Case("dense-shared-expert", lambda f: ["run", "--model", "gpt3-xl", "--set", "model.shared_expert_intermediate=2048"],
         r"--set: model\.shared_expert_intermediate: expected 0 without experts \(experts 0: a dense model has no shared "
         r"expert\), got 2048"),
    Case("workers-0", lambda f: ["sweep", str(_sweep(f, grid={"model.top_k": [1]})), "--workers", "0"],
         r"--workers: expected a positive number of worker processes, got 0"),
    Case("workers-negative", lambda f: ["sweep", str(_sweep(f, grid={"model.top_k": [1]})), "--workers", "-3"],
         r"--workers: expected a positive number of worker processes, got -3"),
]



def _fifo(folder: Path, name: str) -> Path:
    path = folder / name
    os.mkfifo(path)
    return path


def _hf(folder: Path, base: str, change: Any) -> Path:
    """A published config.json (tests/data/hf) with ``change`` merged in, or ``change`` itself as the text."""
    import json

    path = folder / "c.json"
    if isinstance(change, str):
        path.write_text(change, encoding="utf-8")
    else:
        data = json.loads((Path(__file__).parents[1] / "data" / "hf" / f"{base}.json").read_text(encoding="utf-8"))
        path.write_text(json.dumps({**data, **change}), encoding="utf-8")
    return path


def _link(folder: Path, name: str, target: str) -> Path:
    path = folder / name
    path.symlink_to(target)
    return path


def _sparse(folder: Path, name: str, size: int) -> Path:
    path = folder / name
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def _resume_into_fifo(folder: Path) -> list[str]:
    out = folder / "o"
    out.mkdir()
    _fifo(out, "results.csv")
    return ["sweep", str(_sweep(folder, grid={"model.top_k": [1]})), "--out", str(out), "--resume", "--workers", "1"]


CASES += [
    # 6. inputs that are not regular files are refused before anything is read; files have a size limit
    Case("dev-zero-experiment", lambda f: ["validate", "/dev/zero"], r"/dev/zero: expected a YAML file, got a character device"),
    Case("dev-urandom-hardware", lambda f: ["run", "--hardware", "/dev/urandom"],
         r"/dev/urandom: expected a YAML file, got a character device"),
    Case("dev-zero-model", lambda f: ["memory", "training", "--model", "/dev/zero"],
         r"/dev/zero: expected a YAML file, got a character device"),
    Case("dev-zero-interconnect", lambda f: ["run", "--set", "cluster.systems=2", "--set", "cluster.interconnect=/dev/zero"],
         r"/dev/zero: expected a YAML file, got a character device"),
    Case("fifo-config", lambda f: ["validate", str(_fifo(f, "e.yaml"))], r".*e\.yaml: expected a YAML file, got a FIFO \(named pipe\)"),
    Case("fifo-results-on-resume", _resume_into_fifo, r".*results\.csv: expected a results CSV, got a FIFO \(named pipe\)"),
    Case("fifo-plot", lambda f: ["plot", str(_fifo(f, "results.csv"))],
         r".*results\.csv: expected a results\.csv written by wsesim sweep, got a FIFO \(named pipe\)"),
    Case("huge-config", lambda f: ["validate", str(_sparse(f, "e.yaml", 17 * 2**20))],
         r".*e\.yaml: expected a YAML file of at most 16,777,216 bytes, got 17,825,792 bytes"),
    # 13. a lone surrogate is not text
    Case("lone-surrogate", lambda f: ["validate", str(_write(f, "e.yaml", 'kind: hardware\nname: "\\ud800"\n'))],
         r".*e\.yaml: name: expected text, got a lone surrogate U\+D800 .*line 2\)"),
    Case("lone-surrogate-in-a-point", lambda f: ["validate", str(_write(f, "s.yaml", "kind: sweep\nbase: e.yaml\n"
                                                                  'points:\n  - {model.name: "a\\udfff"}\n'))],
         r".*s\.yaml: points\[0\]\.model\.name: expected text, got a lone surrogate U\+DFFF .*line 4\)"),
]


LONG = "n" * 300
TINY_RUN = ["run", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "training.seq_len=16",
            "--set", "training.batch_per_tile=1", "--set", "simulation.granularity=pe"]


def _folder_in_place(name: str, *argv: str) -> Callable[[Path], list[str]]:
    def make(f: Path) -> list[str]:
        (f / "o" / name).mkdir(parents=True)
        return [a.replace("DIR", str(f / "o")).replace("SWEEP", str(f / "s.yaml")) for a in argv]
    return make


CASES += [
    # 12. what the operating system refuses is the user's to fix: one line, exit 2, never "internal error"
    Case("name-too-long-out", lambda f: [*TINY_RUN, "--out", str(f / LONG)],
         r".*: expected file and folder names of at most 255 bytes, got one of 300"),
    Case("name-too-long-trace", lambda f: [*TINY_RUN, "--trace", str(f / f"{LONG}.json")],
         r".*: expected file and folder names of at most 255 bytes, got one of 305"),
    Case("name-too-long-sweep-name", lambda f: ["sweep", str(_write(f, "s.yaml", {
        "kind": "sweep", "name": LONG, "base": TINY, "grid": {"model.top_k": [1]}}))],
         r".*s\.yaml: name: expected a name of at most 255 bytes \(it names the output folder; this one has 300\), got 'n+'"),
    Case("folder-as-wafer-json", _folder_in_place("wafer.json", *TINY_RUN, "--out", "DIR"),
         r".*/o/wafer\.json: expected to write the file wafer\.json, got a folder in its place"),
    Case("folder-as-manifest", _folder_in_place("manifest.json", *TINY_RUN, "--png", "DIR"),
         r".*/o/manifest\.json: expected to write the file manifest\.json, got a folder in its place"),
]


TINY_SERVE = ["infer", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "inference.load.prompt_len=16",
              "--set", "inference.load.output_len=4"]


_POISSON = ["--set", "inference.load.prompt_len=16", "--set", "inference.load.output_len=400", "--set", "inference.load.arrival=poisson",
            "--set", "inference.load.requests=3000", "--set", "inference.scheduler.batch=4", "--set", "inference.load.rate=1000"]


def _trace(folder: Path) -> Path:
    """A trace of 3,000 requests of 16 + 400 tokens, 1 ms apart."""
    path = folder / "trace.csv"
    path.write_text("arrival_s,prompt_len,output_len\n" + "".join(f"{i / 1000},16,400\n" for i in range(3000)))
    return path


def _mistral(folder: Path) -> str:
    """A Mistral config.json (LLaMA 3 8B's shape, Mistral's 4,096-token sliding window)."""
    import json

    hf = json.loads((Path(__file__).parents[1] / "data" / "hf" / "llama3-8b.json").read_text())
    return str(_write(folder, "mistral.json", json.dumps({**hf, "model_type": "mistral", "sliding_window": 4096})))


CASES += [
    # issue 29: serving and kernels on the second day. An error blames the flag that gave the value
    Case("infer-set-model-unknown", lambda f: [*TINY_SERVE, "--set", "model=nope"],
         r"--set: model: expected a model preset \(.*\) or a path, got 'nope'"),
    Case("infer-set-hardware-missing-file", lambda f: [*TINY_SERVE, "--set", "hardware=./nope.yaml"],
         r"--set: hardware: no such file '.*/nope\.yaml'"),
    Case("infer-vary-hardware-unknown", lambda f: [*TINY_SERVE, "--vary", "hardware=tiny8,nope"],
         r"--vary: point 1 \{hardware=nope\}: hardware: expected a hardware preset .*got 'nope'"),
    Case("sweep-set-hardware-unknown", lambda f: ["sweep", str(_sweep(f, grid={"training.seed": [1, 2]})),
                                                  "--set", "hardware=nope"],
         r"--set: hardware: expected a hardware preset \(.*\) or a path, got 'nope'"),
    Case("infer-objective-without-search", lambda f: [*TINY_SERVE, "--set", "inference.grid=2x2",
                                                      "--objective", "ttft"],
         r"--objective: expected --objective with --search or inference.grid: auto .*"),
    Case("kernel-out-a-file", lambda f: ["kernel", "allreduce", "--grid", "4x4", "--out",
                                         str(_write(f, "k", "x"))],
         r".*/k: expected a folder.*"),
    Case("fabric-out-a-file", lambda f: ["fabric", "tiny8", "--pattern", "hotspot", "--out",
                                         str(_write(f, "x", "x"))],
         r".*/x: expected a folder.*"),
    Case("plot-an-empty-folder", lambda f: ["plot", str(f)],
         r".*: expected a sweep's folder \(results\.csv\), a tune folder \(candidates\.csv from wsesim tune --out "
         r"DIR\) or a serving run's \(ops\.csv and result\.json .*"),
    Case("mistral-window-exceeded", lambda f: ["run", "--model", _mistral(f), "--set", "training.seq_len=8192"],
         r".*: training\.seq_len: expected at most model\.sliding_window \(4,096 tokens\), got 8,192: .*"),
    Case("mistral-window-exceeded-serving", lambda f: ["infer", "--model", _mistral(f),
                                                       "--set", "inference.load.prompt_len=4096"],
         r".*: inference\.load\.prompt_len \+ output_len - 1: expected at most model\.sliding_window .*"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_is_one_line_and_exit_2(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    for k, v in case.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    argv = case.argv(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert cli.main(argv) == case.code
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert re.fullmatch(r"wsesim: " + case.line, lines[0]), lines[0]
    assert "internal error" not in lines[0] and "Traceback" not in captured.err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


# ------------------------------------------------------------------ 3. a sweep with stderr closed (2>&-)


def test_a_sweep_started_with_stderr_closed_writes_every_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Python sets ``sys.stderr`` to None when fd 2 is closed at start; the progress printer once died of it."""
    path = _sweep(tmp_path, grid={"model.top_k": [1, 2]})
    monkeypatch.setattr("sys.stderr", None)
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "1"]) == 0
    with open(tmp_path / "o" / "results.csv", newline="", encoding="utf-8") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["ok", "ok"]


@pytest.mark.parametrize("closed", [1, 2], ids=["stdout-closed", "stderr-closed"])
def test_a_sweep_run_with_a_descriptor_closed_writes_every_row(tmp_path: Path, closed: int) -> None:
    """The real command, default two workers, with fd 1 or fd 2 closed (``>&-``, ``2>&-``): loky's start
    flushed the None sys.stderr and the sweep ended in exit 1 with only the CSV's header."""
    import subprocess
    import sys

    path = _sweep(tmp_path, grid={"model.top_k": [1, 2]})
    r = subprocess.run([sys.executable, "-m", "wsesim", "sweep", str(path), "--out", str(tmp_path / "o")],
                       cwd=tmp_path, preexec_fn=lambda: os.close(closed), capture_output=False,
                       stdin=subprocess.DEVNULL, check=False, timeout=300)
    assert r.returncode == 0
    assert [r["status"] for r in _rows(tmp_path / "o")] == ["ok", "ok"]


@pytest.mark.parametrize("argv", [["memory", "training", "--json"], ["kernel", "gemm", "--shape", "8x8x8", "--grid", "2x2"],
                                  ["kernel", "gemm", "--shape", "8x8x8", "--grid", "2x2", "--png", "pk"]],
                         ids=["json", "kernel", "kernel-png"])
def test_a_command_run_with_stdout_closed_exits_0(tmp_path: Path, argv: list[str]) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "wsesim", *argv], cwd=tmp_path, preexec_fn=lambda: os.close(1),
                       stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False, timeout=300)
    assert (r.returncode, r.stderr) == (0, "")


def test_infer_trace_json_gz_is_gzip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``infer --trace x.json.gz`` wrote plain JSON under a .gz name."""
    import gzip
    import json

    assert cli.main(["infer", "--trace", str(tmp_path / "x.json.gz")]) == 0
    assert "traceEvents" in json.loads(gzip.decompress((tmp_path / "x.json.gz").read_bytes()))


def test_an_error_with_stderr_closed_still_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", None)
    assert cli.main(["validate", str(tmp_path / "missing.yaml")]) == 2


# --------------------------------------------- 4. a point's identity is what it resolves to (--resume)

IC = {"kind": "interconnect", "name": "ic", "fan_out": 4, "link_bandwidth": "1.2 Tbit/s", "latency": "2 us"}


def _rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / "results.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_resume_reruns_exactly_the_points_whose_named_file_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Editing the interconnect file a point names reruns that point (its row's figures are a fresh run's),
    and keeps the rows of the points that do not name it."""
    _write(tmp_path, "ic.yaml", IC)
    base = {**TINY, "cluster": {"systems": 2, "interconnect": "swarmx"}}
    path = _sweep(tmp_path, base=base, points=[{"cluster.interconnect": "./ic.yaml"}, {"cluster.interconnect": "swarmx"}])
    out = tmp_path / "o"
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 0
    before = _rows(out)
    _write(tmp_path, "ic.yaml", {**IC, "latency": "900 us"})
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1", "--resume"]) == 0
    after = _rows(out)
    assert after[1] == before[1]  # swarmx: untouched, kept as it was (wall clock included)
    assert after[0]["point_key"] != before[0]["point_key"]
    assert float(after[0]["step_time_s"]) > float(before[0]["step_time_s"])  # 900 us per node each way
    fresh = tmp_path / "fresh"
    assert cli.main(["sweep", str(path), "--out", str(fresh), "--workers", "1"]) == 0
    assert _rows(fresh)[0]["step_time_s"] == after[0]["step_time_s"]


# ------------------------------------------------------- 5. a mapping as a point's value; dotted vs nested


def test_a_mapping_valued_point_runs_and_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The documented inline ``cluster.interconnect`` as a sweep point once ran every point, then ended in
    ``internal error: TypeError: unhashable type: 'dict'``."""
    ic = {k: v for k, v in IC.items() if k != "kind"}
    path = _sweep(tmp_path, base={**TINY, "cluster": {"systems": 2, "interconnect": "swarmx"}},
                  points=[{"cluster.interconnect": ic}, {"cluster.interconnect": {**ic, "latency": "9 us"}}],
                  grid={"training.tiles": [1, "tuned"]})
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "1"]) == 0
    rows = _rows(tmp_path / "o")
    assert [r["status"] for r in rows] == ["ok"] * 4
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "1", "--resume"]) == 0
    assert [r["point_key"] for r in _rows(tmp_path / "o")] == [r["point_key"] for r in rows]


@pytest.mark.parametrize(("grid", "points", "where"), [
    ({"training.seed": [1, 2]}, [{"training": {"seed": 5}}], "points[0].training"),
    ({"training": [{"seed": 1}]}, [{"training.seed": 5}], "points[0].training.seed"),
])
def test_a_key_set_dotted_and_nested_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                grid: dict[str, Any], points: list[Any], where: str) -> None:
    path = _sweep(tmp_path, grid=grid, points=points)
    assert cli.main(["validate", str(path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"wsesim: {path}: {where}: ") and "grid" in line, line


# ------------------------------------------------------------- 14. a CSV field longer than 128 KiB


def test_a_sweep_reads_back_a_field_longer_than_128_kib(tmp_path: Path) -> None:
    path = _sweep(tmp_path, grid={"model.top_k": [1, 2]})
    out = tmp_path / "o"
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 0
    rows = _rows(out)
    header = list(rows[0])
    rows[1]["reason"] = "x" * 200_000  # csv's default limit is 131,072
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1", "--resume"]) == 0
    assert len(_rows(out)[1]["reason"]) == 200_000
    assert cli.main(["plot", str(out / "results.csv"), "--out", str(tmp_path / "p")]) == 0


# --------------------------------------------------- 7. a killed worker costs its point, not the sweep


def _dies_at_point_1(point: int) -> dict[str, Any]:
    """A point's work whose process is killed (as the out-of-memory killer would) at point 1."""
    if point == 1:
        os.kill(os.getpid(), 9)
    return {"point": point, "status": "ok"}


def test_a_killed_worker_is_its_point_s_failure_and_the_sweep_goes_on() -> None:
    """Once ``internal error: BrokenProcessPool`` ended the sweep. Point 1 kills its worker: its row is an
    error naming that, and every other point (those dealt to the same worker included) still runs."""
    from wsesim.experiments.workers import run_local

    rows = list(run_local(_dies_at_point_1, list(range(6)), 2, group=lambda p: p < 4, cost=lambda p: 1.0,
                          died=lambda p, why: {"point": p, "status": "error", "reason": why}))
    by_point = {r["point"]: r for r in rows}
    assert sorted(by_point) == list(range(6)) and len(rows) == 6
    assert by_point[1]["status"] == "error" and "died" in by_point[1]["reason"]
    assert all(by_point[p]["status"] == "ok" for p in (0, 2, 3, 4, 5))


@pytest.mark.parametrize("name", ["results.csv", "manifest.json", "sweep.json", "figures.json"])
def test_a_folder_where_a_sweep_file_goes_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = _sweep(tmp_path, grid={"model.top_k": [1]})
    (tmp_path / "o" / name).mkdir(parents=True)
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "1", "--plot"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == f"wsesim: {tmp_path / 'o' / name}: expected to write the file {name}, got a folder in its place"
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [name]


def test_a_full_disk_is_one_line_not_an_internal_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import errno

    from wsesim.output import files

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full)
    assert cli.main([*TINY_RUN, "--out", str(tmp_path / "o")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == f"wsesim: {tmp_path / 'o' / 'result.json'}: cannot write result.json (No space left on device)"
    assert list((tmp_path / "o").iterdir()) == []  # no temporary file left behind


# ------------------------------------------------ 11. --hardware FILE and --model FILE: the cwd's files


def test_hardware_and_model_files_resolve_against_the_current_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """They resolved against the experiment file's folder (the install's, for the default experiment),
    while ``hardware show FILE`` resolved against the cwd."""
    root = Path(__file__).parents[2]
    _write(tmp_path, "hw.yaml", (root / "hardware" / "tiny8.yaml").read_text())
    _write(tmp_path, "m.yaml", (root / "workloads" / "tiny-moe.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    assert cli.main(["memory", "training", "--hardware", "hw.yaml", "--model", "./m.yaml", "--json",
                     "--set", "simulation.granularity=pe"]) == 0
    assert '"hardware": "tiny8"' in capsys.readouterr().out
    assert cli.main(["run", "--hardware", "missing.yaml"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert f"no such file '{tmp_path / 'missing.yaml'}'" in line


# -------------------------------------------------------- 15. plot waits for a running sweep's folder


@pytest.mark.parametrize("elsewhere", [False, True], ids=["into-the-sweep-folder", "out-elsewhere"])
def test_plot_refuses_a_folder_a_sweep_is_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str], elsewhere: bool) -> None:
    """It drew 174 of 300 points beside the growing CSV; now it names the sweep that holds the folder."""
    from wsesim.output.files import folder_lock

    path = _sweep(tmp_path, grid={"model.top_k": [1, 2]})
    out = tmp_path / "o"
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 0
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    extra = ["--out", str(tmp_path / "pics")] if elsewhere else []
    with folder_lock(out, "wsesim sweep s.yaml"):
        assert cli.main(["plot", str(out / "results.csv"), *extra]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert re.fullmatch(rf"wsesim: {re.escape(str(out))}: another wsesim is writing to this folder \(pid \d+: "
                        r"wsesim sweep s\.yaml\); .*", line), line
    assert sorted(p.name for p in out.iterdir()) == before and not (tmp_path / "pics").exists()
    assert cli.main(["plot", str(out / "results.csv"), *extra]) == 0  # free again


# ----------------------------------------------- 10. plot's cost does not grow by one artist per row


def test_plot_draws_a_bounded_number_of_artists_however_many_rows(tmp_path: Path) -> None:
    """~70 ms a row came from one rectangle per bar per phase in a figure 0.34 inch taller per row, a tick
    label per value and a label per tuned point, drawn in three formats. Past the limits the figures hold a
    bounded number of artists (a count, not a timing: as many for 2,000 rows as for 200). Measured: 1,000 rows
    56 s before, 3.5 s after (1.5 s of it imports); 3,000 rows 4.9 s."""
    from wsesim.analysis.figures import plan_figures, plan_phases
    from wsesim.experiments.table import read_results_table
    from wsesim.output import sweep_figures

    path = _sweep(tmp_path, grid={"training.tiles": [1, "tuned"]})
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "1"]) == 0
    header, rows = read_results_table(tmp_path / "o" / "results.csv")
    header = [*header[:4], "set:training.seed", *header[4:]]

    def artists(n: int) -> tuple[int, ...]:
        many = [{**r, "point": str(i), "set:training.seed": str(i // 2)} for i, r in enumerate(rows * (n // 2))]
        phases = sweep_figures.phases_figure(plan_phases(header, many))
        ax = phases.axes[0]
        counts = [len(ax.patches) + len(ax.collections) + len(ax.texts), len(ax.get_yticks())]
        for plan in plan_figures(header, many):
            fig = sweep_figures.throughput_figure(plan)
            counts += [sum(len(a.texts) + len(a.get_xticks()) for a in fig.axes)]
            sweep_figures.plt.close(fig)
        sweep_figures.plt.close(phases)
        return tuple(counts)

    small, large = artists(200), artists(2000)
    assert small[0] == large[0] <= 10  # a collection per phase, no text per row
    assert max(small[1], large[1]) <= sweep_figures.MAX_BARS  # labelled bars
    assert len(large) > 2 and all(n <= 2 * sweep_figures.MAX_TICKS for n in large[2:])  # ticks, labels per figure


# ------------------------------------------ issue 30.7: a command writes only into its own folder, locked


@pytest.mark.parametrize("second", [
    ["infer", "--out", "DIR"], [*TINY_RUN, "--out", "DIR"], [*TINY_RUN, "--png", "DIR"],
    ["tune", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "training.seq_len=16",
     "--set", "simulation.granularity=pe", "--out", "DIR"],
], ids=["infer", "run-out", "run-png", "tune"])
def test_a_sweep_folder_is_refused_by_another_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      second: list[str]) -> None:
    """``infer --out`` and ``run --out`` into a sweep's folder replaced its manifest.json beside its
    results.csv; now one line names whose folder it is, and nothing in it changes."""
    path = _sweep(tmp_path, grid={"model.top_k": [1]})
    out = tmp_path / "o"
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert cli.main([a.replace("DIR", str(out)) for a in second]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (f"wsesim: {out}: this folder holds the output of wsesim sweep, not of wsesim {second[0]}: "
                    "give another folder (or delete it to reuse it)")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("second", [["infer", "--vary", "inference.scheduler.batch=1,2", "--out", "DIR"],
                                    ["sweep", "SWEEP", "--out", "DIR", "--workers", "1"]], ids=["infer-vary", "sweep"])
def test_a_run_folder_is_refused_by_a_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            second: list[str]) -> None:
    out = tmp_path / "o"
    path = _sweep(tmp_path, grid={"model.top_k": [1]})
    assert cli.main([*TINY_RUN, "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert cli.main([a.replace("DIR", str(out)).replace("SWEEP", str(path)) for a in second]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (f"wsesim: {out}: this folder holds the output of wsesim run, not of wsesim sweep: give "
                    "another folder (or delete it to reuse it)")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("argv", [["infer", "--out", "DIR"], [*TINY_RUN, "--out", "DIR"],
                                  ["kernel", "gemm", "--shape", "8x8x8", "--grid", "2x2", "--png", "DIR"]],
                         ids=["infer", "run", "kernel-png"])
def test_a_folder_another_wsesim_holds_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  argv: list[str]) -> None:
    from wsesim.output.files import folder_lock

    out = tmp_path / "o"
    out.mkdir()
    with folder_lock(out, "wsesim sweep s.yaml"):
        assert cli.main([a.replace("DIR", str(out)) for a in argv]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert re.fullmatch(rf"wsesim: {re.escape(str(out))}: another wsesim is writing to this folder \(pid \d+: "
                        r"wsesim sweep s\.yaml\); .*", line), line
    assert list(out.iterdir()) == []


def test_set_interconnect_path_resolves_against_the_working_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30.8: ``--set cluster.interconnect=./ic.yaml`` was looked for beside the experiment file, while
    ``--set hardware=./x.yaml`` is the working folder's."""
    (tmp_path / "exp").mkdir()
    experiment = _write(tmp_path / "exp", "e.yaml", {**TINY, "cluster": {"systems": 2, "interconnect": "swarmx"}})
    _write(tmp_path, "ic.yaml", IC)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", str(experiment), "--set", "cluster.interconnect=./ic.yaml", "--json"]) == 0
    assert '"systems": 2' in capsys.readouterr().out


def test_infer_search_honours_the_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30.8: ``infer --search --engine reference`` ran every candidate on the fast engine."""
    import json

    from wsesim.experiments import inference

    engines: list[str] = []
    real = inference.compose

    def spy(kind: Any, spec: Any, *args: Any) -> Any:
        engines.append(spec.simulation.engine)
        return real(kind, spec, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(inference, "compose", spy)
        assert cli.main(["infer", "--search", "--engine", "reference", "--set", "inference.load.output_len=4",
                         "--json"]) == 0
    assert engines and set(engines) == {"reference"}
    assert json.loads(capsys.readouterr().out)["feasible"]


def test_resume_reruns_a_point_whose_worker_was_killed(tmp_path: Path) -> None:
    """Issue 30.8: a killed worker's row (an error) was kept by --resume, so the point never ran again; a
    point's own error is still kept (it would fail the same way)."""
    path = _sweep(tmp_path, grid={"model.top_k": [1, 2, 3]})
    out = tmp_path / "o"
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 0
    rows = _rows(out)
    rows[0].update(status="error", reason="ValueError: the point's own")
    rows[1].update(status="error", reason="the worker process running this point died (killed, e.g. by the "
                                          "out-of-memory killer)")
    with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1", "--resume"]) == 0
    assert [r["status"] for r in _rows(out)] == ["error", "ok", "ok"]


def test_an_infeasible_point_is_a_result_not_a_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30.8: a step that does not fit even with balanced routing stops after sizing; it was estimated as
    if it ran (here 16,777,216 tiles' spans: refused for time and memory; in a sweep, workers refused for an
    infeasible point's 11 GB). Now its estimate is the sizing's, and the answer is infeasible with the reason."""
    import json

    from wsesim.config.loader import load_experiment
    from wsesim.experiments.estimate import estimate_work

    argv = ["--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
            "--set", "hardware.pe.sram=1 TiB", "--set", "training.tiles=16777216"]
    assert cli.main(["run", *argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert not result["feasible"] and "not even B=1 fits" in result["infeasible_reason"]
    spec = load_experiment(hardware="tiny8", model="tiny-moe", overrides={
        "simulation.granularity": "pe", "hardware.pe.sram": "1 TiB", "training.tiles": 16777216}).spec
    assert list(estimate_work(spec).terms) == ["routing"]


# ----------------------------------------------------------------------------------- issue 30.9: low


CASES_30_9 = [
    Case("infer-resume-without-vary", lambda f: ["infer", "--resume"],
         r"--resume: expected --resume only with --vary \(one serving run has no points to resume or share out\)"),
    Case("infer-workers-without-vary", lambda f: ["infer", "--workers", "3"],
         r"--workers: expected --workers only with --vary .*"),
    Case("out-empty", lambda f: [*TINY_RUN, "--out", ""], r"--out: expected a folder name, got an empty one"),
    Case("png-empty", lambda f: ["kernel", "gemm", "--shape", "8x8x8", "--grid", "2x2", "--png", ""],
         r"--png: expected a folder name, got an empty one"),
    Case("search-systems-past-the-limit", lambda f: ["tune", "--search-systems", "65537"],
         r"--search-systems: expected whole numbers of systems from 1 to 65,536, comma-separated \(1,2,4,8\), "
         r"got '65537'"),
    Case("grid-hex", lambda f: ["infer", "--set", "inference.grid=0x1"],
         r"--set: inference\.grid: expected a grid like \"420x420\" \(rows x cols of PEs\) or \"auto\", got '0x1'"),
]


@pytest.mark.parametrize("case", CASES_30_9, ids=[c.id for c in CASES_30_9])
def test_low_findings_are_one_line(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    test_hostile_input_is_one_line_and_exit_2(case, tmp_path, monkeypatch, capsys)


def test_one_output_token_has_no_tokens_per_s_per_request(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["infer", "--set", "inference.load.output_len=1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"tokens/s per request +n/a\n", out) and "0.0 us" not in out


def test_global_batch_on_one_system_is_singular(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tune", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "training.seq_len=16",
                     "--set", "simulation.granularity=pe", "--set", "training.global_batch=8",
                     "--search-systems", "1"]) == 0
    assert re.search(r"global batch 8 on 1 system:", capsys.readouterr().out)


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise MemoryError


@pytest.mark.parametrize("error", [MemoryError(), _Unprintable()], ids=["memory-error", "unprintable"])
def test_the_internal_error_line_survives_its_own_failure(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str],
                                                          error: Exception) -> None:
    """Issue 30.4: out of memory, the internal-error handler itself failed and printed a raw traceback."""
    import importlib

    validate = importlib.import_module("wsesim.cli.validate")

    def boom(args: Any) -> int:
        raise error

    monkeypatch.delenv("WSESIM_DEBUG", raising=False)
    monkeypatch.setattr(validate, "_cmd_validate", boom)
    assert cli.main(["validate", "x.yaml"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("wsesim: internal error")


def test_tune_and_infer_refuse_a_sweep_folder_before_they_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from wsesim.cli import infer
    from wsesim.experiments import tune

    path = _sweep(tmp_path, grid={"model.top_k": [1]})
    out = tmp_path / "o"
    assert cli.main(["sweep", str(path), "--out", str(out), "--workers", "1"]) == 0

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("ran before the folder was checked")

    monkeypatch.setattr(tune, "tune", never)
    monkeypatch.setattr(infer, "run", never)
    assert cli.main(["tune", "--hardware", "tiny8", "--model", "tiny-moe", "--set", "simulation.granularity=pe",
                     "--out", str(out)]) == 2
    assert cli.main(["infer", "--out", str(out)]) == 2
    assert all("holds the output of wsesim sweep" in line for line in capsys.readouterr().err.splitlines()[-2:])
