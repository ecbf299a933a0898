"""The Pareto frontier of throughput per GPU (y) against per-user speed (x), by hand."""

from __future__ import annotations

import random

from infercost.comparisons.frontier import Point, dominates, pareto_frontier


def pt(name: str, x: float, y: float) -> Point[str]:
    return Point(x=x, y=y, item=name)


def test_dominated_points_are_not_on_the_frontier() -> None:
    points = [
        pt("A", 10, 1000),  # one user: fastest per user is not it, most per GPU is
        pt("B", 20, 800),
        pt("C", 15, 700),  # B is faster per user and more per GPU: dominated
        pt("D", 40, 300),
        pt("E", 5, 900),  # A beats it on both: dominated
        pt("F", 40, 300),  # equal to D: neither beats the other, both stay
        pt("G", 30, 300),  # D has the same y at a higher x: dominated
    ]
    split = pareto_frontier(points)
    assert [p.item for p in split.on] == ["A", "B", "D", "F"]
    # Each dominated point with the first frontier point that beats it: C by B, E by A, G by D.
    assert [(p.item, split.on[by].item) for p, by in split.dominated] == [
        ("C", "B"),
        ("E", "A"),
        ("G", "D"),
    ]


def test_frontier_runs_by_speed_with_throughput_falling() -> None:
    points = [pt("big-batch", 12.5, 2400.0), pt("small-batch", 95.0, 410.0), pt("mid", 40, 1500)]
    split = pareto_frontier(points)
    assert [(p.x, p.y) for p in split.on] == [(12.5, 2400.0), (40, 1500), (95.0, 410.0)]
    assert split.dominated == []


def test_same_speed_keeps_only_the_higher_throughput() -> None:
    split = pareto_frontier([pt("low", 50, 100), pt("high", 50, 200)])
    assert [p.item for p in split.on] == ["high"]
    assert [(p.item, by) for p, by in split.dominated] == [("low", 0)]


def test_empty_and_single() -> None:
    assert pareto_frontier([]).on == []
    only = pareto_frontier([pt("only", 1, 1)])
    assert [p.item for p in only.on] == ["only"] and only.dominated == []


def test_matches_the_definition_on_random_points() -> None:
    rng = random.Random(7)
    for _ in range(200):
        points = [
            pt(str(i), rng.choice([1, 2, 3, 4, 5.5]), rng.choice([10, 20, 30, 45]))
            for i in range(rng.randint(1, 12))
        ]
        split = pareto_frontier(points)
        expected = {p.item for p in points if not any(dominates(q, p) for q in points)}
        assert {p.item for p in split.on} == expected
        assert len(split.on) + len(split.dominated) == len(points)
        assert all(dominates(split.on[by], p) for p, by in split.dominated)
        assert [p.x for p in split.on] == sorted(p.x for p in split.on)
