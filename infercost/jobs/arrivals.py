"""Open-loop arrival schedules: when each request of a rate level is due.

Pure and seeded, so a level's schedule is reproducible from the job's seed and can be checked
against the process it claims to follow (tests/infercost/test_arrivals.py).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

Arrival = Literal["constant", "poisson", "gamma"]

#: Arrival processes a rate level may ask for, in the order error messages list them.
ARRIVALS: tuple[Arrival, ...] = ("constant", "poisson", "gamma")


def _gaps(
    rate: float, arrival: Arrival, burstiness: float, n: int, rng: np.random.Generator
) -> np.ndarray:
    """`n` inter-arrival gaps (s) of mean 1/rate."""
    if arrival == "constant":
        return np.full(n, 1.0 / rate)
    if arrival == "poisson":
        return rng.exponential(1.0 / rate, n)
    # Gamma with shape k and scale 1/(k r): mean 1/r, coefficient of variation 1/sqrt(k).
    return rng.gamma(burstiness, 1.0 / (burstiness * rate), n)


def arrival_offsets(
    rate: float,
    arrival: Arrival,
    rng: np.random.Generator,
    *,
    burstiness: float = 1.0,
    count: int | None = None,
    duration_s: float | None = None,
) -> np.ndarray:
    """Scheduled send times in seconds from the level's start, ascending, as float64.

    The first request is due at 0 and each next one a gap later. Gaps are exactly 1/rate
    (`constant`), exponential with mean 1/rate (`poisson`), or gamma with shape
    k = `burstiness` and scale 1/(k rate) (`gamma`: mean 1/rate, coefficient of variation
    1/sqrt(k), so k < 1 is burstier than Poisson, k > 1 smoother and k = 1 is Poisson).
    Give exactly one of `count` (that many requests) or `duration_s` (every request due
    before duration_s; about rate x duration_s of them).
    """
    if not rate > 0 or not burstiness > 0:
        raise ValueError(f"rate and burstiness must be > 0, got {rate} and {burstiness}")
    if arrival not in ARRIVALS:
        raise ValueError(f"arrival must be one of {', '.join(ARRIVALS)}, got {arrival!r}")
    if (count is None) == (duration_s is None):
        raise ValueError("give exactly one of count and duration_s")
    if count is not None:
        if count <= 0:
            return np.zeros(0)
        offsets = np.empty(count)
        offsets[0] = 0.0
        np.cumsum(_gaps(rate, arrival, burstiness, count - 1, rng), out=offsets[1:])
        return offsets
    assert duration_s is not None
    if not duration_s > 0:
        return np.zeros(0)
    if arrival == "constant":
        offsets = np.arange(math.ceil(rate * duration_s)) / rate
        return offsets[offsets < duration_s]
    # Draw gaps in blocks until the schedule passes duration_s. The first block is the
    # expected count plus six standard deviations, so one block nearly always suffices.
    expected = rate * duration_s
    cv = 1.0 if arrival == "poisson" else 1.0 / math.sqrt(burstiness)
    block = math.ceil(expected + 6.0 * cv * math.sqrt(expected) + 16)
    parts = [np.zeros(1)]
    last = 0.0
    while last < duration_s:
        steps = last + np.cumsum(_gaps(rate, arrival, burstiness, block, rng))
        parts.append(steps)
        last = float(steps[-1])
    offsets = np.concatenate(parts)
    return offsets[: int(np.searchsorted(offsets, duration_s, side="left"))]


def level_cap(mode: str, level_mode: str, max_concurrency: int | None) -> int | None:
    """The cap on requests in flight of a level measured in `level_mode` by a job whose
    load.mode is `mode`: load.max_concurrency for a rate or burst job's levels; None
    otherwise (a sweep's max_concurrency is the users of its throughput level, not a cap on
    its rate levels)."""
    if mode not in ("rate", "burst", "trace") or level_mode != mode:
        return None
    return max_concurrency
