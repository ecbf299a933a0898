"""The Pareto frontier of serving throughput against per-user speed.

Every deployment and load level is a point: x = median per-user speed (tokens/s one user
sees), y = output tokens/s per GPU (what the hardware delivers). Batching moves a deployment
along its own curve (more users: y up, x down); the frontier is the set of points that no
other point beats on both at once, so it shows the best throughput per GPU available at each
per-user speed, whichever deployment gives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Point(Generic[T]):
    """One measured point: x and y to maximise, and what it stands for."""

    x: float
    y: float
    item: T


@dataclass(frozen=True, slots=True)
class Frontier(Generic[T]):
    """The points on the frontier by x ascending (so y descending; equal points in input
    order), and the dominated ones in input order, each with the index (into `on`) of the
    first frontier point that dominates it."""

    on: list[Point[T]]
    dominated: list[tuple[Point[T], int]]


def dominates(a: Point[T], b: Point[T]) -> bool:
    """a is at least as good as b on both axes and better on one."""
    return a.x >= b.x and a.y >= b.y and (a.x > b.x or a.y > b.y)


def pareto_frontier(points: Sequence[Point[T]]) -> Frontier[T]:
    """Split `points` into the Pareto frontier (maximising x and y) and the dominated rest.

    Equal points do not dominate each other, so both stay on the frontier. Finding the
    frontier is O(n log n): sweep from the largest x down, keeping the best y seen at a
    strictly larger x. Naming each dominated point's first dominator scans the frontier, so
    the whole is O(n log n + n * |frontier|), quadratic at worst.
    """
    order = sorted(range(len(points)), key=lambda i: (-points[i].x, -points[i].y))
    on_desc: list[int] = []
    best_y = float("-inf")
    i = 0
    while i < len(order):
        # Points sharing one x: only those with that x's top y can be on the frontier, and
        # only when that y beats every point at a larger x.
        j = i
        while j < len(order) and points[order[j]].x == points[order[i]].x:
            j += 1
        top = points[order[i]].y
        if top > best_y:
            on_desc.extend(k for k in order[i:j] if points[k].y == top)
            best_y = top
        i = j
    on_set = set(on_desc)
    on = [points[k] for k in sorted(on_desc, key=lambda k: (points[k].x, k))]
    dominated = [
        (p, next(n for n, q in enumerate(on) if dominates(q, p)))
        for k, p in enumerate(points)
        if k not in on_set
    ]
    return Frontier(on=on, dominated=dominated)
