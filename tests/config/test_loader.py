"""The loader (wsesim.config.loader): strict YAML, presets by name, dotted overrides, and one-line errors that
name the file, the key path, what was expected and what came.

Most bad files are the shipped ``hardware/tiny8.yaml`` or ``workloads/tiny-moe.yaml`` with one line
changed, written under ``tmp_path``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest

from wsesim.config import loader, overrides
from wsesim.config.errors import ConfigError
from wsesim.config.specs import ExperimentSpec, HardwareSpec, ModelSpec

REPO = Path(__file__).resolve().parents[2]
WriteYaml = Callable[[str, str], Path]

TINY_EXPERIMENT = """\
kind: experiment
name: tiny
hardware: tiny8
model: tiny-moe
training:
  seq_len: 64
  batch_per_tile: 1
"""


def _error(call: Callable[[], object]) -> ConfigError:
    """The ``ConfigError`` that ``call`` raises; its text must be exactly one line."""
    with pytest.raises(ConfigError) as e:
        call()
    text = str(e.value)
    assert text and "\n" not in text and "\r" not in text, text
    assert "Traceback" not in text
    return e.value


def _file_error(path: Path) -> ConfigError:
    return _error(lambda: loader.validate_file(path))


def _replace(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# ------------------------------------------------------------------------------------- schema errors


def test_misspelt_key_suggests_the_closest(write_yaml: WriteYaml, tiny8_text: str) -> None:
    """A misspelt key is also a missing one; the error reports the unknown key, which names the culprit,
    and the closest valid key (difflib over the YAML names)."""
    p = write_yaml("hw.yaml", _replace(tiny8_text, "  simd_width: 4", "  simd_widht: 4"))
    e = _file_error(p)
    assert (e.source, e.path) == (str(p), "pe.simd_widht")
    assert str(e) == f'{p}: pe.simd_widht: unknown key; did you mean "simd_width"?'


def test_unknown_key_with_nothing_close_lists_the_valid_keys(write_yaml: WriteYaml, tiny8_text: str) -> None:
    p = write_yaml("hw.yaml", _replace(tiny8_text, "  simd_width: 4", "  simd_width: 4\n  turbo: 1"))
    assert str(_file_error(p)) == (f"{p}: pe.turbo: unknown key (valid keys: instruction_issue, "
                                   "microthreads, partial_sum_width, reduction, reserved_sram, simd_width, simd_width_fp32, "
                                   "simd_width_mixed, sram, sram_bandwidth, sram_read, "
                                   "sram_write)")


def test_unknown_top_level_key(write_yaml: WriteYaml, tiny_moe_text: str) -> None:
    p = write_yaml("m.yaml", tiny_moe_text + "num_experts: 4\n")
    e = _file_error(p)
    assert e.path == "num_experts"
    assert str(e) == f'{p}: num_experts: unknown key; did you mean "experts"?'


def test_bare_number_where_a_size_is_expected(write_yaml: WriteYaml, tiny8_text: str) -> None:
    p = write_yaml("hw.yaml", _replace(tiny8_text, "sram: 48 KiB", "sram: 48"))
    assert str(_file_error(p)) == f'{p}: pe.sram: expected a size like "48 KiB", got 48 (a bare number)'


def test_wrong_dimension(write_yaml: WriteYaml, tiny8_text: str) -> None:
    p = write_yaml("hw.yaml", _replace(tiny8_text, "clock: 1 GHz", "clock: 48 KiB"))
    e = _file_error(p)
    assert (e.source, e.path) == (str(p), "clock")
    assert str(e) == f'{p}: clock: expected a frequency like "850 MHz", got "48 KiB" (a KiB quantity)'


def test_non_positive_size(write_yaml: WriteYaml, tiny8_text: str) -> None:
    p = write_yaml("hw.yaml", _replace(tiny8_text, "sram: 48 KiB", "sram: 0 KiB"))
    assert str(_file_error(p)) == f'{p}: pe.sram: expected a size from 1 KiB to 1 TiB, got "0 KiB"'


@pytest.mark.parametrize(
    ("old", "new", "path", "expected"),
    [
        ("layers: 2", 'layers: "2"', "layers", 'expected an integer, got "2" (a string)'),
        ("layers: 2", "layers: 2.5", "layers", "expected an integer, got 2.5 (a float)"),
        ("layers: 2", "layers: true", "layers", "expected an integer, got True (a bool)"),
        ("layers: 2", "layers: 0", "layers", "expected a value > 0, got 0 (an int)"),
        ("dtype: bf16", "dtype: int8", "dtype", "expected 'fp32', 'bf16', 'fp16' or 'fp8', got \"int8\" (a string)"),
        ("name: tiny-moe", "name: 7", "name", "expected a string, got 7 (an int)"),
    ],
)
def test_wrong_type(write_yaml: WriteYaml, tiny_moe_text: str, old: str, new: str, path: str, expected: str) -> None:
    p = write_yaml("m.yaml", _replace(tiny_moe_text, old, new))
    assert str(_file_error(p)) == f"{p}: {path}: {expected}"


def test_missing_required_key(write_yaml: WriteYaml, tiny_moe_text: str) -> None:
    p = write_yaml("m.yaml", _replace(tiny_moe_text, "vocab_size: 256\n", ""))
    assert str(_file_error(p)) == f"{p}: vocab_size: required key is missing"


# --------------------------------------------------------------------------------------- YAML errors


def test_duplicate_key_at_a_nested_path(write_yaml: WriteYaml, tiny8_text: str) -> None:
    text = _replace(tiny8_text, "  simd_width: 4", "  simd_width: 4\n  simd_width: 8")
    p = write_yaml("hw.yaml", text)
    second = _line_of(text, "simd_width: 8")
    e = _file_error(p)
    assert (e.source, e.path) == (str(p), "pe.simd_width")
    assert str(e) == f"{p}: pe.simd_width: duplicate key (line {second})"


def test_duplicate_key_in_a_flow_mapping(write_yaml: WriteYaml) -> None:
    p = write_yaml("x.yaml", "kind: experiment\nhardware: tiny8\nmodel: tiny-moe\ntraining: {seq_len: 1, seq_len: 2}\n")
    assert str(_file_error(p)) == f"{p}: training.seq_len: duplicate key (line 4)"


def test_duplicate_top_level_key(write_yaml: WriteYaml, tiny_moe_text: str) -> None:
    p = write_yaml("m.yaml", tiny_moe_text + "layers: 3\n")
    e = _file_error(p)
    assert e.path == "layers" and "duplicate key" in str(e)


@pytest.mark.parametrize(
    ("text", "path", "got"),
    [
        ("mesh:\n  rows: &n 8\n  cols: *n\n", "mesh.rows", "an anchor &n (line 2)"),
        ("a: *x\n", "a", "an alias *x (line 1)"),
        ("a:\n  b: [1, &x 2]\n", "a.b[1]", "an anchor &x (line 2)"),
        ("base: &b {x: 1}\nother:\n  <<: *b\n", "base", "an anchor &b (line 1)"),
    ],
)
def test_yaml_aliases_and_anchors_are_refused(write_yaml: WriteYaml, text: str, path: str, got: str) -> None:
    p = write_yaml("a.yaml", text)
    e = _file_error(p)
    assert (e.source, e.path) == (str(p), path)
    assert str(e) == f"{p}: {path}: expected a plain value (YAML anchors and aliases are not allowed), got {got}"


def test_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "nope.yaml"
    assert str(_file_error(p)) == f"{p}: no such file"
    assert not p.exists()  # nothing is created


def test_directory_instead_of_a_file(tmp_path: Path) -> None:
    assert str(_file_error(tmp_path)) == f"{tmp_path}: expected a YAML file, got a directory"


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_file(write_yaml: WriteYaml, text: str) -> None:
    p = write_yaml("empty.yaml", text)
    assert str(_file_error(p)) == f"{p}: expected a YAML mapping, got an empty file"


@pytest.mark.parametrize(("text", "got"), [("- a\n- b\n", "a list"), ("hello\n", '"hello" (a string)'),
                                         ("42\n", "42 (an int)"), ("null\n", "None (a NoneType)")])
def test_top_level_must_be_a_mapping(write_yaml: WriteYaml, text: str, got: str) -> None:
    p = write_yaml("x.yaml", text)
    assert str(_file_error(p)) == f"{p}: expected a YAML mapping at the top level, got {got}"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("kind: hardware\nmesh: [1, 2\n", 3),  # unclosed flow sequence, found at the end
        ("kind: hardware\nname: a: b\n", 2),
        ("kind: hardware\n\tname: x\n", 2),  # a tab cannot indent
        ("kind: model\n---\nkind: model\n", 2),  # two documents
    ],
)
def test_invalid_yaml_syntax_names_the_line(write_yaml: WriteYaml, text: str, line: int) -> None:
    p = write_yaml("bad.yaml", text)
    e = _file_error(p)
    assert e.source == str(p)
    assert str(e).startswith(f"{p}: line {line}: invalid YAML (")


def test_undecodable_file(tmp_path: Path) -> None:
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"\xff\xfe\x00kind")
    assert str(_file_error(p)) == f"{p}: expected a YAML file (UTF-8 text), got bytes that are not UTF-8 (at byte 0)"


# ---------------------------------------------------------------------------------------------- kind


def test_missing_kind_lists_the_kinds(write_yaml: WriteYaml, tiny8_text: str) -> None:
    p = write_yaml("hw.yaml", _replace(tiny8_text, "kind: hardware\n", ""))
    e = _file_error(p)
    assert (e.source, e.path) == (str(p), "kind")
    assert str(e).startswith(f"{p}: kind: required key is missing (expected one of experiment, gpu, hardware, inference, interconnect, model")


def test_unknown_kind_lists_the_kinds(write_yaml: WriteYaml, tiny8_text: str) -> None:
    p = write_yaml("hw.yaml", _replace(tiny8_text, "kind: hardware", "kind: hardwear"))
    e = _file_error(p)
    assert e.path == "kind"
    assert str(e).startswith(f"{p}: kind: expected one of experiment, gpu, hardware, inference, interconnect, model")
    assert str(e).endswith(", got 'hardwear'")


def test_validate_file_returns_kind_and_spec(tmp_path: Path, write_yaml: WriteYaml) -> None:
    kind, spec = loader.validate_file(REPO / "hardware" / "tiny8.yaml")
    assert kind == "hardware" and isinstance(spec, HardwareSpec) and spec.name == "tiny8"
    kind, spec = loader.validate_file(REPO / "workloads" / "tiny-moe.yaml")
    assert kind == "model" and isinstance(spec, ModelSpec) and spec.experts == 4
    kind, spec = loader.validate_file(write_yaml("e.yaml", TINY_EXPERIMENT))
    assert kind == "experiment" and isinstance(spec, ExperimentSpec)
    assert (spec.hardware.name, spec.model.name, spec.training.seq_len) == ("tiny8", "tiny-moe", 64)


# ------------------------------------------------------------------------------------- cross-field


def test_top_k_above_experts(write_yaml: WriteYaml, tiny_moe_text: str) -> None:
    p = write_yaml("m.yaml", _replace(tiny_moe_text, "top_k: 2", "top_k: 5"))
    assert str(_file_error(p)) == f"{p}: top_k: expected at most experts (4), got 5"


def test_top_k_equal_to_experts_is_valid(write_yaml: WriteYaml, tiny_moe_text: str) -> None:
    p = write_yaml("m.yaml", _replace(tiny_moe_text, "top_k: 2", "top_k: 4"))
    assert loader.validate_file(p)[1].top_k == 4


def test_heads_not_divisible_by_kv_heads(write_yaml: WriteYaml, tiny_moe_text: str) -> None:
    p = write_yaml("m.yaml", _replace(tiny_moe_text, "kv_heads: 2", "kv_heads: 3"))
    assert str(_file_error(p)) == f"{p}: kv_heads: expected a divisor of heads (4), got 3"


def test_staging_buffer_must_be_below_usable_sram(write_yaml: WriteYaml, tiny8_text: str) -> None:
    """Usable SRAM per PE on tiny8 = 48 KiB · (1 − 25 %) = 36 KiB = 36864 B: a 36 KiB staging buffer is
    refused (≥), 35 KiB is accepted."""
    p = write_yaml("hw.yaml", _replace(tiny8_text, "staging_buffer: 4 KiB", "staging_buffer: 36 KiB"))
    e = _file_error(p)
    assert e.source == str(p) and e.path is not None and e.path.startswith("runtime")
    assert "staging_buffer (36864 B)" in str(e) and "unreserved SRAM per PE (36864 B)" in str(e)
    ok = write_yaml("ok.yaml", _replace(tiny8_text, "staging_buffer: 4 KiB", "staging_buffer: 35 KiB"))
    assert loader.validate_file(ok)[1].runtime.staging_bytes == 35 * 1024


# ---------------------------------------------------------------------------------------- union field


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"x"', "expected an integer or 'auto', got \"x\" (a string)"),
        ("0", "expected a value > 0 or 'auto', got 0 (an int)"),
        ("-1", "expected a value > 0 or 'auto', got -1 (an int)"),
        ("2.0", "expected an integer or 'auto', got 2.0 (a float)"),
        ("true", "expected an integer or 'auto', got True (a bool)"),
    ],
)
def test_batch_per_tile_union(write_yaml: WriteYaml, value: str, expected: str) -> None:
    p = write_yaml("e.yaml", TINY_EXPERIMENT.replace("batch_per_tile: 1", f"batch_per_tile: {value}"))
    assert str(_file_error(p)) == f"{p}: training.batch_per_tile: {expected}"


@pytest.mark.parametrize(("value", "expected"), [("auto", "auto"), ("3", 3)])
def test_batch_per_tile_accepts_auto_or_a_positive_int(write_yaml: WriteYaml, value: str, expected: object) -> None:
    p = write_yaml("e.yaml", TINY_EXPERIMENT.replace("batch_per_tile: 1", f"batch_per_tile: {value}"))
    assert loader.validate_file(p)[1].training.batch_per_tile == expected


# ---------------------------------------------------------------------- experiments and their presets


def test_error_in_a_referenced_hardware_file_names_that_file(write_yaml: WriteYaml, tiny8_text: str) -> None:
    bad = write_yaml("bad_hw.yaml", _replace(tiny8_text, "sram: 48 KiB", "sram: 48"))
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("hardware: tiny8", "hardware: bad_hw.yaml"))
    e = _file_error(exp)
    assert (e.source, e.path) == (str(bad), "pe.sram")
    assert str(e) == f'{bad}: pe.sram: expected a size like "48 KiB", got 48 (a bare number)'


def test_error_in_a_referenced_model_file_names_that_file(write_yaml: WriteYaml, tiny_moe_text: str) -> None:
    bad = write_yaml("bad_model.yaml", _replace(tiny_moe_text, "top_k: 2", "top_k: 5"))
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("model: tiny-moe", "model: ./bad_model.yaml"))
    assert str(_file_error(exp)) == f"{bad}: top_k: expected at most experts (4), got 5"


def test_yaml_error_in_a_referenced_file_names_that_file(write_yaml: WriteYaml, tiny8_text: str) -> None:
    text = _replace(tiny8_text, "  rows: 8", "  rows: 8\n  rows: 9")
    bad = write_yaml("dup_hw.yaml", text)
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("hardware: tiny8", "hardware: dup_hw.yaml"))
    assert str(_file_error(exp)) == f"{bad}: mesh.rows: duplicate key (line {_line_of(text, 'rows: 9')})"


def test_referenced_file_of_the_wrong_kind(write_yaml: WriteYaml, tiny_moe_text: str) -> None:
    model = write_yaml("m.yaml", tiny_moe_text)
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("hardware: tiny8", "hardware: m.yaml"))
    assert str(_file_error(exp)) == f"{model}: kind: expected kind: hardware, got kind: 'model'"


def test_referenced_file_missing(write_yaml: WriteYaml) -> None:
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("hardware: tiny8", "hardware: gone.yaml"))
    e = _file_error(exp)
    assert (e.source, e.path) == (str(exp), "hardware")
    assert str(e) == f"{exp}: hardware: no such file {str(exp.parent / 'gone.yaml')!r}"


def test_unknown_preset_name_lists_the_presets(write_yaml: WriteYaml) -> None:
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("hardware: tiny8", "hardware: wse9"))
    names = ", ".join(loader.preset_names("hardware"))
    assert str(_file_error(exp)) == f"{exp}: hardware: expected a hardware preset ({names}) or a path, got 'wse9'"
    model = write_yaml("m.yaml", TINY_EXPERIMENT.replace("model: tiny-moe", "model: tiny-moo"))
    assert "expected a model preset (" in str(_file_error(model)) and "tiny-moe" in str(_file_error(model))


def test_reference_of_the_wrong_type(write_yaml: WriteYaml) -> None:
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("hardware: tiny8", "hardware: [1]"))
    e = _file_error(exp)
    assert e.path == "hardware" and str(e).endswith("a path or a mapping, got [1]")


def test_experiment_without_a_model(write_yaml: WriteYaml) -> None:
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("model: tiny-moe\n", ""))
    assert str(_file_error(exp)) == f"{exp}: model: required key is missing"


def test_error_in_the_experiment_itself_names_the_experiment(write_yaml: WriteYaml) -> None:
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("  seq_len: 64", "  seqlen: 64"))
    e = _file_error(exp)
    assert (e.source, e.path) == (str(exp), "training.seqlen")
    assert str(e) == f'{exp}: training.seqlen: unknown key; did you mean "seq_len"?'


def test_inline_hardware_error_names_the_experiment(write_yaml: WriteYaml, tiny8_text: str) -> None:
    inline = "".join(f"  {line}\n" for line in tiny8_text.splitlines() if line and not line.startswith("#"))
    inline = _replace(inline, "sram: 48 KiB", "sram: 48")
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("hardware: tiny8\n", "hardware:\n" + inline))
    e = _file_error(exp)
    assert (e.source, e.path) == (str(exp), "hardware.pe.sram")


def test_inline_hardware_mapping_is_accepted(write_yaml: WriteYaml, tiny8_text: str) -> None:
    inline = "".join(f"  {line}\n" for line in tiny8_text.splitlines() if line and not line.startswith("#"))
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("hardware: tiny8\n", "hardware:\n" + inline))
    assert loader.validate_file(exp)[1].hardware == loader.load_hardware("tiny8")


# ------------------------------------------------------------------------------------------ overrides


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("model.experts=64", ("model.experts", 64)),
        ("pe.sram=48 KiB", ("pe.sram", "48 KiB")),
        ("training.batch_per_tile=auto", ("training.batch_per_tile", "auto")),
        ("training.seq_len = 128", ("training.seq_len", 128)),
        ("tie_word_embeddings=true", ("tie_word_embeddings", True)),
        ("pe.reserved_sram=0.25", ("pe.reserved_sram", 0.25)),
        ("name=", ("name", "")),
        ("name=a=b", ("name", "a=b")),
    ],
)
def test_parse_override(text: str, expected: tuple[str, object]) -> None:
    assert overrides.parse_override(text) == expected


@pytest.mark.parametrize("text", ["noequals", "=3", "a..b=1", ".a=1", "a.=1", " =1"])
def test_override_without_key_path_and_value(text: str) -> None:
    e = _error(lambda: overrides.parse_override(text))
    assert e.source == "--set"
    assert str(e) == f"--set: expected KEY.PATH=VALUE, got {text!r}"


def test_apply_overrides_never_mutates_its_input() -> None:
    data = {"training": {"seq_len": 64, "tiles": 1}, "model": "tiny-moe"}
    before = copy.deepcopy(data)
    out = loader.apply_overrides(data, {"training.seq_len": 128, "simulation.placement": "snake"})
    assert data == before
    assert out == {"training": {"seq_len": 128, "tiles": 1}, "model": "tiny-moe",
                   "simulation": {"placement": "snake"}}
    assert out["training"] is not data["training"]


def test_override_under_a_scalar() -> None:
    e = _error(lambda: loader.apply_overrides({"training": {"seq_len": 64}}, {"training.seq_len.x": 1}))
    assert (e.source, e.path) == ("--set", "training.seq_len.x")
    assert "training.seq_len is 64, not a mapping" in str(e)


def test_override_under_a_scalar_when_loading(write_yaml: WriteYaml) -> None:
    exp = write_yaml("e.yaml", TINY_EXPERIMENT)
    e = _error(lambda: loader.load_experiment(exp, overrides={"hardware.clock.hz": 1}))
    assert (e.source, e.path) == ("--set", "hardware.clock.hz")
    assert "hardware.clock is '1 GHz', not a mapping" in str(e)


def test_unknown_key_via_override(write_yaml: WriteYaml) -> None:
    exp = write_yaml("e.yaml", TINY_EXPERIMENT)
    e = _error(lambda: loader.load_experiment(exp, overrides={"hardware.pe.srma": "96 KiB"}))
    assert str(e) == '--set: hardware.pe.srma: unknown key; did you mean "sram"?'


def test_bad_value_via_override_names_set(write_yaml: WriteYaml) -> None:
    """The value came from ``--set``, not from ``hardware/tiny8.yaml`` nor the experiment file."""
    exp = write_yaml("e.yaml", TINY_EXPERIMENT)
    key, value = overrides.parse_override("hardware.pe.sram=96")
    e = _error(lambda: loader.load_experiment(exp, overrides={key: value}))
    assert str(e) == '--set: hardware.pe.sram: expected a size like "48 KiB", got 96 (a bare number)'


def test_cross_field_violation_caused_by_an_override_names_set(write_yaml: WriteYaml) -> None:
    """``model.experts=1`` under tiny-moe's ``top_k: 2``: the preset file is valid, the override is not."""
    exp = write_yaml("e.yaml", TINY_EXPERIMENT)
    e = _error(lambda: loader.load_experiment(exp, overrides={"model.experts": 1}))
    assert str(e) == "--set: model.top_k: expected at most experts (1), got 2"
    e = _error(lambda: loader.load_hardware("tiny8", {"pe.sram": "4 KiB"}))
    assert e.source == "--set" and "staging_buffer (4096 B)" in str(e)


def test_error_in_the_file_still_names_the_file_under_an_unrelated_override(
        write_yaml: WriteYaml, tiny8_text: str) -> None:
    bad = write_yaml("bad_hw.yaml", _replace(tiny8_text, "sram: 48 KiB", "sram: 48"))
    exp = write_yaml("e.yaml", TINY_EXPERIMENT.replace("hardware: tiny8", "hardware: bad_hw.yaml"))
    e = _error(lambda: loader.load_experiment(exp, overrides={"model.experts": 8}))
    assert (e.source, e.path) == (str(bad), "pe.sram")


def test_each_override_is_validated_afresh_and_the_loaded_dict_is_untouched(write_yaml: WriteYaml) -> None:
    """A sweep is a base plus overrides: each point validates on its own, and neither a valid nor an
    invalid point leaves a trace in the raw data or in earlier results."""
    data = loader.read_yaml(write_yaml("e.yaml", TINY_EXPERIMENT))
    before = copy.deepcopy(data)
    first = loader.load_experiment_data(data, overrides={"model.experts": 8})
    raw_first = copy.deepcopy(first.raw)
    seen = []
    for experts in (4, 1, 16, 2):
        if experts < 2:  # below top_k = 2
            with pytest.raises(ConfigError, match=r"^--set: model\.top_k: "):
                loader.load_experiment_data(data, overrides={"model.experts": experts})
            continue
        seen.append(loader.load_experiment_data(data, overrides={"model.experts": experts}).spec.model.experts)
    assert seen == [4, 16, 2]
    assert data == before
    assert first.raw == raw_first and first.spec.model.experts == 8
    assert loader.load_experiment_data(data).spec.model.experts == 4


def test_load_hardware_and_model_with_overrides() -> None:
    hw = loader.load_hardware("tiny8", {"pe.sram": "96 KiB", "mesh.rows": 4})
    assert (hw.pe.sram_bytes, hw.pes) == (96 * 1024, 32)
    assert loader.load_hardware("tiny8").pe.sram_bytes == 48 * 1024  # the preset is unchanged
    assert loader.load_model("tiny-moe", {"experts": 8}).experts == 8
    assert str(_error(lambda: loader.load_model("tiny-moe", {"layers": "2"}))) == \
        '--set: layers: expected an integer, got "2" (a string)'


def test_load_experiment_replaces_references(write_yaml: WriteYaml) -> None:
    exp = write_yaml("e.yaml", TINY_EXPERIMENT)
    spec = loader.load_experiment(exp, hardware="wse2", model="qwen3-30b-a3b").spec
    assert (spec.hardware.name, spec.model.name, spec.training.seq_len) == ("wse2", "qwen3-30b-a3b", 64)


def test_loaded_records_where_each_part_came_from(write_yaml: WriteYaml) -> None:
    exp = write_yaml("e.yaml", TINY_EXPERIMENT)
    loaded = loader.load_experiment(exp)
    assert loaded.source == str(exp)
    assert loaded.sources == {"hardware": "hardware/tiny8.yaml", "model": "workloads/tiny-moe.yaml"}
    assert loaded.raw["hardware"]["pe"]["sram"] == "48 KiB"  # raw values, kind stripped
    assert "kind" not in loaded.raw["hardware"]


# -------------------------------------------------------------------------------------------- presets


def test_preset_names_are_the_shipped_files() -> None:
    assert loader.preset_names("hardware") == sorted(p.stem for p in (REPO / "hardware").glob("*.yaml"))
    assert loader.preset_names("model") == sorted(p.stem for p in (REPO / "workloads").glob("*.yaml"))
    assert {"tiny8", "wse2", "wse3"} <= set(loader.preset_names("hardware"))
    assert {"tiny-moe", "qwen3-30b-a3b"} <= set(loader.preset_names("model"))


@pytest.mark.parametrize("name", loader.preset_names("hardware"))
def test_hardware_preset_found_by_name(name: str) -> None:
    assert loader.load_hardware(name).name == name


@pytest.mark.parametrize("name", loader.preset_names("model"))
def test_model_preset_found_by_name(name: str) -> None:
    assert loader.load_model(name).name == name


def test_unknown_preset_by_name() -> None:
    e = _error(lambda: loader.load_hardware("wse9"))
    assert e.path == "hardware" and "expected a hardware preset (" in str(e) and "got 'wse9'" in str(e)


def test_preset_by_path(tmp_path: Path, tiny8_text: str) -> None:
    p = tmp_path / "mine.yaml"
    p.write_text(tiny8_text.replace("name: tiny8", "name: mine"), encoding="utf-8")
    assert loader.load_hardware(p).name == "mine"


def test_default_experiment_is_the_shipped_example() -> None:
    path = loader.default_experiment_path()
    assert path.is_file() and path.name == "experiment.yaml"
    spec = loader.load_experiment().spec
    assert (spec.hardware.name, spec.model.name) == ("wse2", "qwen3-30b-a3b")
