"""What a plan's levels cannot be, known before any runs: the adequacy rule
(infercost/figures/metrics.py adequacy_block) read against the plan alone.

A level whose measured requests the plan fixes below ADEQUATE_MIN_REQUESTS will be
`few_requests`; one whose scheduled window is shorter than the minimum (ADEQUATE_MIN_DURATION_S,
and ADEQUATE_MIN_TELEMETRY_INTERVALS telemetry intervals when the endpoint is scraped) will be
`short`; a concurrency level above its requests never has that many in flight
(`concurrency_not_held`). What depends on the server (how long a concurrency level of N
requests lasts) is not foreseen. A sweep lengthens its thin levels itself, so it gets none.
"""

from __future__ import annotations

from dataclasses import dataclass

from infercost.figures.metrics import ADEQUATE_MIN_REQUESTS, ADEQUATE_MIN_TELEMETRY_INTERVALS
from infercost.jobs.plan import LoadPlan
from infercost.jobs.sweep import minimum_window_s


@dataclass(frozen=True, slots=True)
class Foreseen:
    """One adequacy reason every listed level will have: its code (as a run's adequacy
    says it), the levels, and what to change."""

    code: str
    levels: tuple[float, ...]
    detail: str


def level_label(level: float, mode: str) -> str:
    """'8 users', '12.5 req/s' or '200 at once', as reports name a level (this module sits
    below the reports, so it says it itself)."""
    if mode == "burst":
        return f"{level:,g} at once"
    if mode != "concurrency":
        return f"{level:,g} req/s"
    return "1 user" if level == 1 else f"{level:,g} users"


def _levels_text(levels: list[float], mode: str) -> str:
    return ", ".join(level_label(level, mode) for level in levels)


def foreseen_inadequacy(load: LoadPlan, *, scraped: bool) -> list[Foreseen]:
    """The adequacy reasons the plan `load` already decides, one per code with the levels it
    hits; `scraped`: whether the endpoint's metrics are scraped (then the window must also
    hold the telemetry intervals)."""
    if load.mode == "sweep" or not load.levels:
        return []
    mode = load.mode
    minimum_s = minimum_window_s(load.telemetry_interval_s if scraped else None)
    few: dict[float, float] = {}
    short: dict[float, float] = {}
    unheld: list[float] = []
    for level in load.levels:
        if mode == "burst":
            measured: float | None = level
            window_s = None
        elif load.duration_s is not None:
            measured = level * load.duration_s if mode == "rate" else None
            window_s = load.duration_s
        else:
            measured = float(load.requests_per_level or 0)
            window_s = measured / level if mode == "rate" else None
        if measured is not None and measured < ADEQUATE_MIN_REQUESTS:
            few[level] = measured
        if window_s is not None and window_s < minimum_s:
            short[level] = window_s
        requests = load.requests_per_level
        if mode == "concurrency" and requests is not None and requests < level:
            unheld.append(level)
    found: list[Foreseen] = []
    if few:
        counts = ", ".join(f"{level_label(lv, mode)}: {n:g}" for lv, n in few.items())
        found.append(
            Foreseen(
                "few_requests",
                tuple(few),
                f"measured requests per level ({counts}) are under the {ADEQUATE_MIN_REQUESTS} "
                "a p99 needs: these levels will be flagged inadequate after they ran; raise "
                "load.requests_per_level (or load.duration_s; a burst: its level)",
            )
        )
    if short:
        lasts = ", ".join(f"{level_label(lv, mode)}: {s:.3g} s" for lv, s in short.items())
        telemetry = (
            f" and {ADEQUATE_MIN_TELEMETRY_INTERVALS} telemetry intervals of "
            f"{load.telemetry_interval_s:g} s"
            if scraped
            else ""
        )
        found.append(
            Foreseen(
                "short",
                tuple(short),
                f"scheduled windows ({lasts}) are shorter than {minimum_s:g} s (the adequacy "
                f"minimum{telemetry}): raise load.duration_s (or the requests of a rate level)",
            )
        )
    if unheld:
        found.append(
            Foreseen(
                "concurrency_not_held",
                tuple(unheld),
                f"{_levels_text(unheld, mode)} with {load.requests_per_level} measured requests "
                "each: the level never has that many requests in flight at once; raise "
                "load.requests_per_level above the level",
            )
        )
    return found
