"""The status query: a team's board rows read from the summaries the database keeps
(infercost.status.models), one row each with the window's part of its runs, and their
figures over the window computed here, all rows at once.

Every figure is exact over the window's runs, as if computed from the runs themselves: the
median and p95 by linear interpolation (percentile_cont, docs/figures.md's percentiles) over the
counted runs' values, the trend's slice medians the same way, counts and request sums over
every succeeded run in the window, and the scheduled jobs created in the window."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import readable_sql
from infercost.status.figures import (
    FIGURES,
    TREND_BUCKETS,
    Availability,
    Rolling,
    RowFigures,
)
from infercost.status.models import RUN_FIELDS

#: A run in status_series.runs: big-endian float8s.
_RUN = len(RUN_FIELDS) + len(FIGURES)
_BE = np.dtype(">f8")
#: Groups of runs are sorted side by side in one array of at most this many values, padded
#: to the longest group; a longer group (an endpoint measured far more often than the
#: others) is sorted on its own.
_PADDED = 2_000_000

_SERIES_SQL = """
SELECT endpoint_id, nullif(workload_fingerprint, ''), mode, level,
       newest_at, newest_run_id, newest_job_id, counted_at, counted_run_id, counted_job_id,
       verdict, verdict_at, verdict_run_id,
       substring(runs FROM width_bucket(:before, ats) * :record + 1)
FROM status_series
WHERE team_id = :team_id AND newest_at >= :since AND (:everything OR endpoint_id = ANY(:watched))
ORDER BY endpoint_id, workload_fingerprint, mode, level
"""
_JOBS_SQL = """
SELECT endpoint_id, nullif(workload_fingerprint, ''), jobs FROM status_job_series
WHERE team_id = :team_id AND newest_at >= :since AND (:everything OR endpoint_id = ANY(:watched))
"""
#: Per endpoint with a schedule: whether one is enabled, the next slot of those that are.
_SCHEDULED_SQL = """
SELECT endpoint_id, bool_or(enabled), min(next_slot_at) FILTER (WHERE enabled)
FROM schedules WHERE team_id = :team_id GROUP BY endpoint_id
"""
_ENDPOINTS_SQL = """
SELECT e.id, e.name, e.model, e.engine, h.name, e.gpu_count,
       e.id = ANY(:missing) AND EXISTS (
         SELECT 1 FROM runs r WHERE r.team_id = e.team_id AND r.endpoint_id = e.id
           AND r.status = 'succeeded')
FROM endpoints e LEFT JOIN hardware h ON h.id = e.hardware_id
WHERE e.team_id = :team_id AND e.id = ANY(:ids)
"""


@dataclass(frozen=True, slots=True)
class Watched:
    """An endpoint with a schedule: whether one is enabled, and its next slot."""

    enabled: bool
    next_run_at: datetime | None


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One watched deployment row: endpoint, workload, load level and its figures; a
    watched endpoint without a run in the window has one row with no mode, level or
    figures, and `note` saying why."""

    endpoint_id: uuid.UUID
    endpoint_name: str
    model: str
    engine: str | None
    hardware: str | None
    gpu_count: int
    workload_fingerprint: str | None
    mode: str | None
    level: float | None
    scheduled: bool
    next_run_at: datetime | None
    note: str | None
    figures: RowFigures


def _shown(values: NDArray[np.float64]) -> list[Any]:
    """Nested lists of floats, where infinite (no request met the SLO) and NaN (none, or
    interpolated next to an infinite value) show as None."""
    out = values.astype(object)
    out[~np.isfinite(values)] = None
    return list(out.tolist())


def _interpolated(ordered: NDArray[np.float64], size: NDArray[np.int64], q: float) -> Any:
    """percentile_cont(q) along the last axis of `ordered` (sorted, NaN last), `size`
    values each; NaN where there is none. PostgreSQL's arithmetic: the value at q x (n - 1),
    else the two around it, linearly."""
    position = q * np.maximum(size - 1, 0)
    low = np.floor(position).astype(np.int64)
    high = np.ceil(position).astype(np.int64)
    first = np.take_along_axis(ordered, low[..., None], axis=-1)[..., 0]
    second = np.take_along_axis(ordered, high[..., None], axis=-1)[..., 0]
    with np.errstate(invalid="ignore"):
        out = np.where(low == high, first, first + (second - first) * (position - low))
    return np.where(size > 0, out, np.nan)


def _groups(group: NDArray[np.int64], count: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Start and size of each of `count` groups of a grouped (non-decreasing) index."""
    n = np.bincount(group, minlength=count).astype(np.int64)
    return np.cumsum(n) - n, n


def _group_quantiles(
    group: NDArray[np.int64], values: NDArray[np.float64], count: int, qs: Sequence[float]
) -> NDArray[np.float64]:
    """Each quantile of each figure (column of `values`, NaN left out) of each of `count`
    groups of rows (`group` non-decreasing): (count, figures, quantiles), NaN for none."""
    figures = values.shape[1]
    out = np.full((count, figures, len(qs)), np.nan)
    if not len(group):
        return out
    start, n = _groups(group, count)
    width = int(min(n.max(), max(1, _PADDED // (count * figures))))
    position = np.arange(len(group)) - start[group]
    narrow = n[group] <= width
    padded = np.full((figures, count, width), np.nan)
    padded[:, group[narrow], position[narrow]] = values[narrow].T
    padded.sort(axis=-1)
    size = np.sum(~np.isnan(padded), axis=-1)
    for j, q in enumerate(qs):
        out[:, :, j] = _interpolated(padded, size, q).T
    for wide in np.flatnonzero(n > width):
        block = np.sort(values[start[wide] : start[wide] + n[wide]].T, axis=-1)
        size = np.sum(~np.isnan(block), axis=-1)
        for j, q in enumerate(qs):
            out[wide, :, j] = _interpolated(block, size, q)
    return out


@dataclass(frozen=True, slots=True)
class _Computed:
    runs: NDArray[np.int64]
    counted: NDArray[np.int64]
    requests_total: NDArray[np.float64]
    requests_failed: NDArray[np.float64]
    latest: NDArray[np.float64]  # (rows, figures)
    median: NDArray[np.float64]
    p95: NDArray[np.float64]
    trend: NDArray[np.float64]  # (rows, figures, TREND_BUCKETS)


def _compute(blobs: Sequence[bytes], since: float, until: float) -> _Computed:
    """The figures of each row over [since, until] (epoch seconds) from its runs (`blobs`,
    the window's part of status_series.runs, or more), all rows at once."""
    rows = len(blobs)
    figures = len(FIGURES)
    lengths = np.array([len(b) // (8 * _RUN) for b in blobs], dtype=np.int64)
    every = np.frombuffer(b"".join(blobs), dtype=_BE).astype(np.float64).reshape(-1, _RUN)
    row = np.repeat(np.arange(rows, dtype=np.int64), lengths)
    inside = (every[:, 0] >= since) & (every[:, 0] <= until)
    every, row = every[inside], row[inside]
    runs = np.bincount(row, minlength=rows).astype(np.int64)
    requests_total = np.bincount(row, weights=every[:, 2], minlength=rows).astype(np.float64)
    requests_failed = np.bincount(row, weights=every[:, 3], minlength=rows).astype(np.float64)
    kept = every[:, 1] == 1.0
    counted_runs, counted_row = every[kept], row[kept]
    start, counted = _groups(counted_row, rows)
    values = counted_runs[:, len(RUN_FIELDS) :]
    # The newest counted run is each row's last (runs are kept oldest first).
    latest = np.full((rows, figures), np.nan)
    has = counted > 0
    latest[has] = values[(start + counted - 1)[has]]
    whole = _group_quantiles(counted_row, values, rows, (0.5, 0.95))
    # The trend: slice medians, slices of equal width from `since` (the last one closed).
    span = (until - since) / TREND_BUCKETS
    bucket = np.clip(np.floor((counted_runs[:, 0] - since) / span), 0, TREND_BUCKETS - 1).astype(
        np.int64
    )
    trend = _group_quantiles(
        counted_row * TREND_BUCKETS + bucket, values, rows * TREND_BUCKETS, (0.5,)
    )
    return _Computed(
        runs=runs,
        counted=counted,
        requests_total=requests_total,
        requests_failed=requests_failed,
        latest=latest,
        median=whole[:, :, 0],
        p95=whole[:, :, 1],
        trend=trend[:, :, 0].reshape(rows, TREND_BUCKETS, figures).transpose(0, 2, 1),
    )


async def scheduled_endpoints(
    session: AsyncSession, team_id: uuid.UUID
) -> dict[uuid.UUID, Watched]:
    """Endpoints of the team with a schedule, paused or not: the watched deployments."""
    rows = await session.execute(readable_sql(_SCHEDULED_SQL, team_id))
    return {r[0]: Watched(enabled=bool(r[1]), next_run_at=r[2]) for r in rows}


def _within(at: datetime | None, since: datetime, until: datetime) -> bool:
    return at is not None and since <= at <= until


async def status_rows(
    session: AsyncSession,
    team_id: uuid.UUID,
    since: datetime,
    until: datetime,
    *,
    watched: dict[uuid.UUID, Watched],
    everything: bool,
) -> list[StatusRow]:
    """The rows of the board: every endpoint, workload and level with succeeded runs in
    [since, until], limited to `watched` endpoints unless `everything`, and one row for each
    watched endpoint without any (figures null, a note saying why)."""
    if not everything and not watched:
        return []
    uuids = ARRAY(UUID(as_uuid=True))
    params: dict[str, Any] = {
        "since": since,
        "everything": everything,
        "watched": sorted(watched),
        # The runs from the first at or after `since` (a microsecond before: at it counts).
        "before": since - timedelta(microseconds=1),
        "record": 8 * _RUN,
    }
    connection = await session.connection()
    # Core rows on the connection: ORM row processing would cost more than the query.
    series = (
        await connection.execute(
            readable_sql(text(_SERIES_SQL).bindparams(bindparam("watched", type_=uuids)), team_id),
            params,
        )
    ).all()
    job_rows = (
        await connection.execute(
            readable_sql(text(_JOBS_SQL).bindparams(bindparam("watched", type_=uuids)), team_id),
            params,
        )
    ).all()
    computed = _compute([r[13] for r in series], since.timestamp(), until.timestamp())
    # Scheduled jobs created in the window, per endpoint and workload: all rows at once.
    jobs = np.frombuffer(b"".join(r[2] for r in job_rows), dtype=_BE).astype(np.float64)
    jobs = jobs.reshape(-1, 2)
    owner = np.repeat(np.arange(len(job_rows)), [len(r[2]) // 16 for r in job_rows])
    inside = (jobs[:, 0] >= since.timestamp()) & (jobs[:, 0] <= until.timestamp())
    ended = np.bincount(owner[inside], minlength=len(job_rows))
    ok = np.bincount(owner[inside], weights=jobs[inside, 1], minlength=len(job_rows))
    outcomes = {
        (r[0], r[1]): (int(ok[i]), int(ended[i])) for i, r in enumerate(job_rows) if ended[i]
    }
    present = [i for i in range(len(series)) if computed.runs[i] > 0]
    shown = {series[i][0] for i in present}
    missing = sorted(e for e in watched if e not in shown)
    endpoints: dict[uuid.UUID, Sequence[Any]] = {}
    if shown or missing:
        info = await connection.execute(
            readable_sql(
                text(_ENDPOINTS_SQL).bindparams(
                    bindparam("ids", type_=uuids), bindparam("missing", type_=uuids)
                ),
                team_id,
            ),
            {"ids": sorted(shown | set(missing)), "missing": missing},
        )
        endpoints = {r[0]: r for r in info}

    def row(
        endpoint_id: uuid.UUID,
        *,
        fingerprint: str | None,
        mode: str | None,
        level: float | None,
        note: str | None,
        figures: RowFigures,
    ) -> StatusRow:
        e = endpoints.get(endpoint_id)
        w = watched.get(endpoint_id)
        return StatusRow(
            endpoint_id=endpoint_id,
            endpoint_name=e[1] if e else str(endpoint_id),
            model=e[2] if e else "",
            engine=e[3] if e else None,
            hardware=e[4] if e else None,
            gpu_count=int(e[5]) if e else 1,
            workload_fingerprint=fingerprint,
            mode=mode,
            level=level,
            scheduled=w is not None,
            next_run_at=None if w is None else w.next_run_at,
            note=note,
            figures=figures,
        )

    latest_values, medians, p95s = (
        _shown(computed.latest),
        _shown(computed.median),
        _shown(computed.p95),
    )
    trends = _shown(computed.trend)
    rows: list[StatusRow] = []
    for i in present:
        line = series[i]
        endpoint_id, fingerprint, mode, level = line[:4]
        if _within(line[7], since, until):
            latest = (line[8], line[9], line[7])
        elif _within(line[4], since, until):
            latest = (line[5], line[6], line[4])
        else:
            latest = (None, None, None)
        judged = _within(line[11], since, until)
        succeeded, finished = outcomes.get((endpoint_id, fingerprint), (0, 0))
        figures = {
            name: Rolling(
                latest=latest_values[i][f],
                median=medians[i][f],
                p95=p95s[i][f],
                trend=trends[i][f],
            )
            for f, name in enumerate(FIGURES)
        }
        rows.append(
            row(
                endpoint_id,
                fingerprint=fingerprint,
                mode=mode,
                level=float(level),
                note=None,
                figures=RowFigures(
                    runs=int(computed.runs[i]),
                    runs_counted=int(computed.counted[i]),
                    latest_run_id=latest[0],
                    latest_job_id=latest[1],
                    latest_at=latest[2],
                    last_verdict=line[10] if judged else None,
                    last_verdict_run_id=line[12] if judged else None,
                    # Every succeeded run's requests count, adequate or not: a run judged
                    # inadequate for its errors is exactly what availability must see.
                    availability=Availability(
                        jobs_succeeded=succeeded,
                        jobs_finished=finished,
                        requests_total=int(computed.requests_total[i]),
                        requests_failed=int(computed.requests_failed[i]),
                    ),
                    figures=figures,
                ),
            )
        )
    for endpoint_id in missing:
        e = endpoints.get(endpoint_id)
        if e is None:
            continue
        outcome = [v for (k, _), v in outcomes.items() if k == endpoint_id]
        note = "no succeeded run in this window" if e[6] else "no run yet"
        if not watched[endpoint_id].enabled:
            note += "; its schedules are paused"
        rows.append(
            row(
                endpoint_id,
                fingerprint=None,
                mode=None,
                level=None,
                note=note,
                figures=RowFigures(
                    runs=0,
                    runs_counted=0,
                    latest_run_id=None,
                    latest_job_id=None,
                    latest_at=None,
                    last_verdict=None,
                    last_verdict_run_id=None,
                    availability=Availability(
                        jobs_succeeded=sum(j[0] for j in outcome),
                        jobs_finished=sum(j[1] for j in outcome),
                        requests_total=0,
                        requests_failed=0,
                    ),
                    figures={
                        name: Rolling(
                            latest=None, median=None, p95=None, trend=[None] * TREND_BUCKETS
                        )
                        for name in FIGURES
                    },
                ),
            )
        )
    return rows
