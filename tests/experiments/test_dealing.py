"""How a sweep's points are dealt to local workers (``workers._deal``): every point exactly once, the
points of one plan on one worker unless that plan alone is more than a worker's fair share, and the
heaviest work first."""

from __future__ import annotations

from wsesim.experiments.workers import _deal


def _points(spec: dict[str, list[float]]) -> list[tuple[str, float]]:
    return [(key, cost) for key, costs in spec.items() for cost in costs]


def test_every_point_once_and_a_plan_on_one_worker() -> None:
    points = _points({"E8": [1, 1], "E16": [1, 1], "E32": [2, 1], "E64": [2, 1]})
    bins = _deal(points, 2, group=lambda p: p[0], cost=lambda p: p[1])
    assert sorted(p for b in bins for p in b) == sorted(points)
    for key in ("E8", "E16", "E32", "E64"):
        assert sum(any(p[0] == key for p in b) for b in bins) == 1  # each plan built by one worker only
    loads = [sum(p[1] for p in b) for b in bins]
    assert max(loads) - min(loads) <= 1  # 5 and 5: balanced
    assert all([p[1] for p in b] == sorted((p[1] for p in b), reverse=True) for b in bins)  # longest first


def test_a_plan_heavier_than_a_fair_share_is_split() -> None:
    """One plan holding 80 % of the work: keeping it on one worker would leave the other idle."""
    points = _points({"E128": [4, 4, 4, 4], "E8": [1, 1, 1, 1]})
    bins = _deal(points, 2, group=lambda p: p[0], cost=lambda p: p[1])
    assert sorted(p for b in bins for p in b) == sorted(points)
    loads = sorted(sum(p[1] for p in b) for b in bins)
    assert loads == [10, 10]


def test_fewer_points_than_workers() -> None:
    bins = _deal([("a", 1.0)], 4, group=lambda p: p[0], cost=lambda p: p[1])
    assert bins == [[("a", 1.0)]]
