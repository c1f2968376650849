"""``grid: auto`` by the run's objective (``experiments.auto_grid``): the candidate that serves one request
best, read off the cost pass; the old wafer-filling rank for ``throughput``; a named grid as it is."""

from __future__ import annotations

from wsesim.config.inference import load_inference
from wsesim.experiments.auto_grid import map_for, step_cycles
from wsesim.sim.programs.mapping import candidate_mappings, map_stages


def test_each_objective_keeps_its_best_candidate() -> None:
    """LLaMA3-8B on a CS-3: 16 grids fit. The whole 755 × 1,170 wafer as one stage (what "fewest wafers,
    then most PEs" took) has a decode step 1.7x as long as the best: six stages of 377 × 195 PEs on the
    same wafer; by TTFT two stages of 377 × 585. Each pick is the candidates' minimum."""
    spec = load_inference(hardware="wse3", model="llama3-8b").spec
    fits = [mp for mp in candidate_mappings(spec) if mp.feasible]
    figures = {mp.grid: step_cycles(spec, mp, 1) for mp in fits}
    by_tpot, by_ttft, rank = map_for(spec, "tpot"), map_for(spec, "ttft"), map_for(spec, "throughput")
    assert by_tpot.grid == min(figures, key=lambda g: figures[g][1]) == (377, 195)
    assert by_ttft.grid == min(figures, key=lambda g: figures[g][0]) == (377, 585)
    assert rank.grid == map_stages(spec).grid == (755, 1170)
    assert figures[(755, 1170)][1] / figures[(377, 195)][1] > 1.7
    assert len(by_tpot.stages) == 6 and by_tpot.systems == 1


def test_a_named_grid_is_mapped_as_it_is() -> None:
    spec = load_inference(hardware="wse3", model="llama3-8b", overrides={"inference.grid": "755x1170"}).spec
    assert map_for(spec, "tpot").grid == (755, 1170)


def test_under_continuous_batching_the_full_batch_decides() -> None:
    """64 requests in flight (Poisson, 1,024-token prompts): by TPOT the grid whose decode step of a full
    batch is shortest — the whole CS-3 as one stage, where 64 vectors share the most PEs — not the six
    small stages that are fastest for one token (2.6x as long for 64)."""
    spec = load_inference(hardware="wse3", model="llama3-8b", overrides={
        "inference.load.arrival": "poisson", "inference.load.rate": 3, "inference.load.requests": 100, "inference.scheduler.batch": 64,
        "inference.load.prompt_len": 1024}).spec
    best = map_for(spec, "tpot")
    assert best.grid == (755, 1170) and len(best.stages) == 1
    small = next(mp for mp in candidate_mappings(spec) if mp.feasible and mp.grid == (377, 195))
    assert step_cycles(spec, small, 64)[1] > 2 * step_cycles(spec, best, 64)[1]
