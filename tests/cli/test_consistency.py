"""One command line, consistent (issue 12 item 17) and honest about whose fault an error is (issue 9
item 5, issue 12 item 11): ``--version``; ``--json`` wherever a result is printed; the same ``--set`` key
paths everywhere; help for every option; the closest key for a misspelt one; bad input is exit 2 with
one line, a defect inside wsesim exit 1 with "internal error".
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from wsesim import __version__, cli
from wsesim.config.errors import InternalError
from wsesim.config.schema import KINDS

REPO = Path(__file__).resolve().parents[2]
cli_main = importlib.import_module("wsesim.cli.main")  # the module (wsesim.cli.main is also the function's name)


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------ version and help


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    # from a checkout, the commit too (issue 20): the version alone does not say which code made a result
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parents[2],
                            capture_output=True, text=True, check=False).stdout.strip()
    assert commit, "the tests run from a checkout"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=Path(__file__).parents[2],
                           capture_output=True, text=True, check=False).stdout.strip()
    assert out == f"wsesim {__version__} (commit {commit}{', dirty: uncommitted changes' if dirty else ''})\n"


def _actions(parser: argparse.ArgumentParser, where: str) -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:
        found.append((where, action))
        if isinstance(action, argparse._SubParsersAction):
            found += [(f"{where} {name}", a) for a in action._choices_actions for name in [a.dest]]
            for name, sub in action.choices.items():
                found += _actions(sub, f"{where} {name}")
    return found


def test_every_option_has_help() -> None:
    """Every argument, positional or optional, of every command and subcommand says what it is for."""
    actions = _actions(cli_main.build_parser(), "wsesim")
    assert len(actions) > 60
    missing = [f"{where}: {a.option_strings or a.dest}" for where, a in actions
               if not a.help or a.help == argparse.SUPPRESS]
    assert missing == []


def test_every_command_that_prints_a_result_takes_json() -> None:
    """All but sweep (whose summary is the sweep's own business) and those that print nothing."""
    def leaves(parser: argparse.ArgumentParser, where: str) -> dict[str, argparse.ArgumentParser]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return {where: parser}
        return {w: p for a in subs for name, sub in a.choices.items() for w, p in leaves(sub, f"{where} {name}").items()}

    commands = leaves(cli_main.build_parser(), "wsesim")
    without = {w for w, p in commands.items() if not any("--json" in a.option_strings for a in p._actions)}
    assert set(commands) >= {"wsesim validate", "wsesim hardware show", "wsesim hardware list", "wsesim plot", "wsesim schema",
                      "wsesim run", "wsesim tune", "wsesim memory training", "wsesim memory attention", "wsesim fabric"}
    assert without == {"wsesim sweep"}


def test_the_readme_lists_every_command() -> None:
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## Commands", 1)[1].split("\n## ", 1)[0]
    parser = cli_main.build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert [c for c in sub.choices if f"`wsesim {c}" not in section] == []
    assert "`wsesim --version`" in section


def test_internal_error_is_public() -> None:
    import wsesim

    assert wsesim.InternalError is InternalError


# ------------------------------------------------------------------------------------------------ --json


def test_validate_json(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(REPO / "hardware" / "tiny8.yaml"), str(REPO / "workloads" / "qwen3-30b-a3b" / "bta-paper.yaml")]
    code, out, err = _main(capsys, "validate", *files, "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == [{"file": files[0], "kind": "hardware", "name": "tiny8"},
                               {"file": files[1], "kind": "sweep", "name": "bta-paper"}]


def test_validate_json_prints_nothing_when_a_file_is_bad(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    code, out, err = _main(capsys, "validate", str(REPO / "hardware" / "tiny8.yaml"), str(missing), "--json")
    assert (code, out, err) == (2, "", f"wsesim: {missing}: no such file\n")  # no half a JSON list


def test_hardware_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "hardware", "list", "--json")
    assert (code, err) == (0, "")
    listed = json.loads(out)
    assert [h["name"] for h in listed["hardware"]] == sorted(p.stem for p in (REPO / "hardware").glob("*.yaml"))
    assert [i["name"] for i in listed["interconnects"]] == ["swarmx"]
    assert all(p["description"] for p in [*listed["hardware"], *listed["interconnects"]])


# ----------------------------------------------------------------------------- the same --set key paths


@pytest.mark.parametrize("key", ["hardware.pe.sram", "pe.sram"])
def test_hardware_show_takes_the_experiment_key_paths(capsys: pytest.CaptureFixture[str], key: str) -> None:
    """tiny8 with 96 KiB per PE: 64 · 98,304 B; the short form of before still works."""
    code, out, err = _main(capsys, "hardware", "show", "tiny8", "--set", f"{key}=96 KiB", "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["sram_total_bytes"] == 6_291_456


@pytest.mark.parametrize(("args", "line"), [
    (["hardware", "show", "tiny8", "--set", "hardware.pe.srma=1 B"],
     'wsesim: --set: hardware.pe.srma: unknown key; did you mean "sram"?'),
    (["run", "--set", "model.expert=64"], 'wsesim: --set: model.expert: unknown key; did you mean "experts"?'),
    (["memory", "training", "--set", "trainig.tiles=2"], 'wsesim: --set: trainig: unknown key; did you mean "training"?'),
    (["fabric", "tiny8", "--pattern", "hotspot", "--set", "hardware.fabric.colour=4"],
     'wsesim: --set: hardware.fabric.colour: unknown key; did you mean "colours"?'),
])
def test_a_misspelt_key_suggests_the_closest(capsys: pytest.CaptureFixture[str], args: list[str], line: str) -> None:
    assert _main(capsys, *args) == (2, "", line + "\n")


# ---------------------------------------------------------------------------- whose fault an error is


def test_a_defect_is_an_internal_error_not_bad_input(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken invariant deep inside (here: in place of the loader) is exit 1 and "internal error", on
    one line whatever its message holds; never exit 2, which says the user's input was wrong."""
    import wsesim.cli.validate

    def broken(path: str) -> object:
        raise InternalError("expected 4 byte counts (one per expert), got 3\nsecond line")

    monkeypatch.setattr(wsesim.cli.validate, "validate_file", broken)  # the loader's, as the command holds it
    monkeypatch.delenv("WSESIM_DEBUG", raising=False)
    code, out, err = _main(capsys, "validate", "x.yaml")
    assert (code, out) == (1, "")
    assert err == ("wsesim: internal error: InternalError: expected 4 byte counts (one per expert), got 3\\nsecond line "
                   "(set WSESIM_DEBUG=1 for the traceback; please report it)\n")
    monkeypatch.setenv("WSESIM_DEBUG", "1")
    with pytest.raises(InternalError):
        cli.main(["validate", "x.yaml"])


HOSTILE = {
    "kind-list": (["validate", "{d}/k.yaml"], "wsesim: {d}/k.yaml: kind: expected one of " + ", ".join(sorted(KINDS))
                  + ", got a list"),
    "control-yaml": (["validate", "{d}/c.yaml"], "wsesim: {d}/c.yaml: line 2: expected printable text, got the "
                     "non-printable character U+0007 (column 9)"),
    "control-set": (["hardware", "show", "tiny8", "--set", "name=a\x07b"], "wsesim: --set: expected KEY.PATH=VALUE "
                    "without control characters, got 'name=a\\x07b' (U+0007)"),
    "deep": (["validate", "{d}/deep.yaml"], "wsesim: {d}/deep.yaml: name" + "[0]" * 18 + "[…: expected at most 64 "
             "levels of nesting, got more (line 2)"),
    "io": (["hardware", "show", "tiny8", "--set", "io.bandwidth=1e-300 B/s"],
           'wsesim: --set: io.bandwidth: expected a bandwidth from 1 MB/s to 1 PB/s, got "1e-300 B/s"'),
    "gemm": (["hardware", "show", "tiny8", "--set", "hardware.runtime.gemm_efficiency=1e-300"],
             'wsesim: --set: hardware.runtime.gemm_efficiency: expected a fraction from 0.1 % to 100 %, got "1e-300"'),
    "overhead": (["run", "--set", "hardware.runtime.task_overhead=1e308 cycles"],
                 'wsesim: --set: hardware.runtime.task_overhead: expected a cycle count from 0 cycles to 100000000 '
                 'cycles, got "1e308 cycles"'),
    "experts": (["memory", "training", "--set", "model.experts=100000"],
                "wsesim: --set: model.experts: expected a value ≤ 65536, got 100000 (an int)"),
    "fabric-bytes": (["fabric", "tiny8", "--pattern", "hotspot", "--bytes", "1e300 B"],
                     'wsesim: --bytes: expected a positive number of bytes up to 1 TiB like "256" or "4 KiB", got '
                     '"1e300 B"'),
    "attention": (["memory", "attention", "--seq-len", "1" + "0" * 200, "--head-dim", "64", "--tile", "128", "--heads",
                   "16", "--bytes-per-value", "4 B"], "wsesim: seq_len: expected at most 16777216, got 1" + "0" * 198 + "…"),
    "zipf": (["run", "--set", "training.routing=zipf:2000"], 'wsesim: --set: training.routing: expected "uniform" or '
             '"zipf:<alpha>" with alpha from 0 to 100 (e.g. "zipf:1.2"), got "zipf:2000"'),
}


def test_hostile_input_through_the_entry_point(tmp_path: Path) -> None:
    """Each ended as "internal error" (exit 1), one of them on two lines: now exit 2, exactly one line
    naming the file and key path, nothing on stdout, nothing written. Run side by side (~1 s each)."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "k.yaml").write_text("kind: [experiment]\n", encoding="utf-8")
    (d / "c.yaml").write_text("kind: model\nname: ab\x07\n", encoding="utf-8")
    (d / "deep.yaml").write_text("kind: model\nname: " + "[" * 3000 + "]" * 3000 + "\n", encoding="utf-8")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    procs = {name: subprocess.Popen([sys.executable, "-m", "wsesim", *[a.format(d=d) for a in args]], cwd=cwd,
                                    text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for name, (args, _) in HOSTILE.items()}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert (proc.returncode, out) == (2, ""), (name, err)
        assert err == HOSTILE[name][1].format(d=d) + "\n", name
    assert list(cwd.iterdir()) == []
