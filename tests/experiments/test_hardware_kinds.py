"""The hardware-kind table (``experiments.hardware_kinds``): one entry for every kind a hardware spec can
have, the commands' views of the same kinds, and what each refuses."""

from __future__ import annotations

import typing

from wsesim.cli import hardware as hardware_cli
from wsesim.cli import kernel as kernel_cli
from wsesim.cli.sweep import row_text
from wsesim.config.gpu import GpuSpec
from wsesim.config.hardware import HardwareSpec
from wsesim.experiments.hardware_kinds import KINDS


def test_every_kind_of_hardware_spec_has_one_entry_and_one_view_in_each_command() -> None:
    """The specs' ``kind`` literals are exactly the table's keys, and the commands' views cover the same."""
    kinds = {typing.get_args(spec.model_fields["kind"].annotation)[0] for spec in (HardwareSpec, GpuSpec)}
    assert set(KINDS) == kinds == set(kernel_cli.VIEWS) == set(hardware_cli.VIEWS)


def test_the_progress_line_names_the_machine_a_row_ran_on() -> None:
    """A served row's ``system`` says what a stage spans and what it runs on: a wafer's grid of PEs, a GPU
    stage's 1 × tp grid as tp GPUs of a node; a row without one (an older CSV) is a wafer's."""
    row = {"set:inference.scheduler.batch": 1, "status": "ok", "tokens_per_s_per_request": 871.1,
           "tokens_per_s": 758.7, "ttft_s": 0.0025, "grid": "1x8", "stages": 1, "systems": 1}
    gpu = row_text({**row, "system": "8-GPU node"}, ["inference.scheduler.batch"])
    assert gpu.endswith("(1 stage of 8 GPUs on 1 8-GPU node)") and "PEs" not in gpu
    assert row_text(row, ["inference.scheduler.batch"]).endswith("(1 stage of 1x8 PEs on 1 wafer)")


def test_what_each_kind_refuses() -> None:
    """A wafer runs every command; a GPU refuses a wafer-only command (naming it) and the grid search."""
    wafer, gpu = KINDS["hardware"], KINDS["gpu"]
    assert wafer.refusal("wafer") == wafer.refusal("grid search") == ""
    assert "`wsesim memory` needs a wafer" in gpu.refusal("wafer").format(command="wsesim memory")
    assert gpu.refusal("grid search").startswith("expected a wafer with --search")
    assert gpu.refusal("anything else") == ""
