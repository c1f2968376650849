"""``wsesim kernel gemv`` shows what the GEMV takes under the production stack beside the research code's
cycles (docs/model.md §11.11)."""

from __future__ import annotations

import re

from wsesim import cli


def test_gemv_prints_the_production_stack(capsys) -> None:  # noqa: ANN001
    """WSE-3, 755 × 1,170, 1 × 8,192 × 10,240 (LLaMA-3.1-70B's q/k/v): the research GEMV is 1,539 cycles,
    112 of issue (77 for its DSD operations, 35 for the allreduce's turn from one axis to the other: WSE-3's
    5 shared colours re-routed, one 7-cycle issue each) and 51 of compute (the PE's stream, 163), the rest
    its row allreduce (1,376). Its ⌈10,240 / 755⌉ = 14 outputs a row are 7 wavelets, so 7 chunks
    (8 microthreads): production takes max(163, 1,376) + 163 / 7 = 1,399.3 cycles."""
    assert cli.main(["kernel", "gemv", "--hardware", "wse3", "--grid", "755x1170",
                     "--shape", "1x8192x10240"]) == 0
    out = capsys.readouterr().out
    assert "1,539 cycles" in out and "instruction issue 112, compute 51" in out
    line = next(x for x in out.splitlines() if x.startswith("software:"))
    assert re.search(r"production 1,399 cycles, .* first of 7 output chunks", line)


def test_a_collective_prints_no_stack(capsys) -> None:  # noqa: ANN001
    assert cli.main(["kernel", "allreduce", "--grid", "1x8"]) == 0
    assert "software:" not in capsys.readouterr().out
