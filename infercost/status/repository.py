"""The status query: a team's succeeded runs in a window, read deployment by deployment
through the covering index ix_runs_comparisons (team, deployment, finished_at) and
aggregated per row in the database; and its scheduled jobs' outcomes, for availability."""

# The queries are built from this module's constants and FIGURES' names only; every value
# is a bound parameter.
# ruff: noqa: S608

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.metrics import ADEQUATE_MIN_REQUESTS
from infercost.status.figures import (
    FIGURES,
    TREND_BUCKETS,
    Availability,
    Rolling,
    RowFigures,
)

#: Runs in the window, one deployment at a time (LATERAL: one index range scan each of
#: ix_runs_comparisons, never the team's whole history), with the per-run figures. A run
#: counts in the figures when its evidence is adequate (the comparisons' rule) and it is not
#: client-bound; availability counts every run. A run where no request met the SLO costs
#: infinitely much per good token: it weighs on the median as the worst value, not vanish.
_RUNS_CTE = """
WITH r AS (
  SELECT r.endpoint_id, r.workload_fingerprint COLLATE "C" AS fp, r.mode COLLATE "C" AS mode,
         r.level, r.id, r.job_id,
         r.finished_at, r.requests_total,
         least(greatest(floor(extract(epoch FROM r.finished_at - :since) / :span)::int, 0),
               :last_bucket) AS bucket, r.requests_failed, r.change_verdict,
         coalesce((r.adequacy ->> 'ok')::boolean,
                  r.adequacy IS NULL AND r.requests_succeeded >= :min_requests)
           AND r.client_bound IS NOT TRUE AS counted,
         r.ttft_p50_ms, r.ttft_p95_ms, r.tpot_p50_ms, r.tpot_p95_ms,
         r.per_user_tokens_per_s_p50,
         CASE WHEN d.hardware IS NULL THEN NULL
              ELSE r.output_tokens_per_s / d.gpu_count END AS output_tokens_per_s_per_gpu,
         CASE WHEN r.goodput_output_tokens_per_s > 0
              THEN r.cost_per_million_output_tokens_usd * r.output_tokens_per_s
                   / r.goodput_output_tokens_per_s
              WHEN r.output_tokens_per_s > 0 AND r.cost_per_million_output_tokens_usd
                   IS NOT NULL THEN 'Infinity'::float8
         END AS cost_per_million_at_slo_usd
  FROM deployments d
  CROSS JOIN LATERAL (
      SELECT * FROM runs r
      WHERE r.team_id = :team AND r.deployment_id = d.id AND r.status = 'succeeded'
        AND r.finished_at >= :since AND r.finished_at <= :until
  ) r
  WHERE d.team_id = :team AND (:everything OR r.endpoint_id = ANY(:watched))
)
"""
#: The same runs numbered within their row: `newest` 1 for the newest counted run (the
#: newest run when none counted), `judged` 1 for the newest with a verdict; one window
#: sort each, where an ordered aggregate per figure would sort every row's runs again.
_NUMBERED_CTE = (
    _RUNS_CTE
    + """, n AS (
  SELECT r.*,
         row_number() OVER (PARTITION BY endpoint_id, fp, mode, level
                            ORDER BY counted DESC, finished_at DESC, id DESC) AS newest,
         row_number() OVER (PARTITION BY endpoint_id, fp, mode, level
                            ORDER BY change_verdict IS NOT NULL DESC, finished_at DESC,
                                     id DESC) AS judged
  FROM r
)
"""
)
_KEY = "endpoint_id, fp, mode, level"
#: Per row: counts, the newest counted run (else the newest run), the newest verdict, and
#: each figure's latest value and percentile_cont median and p95 (linear interpolation
#: between order statistics, as METRICS.md's percentiles) over the counted runs.
_ROWS_SQL = (
    _NUMBERED_CTE + f"SELECT {_KEY}, count(*), count(*) FILTER (WHERE counted),"
    " sum(requests_total), sum(requests_failed),"
    " (array_agg(id) FILTER (WHERE newest = 1))[1],"
    " (array_agg(job_id) FILTER (WHERE newest = 1))[1],"
    " max(finished_at) FILTER (WHERE newest = 1),"
    " max(change_verdict) FILTER (WHERE judged = 1),"
    " (array_agg(id) FILTER (WHERE judged = 1 AND change_verdict IS NOT NULL))[1]"
    + "".join(
        f", max({f}) FILTER (WHERE newest = 1 AND counted),"
        f" percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY {f})"
        " FILTER (WHERE counted)"
        for f in FIGURES
    )
    # The trend: each counted run's slice and figures, in the same (unspecified) order in
    # every array; slice medians are taken in Python, where thousands of one-run slices
    # cost far less than as as many ordered-set aggregates.
    + " , array_agg(bucket) FILTER (WHERE counted)"
    + "".join(f", array_agg({f}) FILTER (WHERE counted)" for f in FIGURES)
    + f" FROM n GROUP BY {_KEY} ORDER BY {_KEY}"
)
_JOBS_SQL = """
SELECT endpoint_id, workload_fingerprint, count(*) FILTER (WHERE status = 'succeeded'), count(*)
FROM jobs WHERE team_id = :team AND created_at >= :since AND created_at <= :until
  AND schedule_id IS NOT NULL AND status IN ('succeeded', 'failed')
GROUP BY endpoint_id, workload_fingerprint
"""


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One watched deployment row: endpoint, workload, load level and its figures."""

    endpoint_id: uuid.UUID
    endpoint_name: str
    model: str
    engine: str | None
    hardware: str | None
    gpu_count: int
    workload_fingerprint: str | None
    mode: str
    level: float
    scheduled: bool
    figures: RowFigures


def _finite(value: float | None) -> float | None:
    """Infinite (no request met the SLO) and NaN (interpolated next to one) show as null."""
    return value if value is not None and math.isfinite(value) else None


def _median(values: list[float]) -> float:
    """The median as percentile_cont(0.5) computes it (same arithmetic), of 1+ values."""
    if len(values) == 1:
        return values[0]
    ordered = sorted(values)
    half = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[half]
    low, high = ordered[half - 1], ordered[half]
    return low + (high - low) * 0.5


def _trends(
    buckets: list[int] | None, columns: Sequence[list[float | None] | None]
) -> list[list[float | None]]:
    """Per figure, the median of each slice of the window (None where it had no value)."""
    out: list[list[float | None]] = []
    for column in columns:
        slices: list[list[float]] = [[] for _ in range(TREND_BUCKETS)]
        for bucket, value in zip(buckets or (), column or (), strict=True):
            if value is not None:
                slices[bucket].append(value)
        out.append([_finite(_median(v)) if v else None for v in slices])
    return out


async def scheduled_endpoints(session: AsyncSession, team_id: uuid.UUID) -> set[uuid.UUID]:
    """Endpoints of the team with a schedule, paused or not: the watched deployments."""
    rows = await session.execute(
        text("SELECT DISTINCT endpoint_id FROM schedules WHERE team_id = :team"),
        {"team": team_id},
    )
    return {r[0] for r in rows}


async def _job_outcomes(
    session: AsyncSession, team_id: uuid.UUID, since: datetime, until: datetime
) -> dict[tuple[uuid.UUID, str | None], tuple[int, int]]:
    """(succeeded, finished) scheduled jobs (jobs.schedule_id) per endpoint and workload
    created in the window. Cancelled jobs say nothing about the deployment."""
    rows = await session.execute(
        text(_JOBS_SQL),
        {"team": team_id, "since": since, "until": until},
    )
    return {(r[0], r[1]): (int(r[2]), int(r[3])) for r in rows}


async def status_rows(
    session: AsyncSession,
    team_id: uuid.UUID,
    since: datetime,
    until: datetime,
    *,
    watched: set[uuid.UUID] | None,
) -> list[StatusRow]:
    """The rows of the board: every endpoint, workload and level with succeeded runs in
    [since, until], limited to `watched` endpoints unless it is None."""
    if watched is not None and not watched:
        return []
    params: dict[str, Any] = {
        "team": team_id,
        "since": since,
        "until": until,
        "min_requests": ADEQUATE_MIN_REQUESTS,
        "everything": watched is None,
        "watched": sorted(watched or ()),
        "span": (until - since).total_seconds() / TREND_BUCKETS,
        "last_bucket": TREND_BUCKETS - 1,
    }
    uuids = ARRAY(UUID(as_uuid=True))
    connection = await session.connection()
    # Core rows on the connection: ORM row processing would cost more than the query.
    result = (
        await connection.execute(
            text(_ROWS_SQL).bindparams(bindparam("watched", type_=uuids)), params
        )
    ).all()
    ids = sorted({r[0] for r in result})
    endpoints: dict[uuid.UUID, Sequence[Any]] = {}
    if ids:
        info = await session.execute(
            text(
                "SELECT e.id, e.name, e.model, e.engine, h.name, e.gpu_count FROM endpoints e"
                " LEFT JOIN hardware h ON h.id = e.hardware_id"
                " WHERE e.team_id = :team AND e.id = ANY(:ids)"
            ).bindparams(bindparam("ids", type_=ARRAY(UUID(as_uuid=True)))),
            {"team": team_id, "ids": ids},
        )
        endpoints = {r[0]: r for r in info}
    outcomes = await _job_outcomes(session, team_id, since, until)
    scheduled = watched if watched is not None else await scheduled_endpoints(session, team_id)
    rows: list[StatusRow] = []
    for line in result:
        endpoint_id, fingerprint, mode, level = line[:4]
        trend_at = 13 + 2 * len(FIGURES)
        series = _trends(line[trend_at], line[trend_at + 1 :])
        figures: dict[str, Rolling] = {}
        for i, name in enumerate(FIGURES):
            latest, quantiles = line[13 + 2 * i], line[14 + 2 * i] or (None, None)
            figures[name] = Rolling(
                latest=_finite(latest),
                median=_finite(quantiles[0]),
                p95=_finite(quantiles[1]),
                trend=series[i],
            )
        succeeded, finished = outcomes.get((endpoint_id, fingerprint), (0, 0))
        e = endpoints.get(endpoint_id)
        rows.append(
            StatusRow(
                endpoint_id=endpoint_id,
                endpoint_name=e[1] if e else str(endpoint_id),
                model=e[2] if e else "",
                engine=e[3] if e else None,
                hardware=e[4] if e else None,
                gpu_count=int(e[5]) if e else 1,
                workload_fingerprint=fingerprint,
                mode=mode,
                level=float(level),
                scheduled=endpoint_id in scheduled,
                figures=RowFigures(
                    runs=int(line[4]),
                    runs_counted=int(line[5]),
                    latest_run_id=line[8],
                    latest_job_id=line[9],
                    latest_at=line[10],
                    last_verdict=line[11],
                    last_verdict_run_id=line[12],
                    # Every succeeded run's requests count, adequate or not: a run judged
                    # inadequate for its errors is exactly what availability must see.
                    availability=Availability(
                        jobs_succeeded=succeeded,
                        jobs_finished=finished,
                        requests_total=int(line[6] or 0),
                        requests_failed=int(line[7] or 0),
                    ),
                    figures=figures,
                ),
            )
        )
    return rows
