"""``wsesim hardware list`` and ``wsesim model list`` (wsesim.cli.hardware): every preset with its
description."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wsesim import cli

REPO = Path(__file__).parents[2]


def test_model_list_and_hardware_list_describe_every_preset(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["model", "list", "--json"]) == 0
    models = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in models] == sorted(p.stem for p in (REPO / "workloads").glob("*.yaml"))
    assert all(m["description"] for m in models)
    assert next(m for m in models if m["name"] == "gpt3-xl")["context_len"] == 2048
    assert cli.main(["model", "list"]) == 0
    out = capsys.readouterr().out
    assert "llama3.1-70b" in out and "LLaMA 3.1 70B, dense, 80 layers" in out
    assert cli.main(["hardware", "list"]) == 0
    out = capsys.readouterr().out
    assert "750x994" in out and "SwarmX broadcast-reduce tree" in out
