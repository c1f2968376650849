"""The README's "Runs you can compare, models from where they live" example runs as written (issue 20's
"Done when"): a run from a Hugging Face config.json, a tuned run, and ``wsesim compare`` of the two."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from wsesim import cli

ROOT = Path(__file__).resolve().parents[2]


def _example() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Runs you can compare, models from where they live", 1)[1].split("\n## ", 1)[0]
    return section.split("```sh\n", 1)[1].split("```", 1)[0].strip().splitlines()


def test_the_readme_example_runs_and_says_what_it_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    lines = _example()
    assert [line.split()[1] for line in lines] == ["run", "run", "compare"]
    assert "--model tests/data/hf/" in lines[0]
    monkeypatch.chdir(tmp_path)
    for line in lines:
        args = [str(ROOT / a) if a.startswith("tests/") else a for a in shlex.split(line)[1:]]
        assert cli.main(args) == 0, line
    capsys.readouterr()
    assert cli.main([*shlex.split(lines[-1])[1:], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {d["key"] for d in out["config"]} == {"experiment.training.tiles", "experiment.training.batch_per_tile",
                                                 "model.description"}
    thr = next(m for m in out["metrics"] if m["metric"] == "throughput_tokens_per_s")
    # G=1 is unchanged by the one physics of a hop (its ops hide behind the weight stream); the tuned
    # G=15 gains from every op's fill/drain 7 + 2·(rows + cols) -> 4 + (rows + cols): 38,014 -> 38,130
    # (with hardware/wse2.yaml at ramp 3.5, hop 2, i.e. the old 7 + 2·d, it is 38,014 again), 3.347×
    assert (round(thr["a"]), round(thr["b"]), round(thr["ratio"], 2)) == (11392, 38130, 3.35)
