"""What ``wsesim --help`` and each command's ``--help`` end with: what wsesim does, and commands to copy
(each checked to parse by tests/cli/test_examples.py). ``main.build_parser`` attaches them."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from pydantic import BaseModel

from ..config.cluster import InterconnectSpec

DESCRIPTION = ("Simulate wafer-scale processors (Cerebras WSE-2 / WSE-3 class) from their PEs and fabric up: "
               "a training step of an MoE or dense model (throughput, where the time goes, BTA's tiles G), "
               "clusters of wafers, serving with the weights resident (time to first token, tokens/s), and "
               "single kernels (GEMM, GEMV, collectives) PE by PE.")

EXAMPLES: dict[str, list[str]] = {
    "": ["wsesim sweep workloads/qwen3-30b-a3b/bta-paper.yaml --plot",
         "wsesim run --model llama-7b --set training.seq_len=2048",
         "wsesim infer --model llama3-8b --hardware wse2",
         "wsesim kernel gemv --grid 420x420 --shape 1x16384x16384"],
    "validate": ["wsesim validate hardware/wse2.yaml workloads/qwen3-30b-a3b/experiment.yaml"],
    "hardware": ["wsesim hardware list", "wsesim hardware show wse3"],
    "model": ["wsesim model list", "wsesim model list --json"],
    "memory": ["wsesim memory training --set training.tiles=15 --set training.batch_per_tile=1"],
    "run": ["wsesim run --model llama-7b --set training.seq_len=2048 --out out/llama",
            "wsesim run --model tests/data/hf/qwen3-30b-a3b.json --set simulation.moe_mapping=in_place",
            "wsesim run workloads/gpt3-xl/experiment.yaml --set training.global_batch=256 "
            "--set cluster.systems=4 --set cluster.interconnect=swarmx"],
    "tune": ["wsesim tune --model llama-7b --set training.seq_len=2048 --out out/tune-llama",
             "wsesim tune workloads/gpt3-xl/experiment.yaml --set training.global_batch=256 "
             "--search-systems 1,2,4,8,16"],
    "sweep": ["wsesim sweep workloads/qwen3-30b-a3b/bta-paper.yaml --plot",
              "wsesim sweep workloads/qwen3-30b-a3b/bta-paper.yaml --set simulation.moe_mapping=in_place "
              "--out out/bta-in-place --plot",
              "wsesim sweep workloads/gpt3-xl/cluster-scaling.yaml --grid hardware=wse2,wse3 --workers 2"],
    "plot": ["wsesim plot out/bta-paper/results.csv --out out/bta-figures",
             "wsesim plot out/tune-llama",
             "wsesim plot --wafer out/llama"],
    "fabric": ["wsesim fabric wse2 --pattern dispatch --experts 128 --granularity block:16",
               "wsesim fabric tiny8 --pattern all-to-all --mode packet --bytes 64"],
    "kernel": ["wsesim kernel gemv --grid 420x420 --shape 1x16384x16384",
               "wsesim kernel gemm --grid 720x720 --shape 720x720x720 --algorithm summa,cannon,meshgemm",
               "wsesim kernel allreduce --grid 1x750 --wavelets 16 --algorithm chain,tree,ring",
               "wsesim kernel gemm --grid 750x994 --shape 18432x4096x11008 --algorithm stream",
               "wsesim kernel grouped-gemm --hardware h100 --shape 16x2048x768 --experts 128",
               "wsesim kernel allreduce --hardware h100 --grid 1x8,2x8 --wavelets 1048576"],
    "schema": ["wsesim schema --out .vscode/schemas", "wsesim schema hardware",
               "wsesim schema --outputs results.csv"],
    "infer": ["wsesim infer --model llama3-8b --hardware wse2",
              "wsesim infer --search",
              "wsesim infer --vary inference.scheduler.batch=1,2,4 --vary inference.grid=250x250,375x375 "
              "--out out/serve"],
    "compare": ["wsesim compare out/qwen3-hf out/qwen3-g15",
                "wsesim compare out/bta-paper out/bta-in-place --json"],
}


LIMITS = ("limits: work this machine cannot finish is refused before it starts, from an estimate good to "
          "about a factor of two. WSESIM_MAX_RUN_S (seconds, default 1800) and WSESIM_MAX_SWEEP_S (default "
          "86400) bound a run's and a sweep's time; WSESIM_MAX_MEMORY (a size, e.g. 40 GB; default 80 % of "
          "this machine's memory) bounds the memory.")
LIMITED = ("", "run", "tune", "sweep", "infer", "kernel", "fabric")
"""The commands whose ``--help`` ends with ``LIMITS`` (those that run work; "" is ``wsesim --help``)."""


def attach(parser: argparse.ArgumentParser, subparsers: Any) -> None:
    """Give ``parser`` its description and every command its examples (kept as written: one a line), and
    those that run work (``LIMITED``) the limits' variables."""
    parser.description = DESCRIPTION
    for name, p in [("", parser), *subparsers.choices.items()]:
        p.formatter_class = _Formatter
        lines = EXAMPLES.get(name)
        if lines:
            head = "examples:\n" if len(lines) > 1 else "example:\n"
            p.epilog = head + "\n".join(f"  {c}" for c in lines)
        if name == "infer":
            p.epilog = (p.epilog or "") + "\n\n" + _inference_keys()
        if name in LIMITED:
            p.epilog = (p.epilog + "\n\n" if p.epilog else "") + LIMITS


def _inference_keys() -> str:
    """What ``--set inference.KEY`` takes, from the spec itself (so it cannot drift): every key, a group's
    as ``group.{its keys}`` (a load's: every arrival's), and where each is described."""
    # local: the serving spec's modules load only when the infer command is built, not on every command
    from ..config.inference import InferenceSpec

    keys = []
    for name, field in InferenceSpec.model_fields.items():
        groups = [a for a in getattr(field.annotation, "__args__", (field.annotation,))
                  if isinstance(a, type) and issubclass(a, BaseModel) and a is not InterconnectSpec]
        inner = dict.fromkeys(f.alias or k for g in groups for k, f in g.model_fields.items())
        keys.append(f"{name}.{{{', '.join(inner)}}}" if inner else name)
    return (f"keys (--set inference.KEY=VALUE): {', '.join(keys)}. Each with its type and bounds: wsesim "
            "schema inference; what each means: docs/model.md §11 (serving).")


class _Formatter(argparse.HelpFormatter):
    """Paragraphs wrapped to the terminal, but an example kept on its one line (to copy whole)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for para in text.split("\n\n"):
            if para.startswith("example"):
                out.append("\n".join(indent + line for line in para.splitlines()))
            else:
                out.append(textwrap.fill(" ".join(para.split()), width, initial_indent=indent,
                                         subsequent_indent=indent))
        return "\n\n".join(out)
