"""What the status board shows of one deployment row, the windows and the figures.

A row is one endpoint, workload fingerprint, mode and load level; its figures are the
latest run's value, the median and the p95 over the window's adequate runs, and a trend
(the median of each of TREND_BUCKETS equal slices of the window) for a sparkline. The
repository computes them in the database (infercost.status.repository)."""

from __future__ import annotations

import uuid
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
class Rolling:
    """One figure over the window: the latest counted run's value, median and p95 over the
    counted runs (linear interpolation, as docs/figures.md's percentiles), the trend."""

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
