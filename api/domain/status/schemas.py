"""Response shape of GET /v1/status (JSON). Rows hold no cycles: their structs stay out of
the garbage collector's way (gc=False), which a 300-row board would otherwise wake often."""

from __future__ import annotations

import uuid
from datetime import datetime

import msgspec


class StatusEndpoint(msgspec.Struct, gc=False):
    """The endpoint measured, and the deployment it describes now."""

    id: uuid.UUID
    name: str
    model: str
    engine: str | None
    hardware: str | None
    gpu_count: int


class RollingFigure(msgspec.Struct, gc=False):
    """One figure over the window: the latest counted run's value, the median and p95 over
    the window's counted runs, and `trend`: the median of each equal slice of the window
    (oldest first; null where a slice had no run)."""

    latest: float | None
    median: float | None
    p95: float | None
    trend: list[float | None]


class LatestRun(msgspec.Struct, gc=False):
    """The newest counted run in the window (the newest run when none counted)."""

    run_id: uuid.UUID
    job_id: uuid.UUID
    finished_at: datetime
    report_url: str


class Verdict(msgspec.Struct, gc=False):
    """The newest regression verdict in the window (runs.change_verdict) and its run."""

    verdict: str
    run_id: uuid.UUID


class StatusAvailability(msgspec.Struct, gc=False):
    """Scheduled jobs created in the window that succeeded / those that finished
    (succeeded or failed; every job when jobs do not record a schedule), and measured
    requests that did not fail / all, over every succeeded run of the row."""

    jobs_succeeded: int
    jobs_finished: int
    jobs_share: float | None
    requests_total: int
    requests_failed: int
    requests_share: float | None


class StatusRow(msgspec.Struct, gc=False):
    """One watched deployment: endpoint, workload fingerprint, mode and load level.

    `runs` counts its succeeded runs in the window; `runs_counted` those the figures use
    (adequate evidence, not client-bound). A watched endpoint without a succeeded run in
    the window still has a row: no mode, level or figures, and `note` saying why ("no run
    yet", "no succeeded run in this window"), with its scheduled jobs' availability.
    `next_run_at`: the endpoint's next scheduled slot (null when none is enabled)."""

    endpoint: StatusEndpoint
    workload_fingerprint: str | None
    mode: str | None
    level: float | None
    scheduled: bool
    next_run_at: datetime | None
    note: str | None
    runs: int
    runs_counted: int
    latest: LatestRun | None
    last_verdict: Verdict | None
    availability: StatusAvailability
    figures: dict[str, RollingFigure]


class StatusBoard(msgspec.Struct):
    """The board: rows over [since, until], each trend point `bucket_seconds` wide; `total`
    counts its rows (one per endpoint, workload and level), `deployments` its endpoints."""

    window: str
    since: datetime
    until: datetime
    bucket_seconds: float
    sort: list[str]
    total: int
    deployments: int
    rows: list[StatusRow]
