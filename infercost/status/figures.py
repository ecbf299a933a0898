"""Rolling figures of one deployment row from its runs in a window: pure arithmetic over
run-level values the repository read, so it is tested against hand-computed numbers.

A row is one endpoint, workload fingerprint, mode and load level; its figures are the
latest run's value, the median and the p95 over the window's adequate runs, and a trend
(the median of each of TREND_BUCKETS equal slices of the window) for a sparkline."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

#: The windows ?window= accepts.
WINDOWS: dict[str, timedelta] = {
    "24h": timedelta(hours=24),
    "72h": timedelta(hours=72),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
DEFAULT_WINDOW = "72h"
#: Points of each trend series: one per equal slice of the window.
TREND_BUCKETS = 24

#: The figures a row carries, in display order, and what each per-run value is.
FIGURES: dict[str, str] = {
    "ttft_p50_ms": "time to first token, the run's median (ms)",
    "ttft_p95_ms": "time to first token, the run's p95 (ms)",
    "tpot_p50_ms": "time per output token, the run's median (ms)",
    "tpot_p95_ms": "time per output token, the run's p95 (ms)",
    "per_user_tokens_per_s_p50": "output tokens/s one user sees, the run's median",
    "output_tokens_per_s_per_gpu": "output tokens/s / gpu_count (null without hardware)",
    "cost_per_million_at_slo_usd": (
        "USD per million output tokens that met the SLO: the run's cost per million "
        "output tokens x output tokens/s / goodput output tokens/s (null when none met it)"
    ),
}


@dataclass(frozen=True, slots=True)
class RunPoint:
    """One succeeded run of a row, as the repository read it (run-level columns only)."""

    run_id: uuid.UUID
    job_id: uuid.UUID
    finished_at: datetime
    #: Counted in the figures: adequate evidence and not client-bound.
    counted: bool
    requests_total: int
    requests_failed: int
    change_verdict: str | None
    values: dict[str, float | None]


@dataclass(frozen=True, slots=True)
class Rolling:
    """One figure over the window: the latest counted run's value, median and p95 over the
    counted runs (linear interpolation, as METRICS.md's percentiles), the trend."""

    latest: float | None
    median: float | None
    p95: float | None
    trend: list[float | None]


@dataclass(frozen=True, slots=True)
class Availability:
    """Share of scheduled jobs that succeeded, and of measured requests that did not fail."""

    jobs_succeeded: int
    jobs_finished: int
    requests_total: int
    requests_failed: int

    @property
    def jobs_share(self) -> float | None:
        return None if self.jobs_finished == 0 else self.jobs_succeeded / self.jobs_finished

    @property
    def requests_share(self) -> float | None:
        if self.requests_total == 0:
            return None
        return 1.0 - self.requests_failed / self.requests_total


@dataclass(slots=True)
class RowFigures:
    """What one row shows, computed from its runs."""

    runs: int
    runs_counted: int
    latest_run_id: uuid.UUID | None
    latest_job_id: uuid.UUID | None
    latest_at: datetime | None
    last_verdict: str | None
    last_verdict_run_id: uuid.UUID | None
    availability: Availability
    figures: dict[str, Rolling] = field(default_factory=dict)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) by linear interpolation between order statistics
    (NumPy's default method, as METRICS.md says); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def rolling(points: Sequence[RunPoint], name: str, since: datetime, until: datetime) -> Rolling:
    """One figure of a row: `points` are its runs oldest first."""
    counted = [p for p in points if p.counted]
    # A run where no request met the SLO has an infinite cost at the SLO: it must weigh
    # on the median (as the worst value), not vanish from it.
    infinite = name == "cost_per_million_at_slo_usd"
    values: list[tuple[datetime, float]] = []
    for p in counted:
        v = p.values.get(name)
        if v is None and infinite and p.values.get("output_tokens_per_s"):
            v = math.inf
        if v is not None:
            values.append((p.finished_at, v))
    latest = None
    if counted:
        last = counted[-1].values.get(name)
        latest = last
    plain = [v for _, v in values]
    span = (until - since).total_seconds() / TREND_BUCKETS
    buckets: list[list[float]] = [[] for _ in range(TREND_BUCKETS)]
    for at, v in values:
        index = int((at - since).total_seconds() // span) if span > 0 else 0
        buckets[min(max(index, 0), TREND_BUCKETS - 1)].append(v)
    return Rolling(
        latest=_finite(latest),
        median=_finite(percentile(plain, 50)),
        p95=_finite(percentile(plain, 95)),
        trend=[_finite(percentile(b, 50)) for b in buckets],
    )


def row_figures(
    points: Sequence[RunPoint],
    since: datetime,
    until: datetime,
    *,
    jobs_succeeded: int,
    jobs_finished: int,
) -> RowFigures:
    """Every figure of one row from its runs in the window, oldest first."""
    counted = [p for p in points if p.counted]
    latest = counted[-1] if counted else (points[-1] if points else None)
    verdict = next((p for p in reversed(points) if p.change_verdict is not None), None)
    return RowFigures(
        runs=len(points),
        runs_counted=len(counted),
        latest_run_id=None if latest is None else latest.run_id,
        latest_job_id=None if latest is None else latest.job_id,
        latest_at=None if latest is None else latest.finished_at,
        last_verdict=None if verdict is None else verdict.change_verdict,
        last_verdict_run_id=None if verdict is None else verdict.run_id,
        # Every succeeded run's requests count, adequate or not: a run judged inadequate
        # for its errors is exactly what availability must see.
        availability=Availability(
            jobs_succeeded=jobs_succeeded,
            jobs_finished=jobs_finished,
            requests_total=sum(p.requests_total for p in points),
            requests_failed=sum(p.requests_failed for p in points),
        ),
        figures={name: rolling(points, name, since, until) for name in FIGURES},
    )
