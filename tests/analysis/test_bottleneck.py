"""The bottleneck line of a serving run under load (``wsesim.analysis.bottleneck.bottleneck``, issue 40): it
said "requests queueing for a busy stage: 98 % of a decode step … busiest stage 26 % busy", blaming a stage
that was not busy. It now names what limits the run in words its own figures agree with: admission when
``inference.scheduler.batch`` requests are in flight and the stages have room, the stage and its busy share when one
is busy."""

from __future__ import annotations

import re
from typing import Any

import pytest

import wsesim

TINY = {"inference.load.prompt_len": 16, "inference.load.output_len": 4, "hardware.pe.sram": "1 MiB",
        "inference.load.arrival": "poisson", "inference.load.requests": 60}


def _served(**overrides: Any) -> dict[str, Any]:
    run = wsesim.infer(hardware="tiny8", model="tiny-moe", overrides={**TINY, **overrides})
    return run.result.to_dict()


def test_admission_saturated_with_the_stages_far_from_busy_blames_admission() -> None:
    """Two stages on two wafers (a layer each, SwarmX between them), 2 requests in flight at most, offered
    a million a second: the requests wait for admission (queueing most of their TTFT) while each stage
    idles more than half the run."""
    r = _served(**{"inference.scheduler.batch": 2, "inference.load.rate": 1_000_000, "inference.grid": "8x8",
                   "inference.layers_per_stage": 1, "inference.interconnect": "swarmx",
                   "inference.systems": 2, "hardware.pe.sram": "64 KiB"})
    busy = [s["busy"] for s in r["per_stage"]]
    assert r["largest_batch"] == 2 and max(busy) < 0.5 and r["queueing_s"] > 0.5 * r["ttft_s"]
    text = r["bottleneck"]
    assert text.startswith("admission: 2 requests in flight at most (inference.scheduler.batch)")
    assert f"busiest stage {busy.index(max(busy))}, {100 * max(busy):.0f} % busy" in text
    assert f"waits {1e3 * r['queueing_s']:.3g} ms" in text
    assert "busy stage" not in text and "busy with other requests" not in text
    # the capacity is admission's (Little's law: 2 in flight over their time held), and the run says the
    # offered load exceeds it though no stage is busy
    said = [w for w in r["warnings"] if "exceeds the measured capacity" in w]
    assert len(said) == 1 and "at most 2 in flight (inference.scheduler.batch)" in said[0]


def test_a_saturated_stage_is_named_with_its_busy_share() -> None:
    """One stage, 16 requests in flight at most, offered a million a second: the stage is busy all the run
    and the requests queue for it."""
    r = _served(**{"inference.scheduler.batch": 16, "inference.load.rate": 1_000_000})
    share = r["per_stage"][0]["busy"]
    assert share > 0.9
    assert r["bottleneck"].startswith(f"the stage busy {100 * share:.0f} % of the run: a request waits ")
    assert "admission" not in r["bottleneck"]


@pytest.mark.parametrize("batch", [2, 16])
def test_below_capacity_the_line_is_the_decode_step_alone(batch: int) -> None:
    r = _served(**{"inference.scheduler.batch": batch, "inference.load.rate": 1000})
    assert re.match(r"arithmetic on the PEs: \d+ % of a decode step; costliest op ", r["bottleneck"])
