"""The figures of a trace replay beyond a run's own (docs/figures.md, "Replay"): how faithfully
the client kept the trace's schedule, what time_scale compressed, and each interval of trace
time as a load point with its own SLO attainment.

A request belongs to the interval its due time falls in, in trace seconds: floor((t_sched x
time_scale) / interval_s), aligned to the window's start. An interval's rates are over its
wall-clock length (interval_s / time_scale; the window's last interval may be shorter).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from infercost.figures.metrics import (
    ADEQUATE_MAX_ERROR_RATE,
    RequestTiming,
    _slo_limits,
    distribution,
    meets_slo,
)

#: The fewest successful requests an interval needs to stand as a load point (its
#: percentiles over fewer are noise).
INTERVAL_MIN_REQUESTS = 50
#: The distributions each interval keeps: what an SLO may limit.
INTERVAL_FIGURES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")


def _ms(values: Sequence[float | None]) -> list[float]:
    return [v * 1000.0 for v in values if v is not None]


def _interval_stats(timings: Sequence[RequestTiming]) -> dict[str, Any]:
    ok = [t for t in timings if t.succeeded]
    itl: list[float] = []
    weights: list[int] = []
    for t in ok:
        gaps, w = t.itl_gaps()
        itl += [g * 1000.0 for g in gaps]
        weights += w
    return {
        "ttft_ms": distribution(_ms([t.ttft for t in ok])),
        "tpot_ms": distribution(_ms([t.tpot for t in ok])),
        "itl_ms": distribution(itl, weights),
        "e2e_ms": distribution(_ms([t.e2e for t in ok])),
    }


def _within(stats: Mapping[str, Any], slo: Mapping[str, Mapping[str, float]]) -> bool | None:
    """Whether every statistic the SLO limits holds over these stats (None: one was not
    measured), as a run's verdict is reached."""
    for metric, limits in slo.items():
        for key, limit in limits.items():
            observed = stats.get(metric, {}).get(key)
            if observed is None:
                return None
            if observed > limit:
                return False
    return True


def replay_block(
    timings: Sequence[RequestTiming],
    *,
    window_requests: int,
    start_s: float,
    duration_s: float,
    time_scale: float,
    interval_s: float,
    slo: Mapping[str, Mapping[str, float]] | None,
) -> dict[str, Any]:
    """A trace run's `replay` block from its requests (t_sched in seconds from the level's
    start, as the client stored them) and its plan's window, speed and interval."""
    wall_s = duration_s / time_scale
    late = distribution([t.send_late * 1000.0 for t in timings])
    limits = _slo_limits(slo)
    count = max(1, math.ceil(duration_s / interval_s - 1e-9))
    by_interval: list[list[RequestTiming]] = [[] for _ in range(count)]
    for t in timings:
        index = min(count - 1, max(0, int(t.t_sched * time_scale // interval_s)))
        by_interval[index].append(t)
    intervals = []
    for index, members in enumerate(by_interval):
        begin = index * interval_s
        length = min(interval_s, duration_s - begin) / time_scale
        ok = [t for t in members if t.succeeded]
        met = sum(1 for t in members if meets_slo(t, limits)) if limits else None
        stats = _interval_stats(members)
        error_rate = (len(members) - len(ok)) / len(members) if members else None
        within = None if not slo else _within(stats, slo)
        intervals.append(
            {
                "start_s": start_s + begin,
                "requests": len(members),
                "succeeded": len(ok),
                "offered_requests_per_s": len(members) / length if length > 0 else None,
                "requests_per_s": len(ok) / length if length > 0 else None,
                "output_tokens_per_s": sum(t.n_out for t in ok) / length if length > 0 else None,
                "error_rate": error_rate,
                "slo_attainment": None if met is None or not members else met / len(members),
                "goodput_rps": None if met is None or length <= 0 else met / length,
                "slo_passed": None
                if not slo or not ok
                else bool(within) and (error_rate or 0.0) <= ADEQUATE_MAX_ERROR_RATE,
                "stats": stats,
            }
        )
    return {
        "traffic_requests": window_requests,
        "sent": len(timings),
        "time_scale": time_scale,
        "window": {"start_s": start_s, "duration_s": duration_s},
        "wall_duration_s": wall_s,
        "compressed": (
            f"{duration_s:g} s of the trace sent in {wall_s:g} s ({time_scale:g}x faster than "
            "recorded)"
            if time_scale != 1
            else f"{duration_s:g} s of the trace sent at its recorded speed"
        ),
        "send_lateness_ms": {"p50": late["p50"], "p99": late["p99"], "max": late["max"]},
        "interval_s": interval_s,
        "intervals": intervals,
    }
