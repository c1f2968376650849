"""``wsesim schema [KIND] [--out DIR]`` (wsesim.cli.schema, issue 12 item 20): what the schemas say is
tests/config/test_schema.py's; here, what the command prints and writes."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from wsesim import cli
from wsesim.config.schema import KINDS

cli_schema = importlib.import_module("wsesim.cli.schema")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["schema", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_kind_validate_knows_has_a_schema() -> None:
    import wsesim.experiments.sweep  # noqa: F401 - registers the sweep kind
    from wsesim.config import loader

    assert set(KINDS) == set(loader.kinds())
    assert KINDS[:3] == ("hardware", "model", "experiment") and KINDS[-1] == "sweep"


@pytest.mark.parametrize("kind", KINDS)
def test_a_kind_is_printed(capsys: pytest.CaptureFixture[str], kind: str, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, kind)
    assert (code, err) == (0, "")
    assert json.loads(out) == cli_schema.schema_of(kind)
    assert json.loads(out)["title"] == f"wsesim {kind}"
    assert list(tmp_path.iterdir()) == []


def test_out_writes_every_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_dir = tmp_path / "schemas" / "new"
    code, out, err = _run(capsys, "--out", str(out_dir))
    assert (code, err) == (0, "")
    names = [f"{k}.schema.json" for k in KINDS]
    assert out == "".join(f"wrote {out_dir / n}\n" for n in names)
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(names)
    for kind in KINDS:
        assert json.loads((out_dir / f"{kind}.schema.json").read_text(encoding="utf-8")) == cli_schema.schema_of(kind)


def test_out_with_a_kind_and_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = _run(capsys, "model", "--out", str(tmp_path), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == [str(tmp_path / "model.schema.json")]
    assert [p.name for p in tmp_path.iterdir()] == ["model.schema.json"]


def test_without_a_kind_or_out(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys) == (2, "", f"wsesim: wsesim schema: expected a KIND to print ({', '.join(KINDS)}), or --out "
                                   "DIR to write every kind\n")


def test_an_unknown_kind(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert _run(capsys, "wafer", "--out", str(tmp_path / "s")) == (
        2, "", f"wsesim: wsesim schema: KIND: expected one of {', '.join(KINDS)}, got 'wafer'\n")
    assert not (tmp_path / "s").exists()


def test_a_read_only_out_folder(capsys: pytest.CaptureFixture[str], read_only: Path) -> None:
    code, out, err = _run(capsys, "--out", str(read_only))
    assert (code, out) == (2, "")
    assert err.startswith(f"wsesim: {read_only}: expected a folder wsesim can write to, got a read-only one (")
    assert list(read_only.iterdir()) == []
