"""Input that once ended as an internal error (issue 12, item 11) is bad input like any other: a
``ConfigError``, one line naming the file and the key path, what was expected and what came — and it
never quotes more than ~200 characters of the file.

Also: overrides of ``load_hardware``/``load_model`` keyed as in an experiment (``hardware.pe.sram``),
and the closest valid key for a misspelt one (issue 12, item 17).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from wsesim.config import loader, overrides
from wsesim.config.errors import ConfigError
from wsesim.config.yaml_strict import MAX_DEPTH, parse_yaml

WriteYaml = Callable[[str, str], Path]
TINY_EXPERIMENT = "kind: experiment\nhardware: tiny8\nmodel: tiny-moe\n"


def _error(call: Callable[[], object]) -> str:
    """The one line of the ``ConfigError`` that ``call`` raises."""
    with pytest.raises(ConfigError) as e:
        call()
    text = str(e.value)
    assert "\n" not in text and "\r" not in text, text
    return text


def _file_error(path: Path) -> str:
    return _error(lambda: loader.validate_file(path))


# ------------------------------------------------------------------------------------------------- kind


@pytest.mark.parametrize(("value", "got"), [("[experiment]", "a list"), ("{a: 1}", "a mapping"),
                                            ("3", "3 (an int)"), ("true", "True (a bool)")])
def test_a_kind_that_is_not_a_string(write_yaml: WriteYaml, value: str, got: str) -> None:
    """``kind: [experiment]`` raised TypeError (unhashable list) in detect_kind."""
    p = write_yaml("k.yaml", f"kind: {value}\n")
    import wsesim.experiments.sweep  # noqa: F401 - registers the sweep kind, as the CLI does

    kinds = ", ".join(loader.kinds())  # experiment, hardware, model, sweep, ...
    assert _file_error(p) == f"{p}: kind: expected one of {kinds}, got {got}"


# ---------------------------------------------------------------------------------- control characters


def test_a_control_character_in_a_file_names_its_line_and_column(write_yaml: WriteYaml) -> None:
    """PyYAML's ReaderError used to escape as an internal error (two lines, at that)."""
    p = write_yaml("c.yaml", "kind: model\nname: a\x01b\n")
    assert _file_error(p) == (f"{p}: line 2: expected printable text, got the non-printable character U+0001 "
                              "(column 8)")


def test_an_escaped_control_character_in_a_name_is_refused(write_yaml: WriteYaml, tiny_moe_text: str) -> None:
    """YAML's "\\x1b" escape gets past the reader; a name that would drive the terminal is still refused."""
    p = write_yaml("m.yaml", tiny_moe_text.replace("name: tiny-moe", 'name: "tiny\\x1b[31m"'))
    assert _file_error(p) == f'{p}: name: expected text without control characters, got "tiny\\x1b[31m" (U+001B)'


def test_a_description_may_span_lines_but_not_hold_control_characters(write_yaml: WriteYaml,
                                                                      tiny_moe_text: str) -> None:
    text = "\n".join(line for line in tiny_moe_text.splitlines() if not line.startswith("description:")) + "\n"
    ok = write_yaml("ok.yaml", text + "description: |\n  two\n  lines\twith a tab\n")
    assert loader.validate_file(ok)[1].description == "two\nlines\twith a tab\n"
    bad = write_yaml("bad.yaml", text + 'description: "bell\\a"\n')
    assert _file_error(bad) == f'{bad}: description: expected text without control characters, got "bell\\x07" (U+0007)'


@pytest.mark.parametrize("char", ["\x01", "\x07", "\n", "\x1b", "\x7f", "\x9b"])
def test_a_control_character_in_an_override(char: str) -> None:
    """``--set name=a<BEL>b`` raised ReaderError; a newline could smuggle a second key into the value."""
    text = f"pe.sram=48{char}KiB"
    assert _error(lambda: overrides.parse_override(text)) == (
        f"--set: expected KEY.PATH=VALUE without control characters, got {text!r} (U+{ord(char):04X})")


# ----------------------------------------------------------------------------------------------- nesting


@pytest.mark.parametrize("style", ["flow", "block"])
def test_nesting_3000_levels_deep(write_yaml: WriteYaml, style: str) -> None:
    """3,000 levels exhausted Python's recursion limit (RecursionError); a file may nest MAX_DEPTH levels."""
    if style == "flow":
        text = "kind: model\nname: " + "[" * 3000 + "]" * 3000 + "\n"
        path, line = "name" + "[0]" * 63, 2
    else:
        text = "kind: model\nname:" + "".join(f"\n{' ' * i}a:" for i in range(1, 3000)) + " 1\n"
        path, line = "name" + ".a" * 63, MAX_DEPTH + 1
    path = path[:59] + "…"  # the key path is clipped to 60 characters
    p = write_yaml("deep.yaml", text)
    assert _file_error(p) == f"{p}: {path}: expected at most 64 levels of nesting, got more (line {line})"


def test_the_nesting_limit_counts_every_node() -> None:
    nested: str = "1"
    for _ in range(MAX_DEPTH - 2):
        nested = f"[{nested}]"
    data = parse_yaml(f"a: {nested}", "<t>")  # MAX_DEPTH levels: the mapping, 62 lists and the scalar
    assert isinstance(data["a"], list)
    assert "levels of nesting" in _error(lambda: parse_yaml(f"a: [{nested}]", "<t>"))


# ---------------------------------------------------------------------------- values Python cannot hold


def test_an_integer_past_4300_digits(write_yaml: WriteYaml) -> None:
    """Python refuses to convert such a string (ValueError), which escaped from PyYAML's constructor."""
    p = write_yaml("big.yaml", "kind: model\nname: x\nlayers: " + "9" * 5000 + "\n")
    assert _file_error(p) == (f"{p}: layers: expected an integer of at most 4300 digits, got an integer of "
                              "5000 characters (line 3)")


def test_an_impossible_date(write_yaml: WriteYaml) -> None:
    p = write_yaml("date.yaml", "kind: model\nname: 2024-13-45\n")
    assert _file_error(p) == (f'{p}: name: expected a value YAML can read, got "2024-13-45" '
                              "(month must be in 1..12, line 2)")


def test_a_binary_file(tmp_path: Path) -> None:
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"kind: model\n\xff\xfe\x00\x01")
    assert _file_error(p) == f"{p}: expected a YAML file (UTF-8 text), got bytes that are not UTF-8 (at byte 12)"


# ------------------------------------------------------------------------------------ long values quoted


@pytest.mark.parametrize(("key", "value"), [
    ("layers", '"' + "x" * 10_000 + '"'),
    ("layers", "9" * 4000),
    ("hardware", '"' + "y" * 10_000 + '"'),
    ("kind", '"' + "z" * 10_000 + '"'),
])
def test_an_error_never_quotes_more_than_200_characters(write_yaml: WriteYaml, tiny_moe_text: str, key: str,
                                                        value: str) -> None:
    if key == "layers":
        p = write_yaml("m.yaml", tiny_moe_text.replace("layers: 2", f"layers: {value}"))
    else:
        p = write_yaml("e.yaml", TINY_EXPERIMENT.replace(f"{key}: ", f"{key}: {value}  # ").replace(
            "kind: experiment", f"kind: {value}" if key == "kind" else "kind: experiment"))
    line = _file_error(p)
    assert len(line) < len(str(p)) + 400, line
    assert "…" in line


def test_a_long_override_value_is_clipped() -> None:
    line = _error(lambda: loader.load_hardware("tiny8", {"pe.sram": "9" * 300 + " B"}))
    assert line == '--set: pe.sram: expected a size from 1 KiB to 1 TiB, got "' + "9" * 199 + '…"'
    line = _error(lambda: loader.load_hardware("tiny8", {"pe.sram": "9" * 5000 + " B"}))  # past a double: inf
    assert line == "--set: pe.sram: expected a size, got '" + "9" * 198 + "… (not finite)"


# ------------------------------------------------------------------ hardware and model overrides by path


def test_load_hardware_takes_the_experiment_key_paths() -> None:
    """``wsesim hardware show --set hardware.pe.sram=…`` (as in an experiment) and the older ``pe.sram=…``."""
    for key in ("hardware.pe.sram", "pe.sram"):
        assert loader.load_hardware("tiny8", {key: "96 KiB"}).pe.sram_bytes == 96 * 1024
    assert loader.load_model("tiny-moe", {"model.experts": 8}).experts == 8


@pytest.mark.parametrize(("overrides", "line"), [
    ({"hardware.pe.sram": 96}, '--set: hardware.pe.sram: expected a size like "48 KiB", got 96 (a bare number)'),
    ({"pe.sram": 96}, '--set: pe.sram: expected a size like "48 KiB", got 96 (a bare number)'),
    ({"hardware.pe.srma": "1 B"}, '--set: hardware.pe.srma: unknown key; did you mean "sram"?'),
    ({"hardware.runtime.staging_buffer": "47 KiB"},
     "--set: hardware.runtime: staging_buffer (48128 B) must be smaller than the unreserved SRAM per PE (36864 B)"),
    ({"pe.sram": "48 KiB", "hardware.pe.simd_width": 0}, "--set: hardware.pe.simd_width: expected a value > 0, got 0 (an int)"),
])
def test_an_override_error_names_the_key_as_written(overrides: dict[str, object], line: str) -> None:
    assert _error(lambda: loader.load_hardware("tiny8", overrides)) == line


# ------------------------------------------------------------------------------------- closest valid key


@pytest.mark.parametrize(("key", "line"), [
    ("model.expert", '--set: model.expert: unknown key; did you mean "experts"?'),
    ("modle.experts", '--set: modle: unknown key; did you mean "model"?'),
    ("training.seqlen", '--set: training.seqlen: unknown key; did you mean "seq_len"?'),
    ("hardware.fabric.colors", '--set: hardware.fabric.colors: unknown key; did you mean "colours"?'),
    ("simulation.zzz", "--set: simulation.zzz: unknown key (valid keys: compute, engine, fabric, granularity, moe_mapping, "
                       "placement)"),
])
def test_a_misspelt_key_suggests_the_closest_valid_one(write_yaml: WriteYaml, key: str, line: str) -> None:
    exp = write_yaml("e.yaml", TINY_EXPERIMENT)
    assert _error(lambda: loader.load_experiment(exp, overrides={key: 64})) == line
