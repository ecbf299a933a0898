"""The status query: a team's succeeded runs in a window, read deployment by deployment
through the covering index ix_runs_comparisons (team, deployment, finished_at), grouped
into rows in Python; and its scheduled jobs' outcomes, for availability."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.metrics import ADEQUATE_MIN_REQUESTS
from infercost.status.figures import RowFigures, RunPoint, row_figures

#: Runs in the window, one deployment at a time (LATERAL: one index range scan each, never
#: the team's whole history). A run counts in the figures when its evidence is adequate
#: (the comparisons' rule) and it is not client-bound; availability counts every run.
_RUNS_SQL = """
SELECT r.endpoint_id, r.workload_fingerprint, r.mode, r.level, r.id, r.job_id, r.finished_at,
       r.ttft_p50_ms, r.ttft_p95_ms, r.tpot_p50_ms, r.tpot_p95_ms,
       r.per_user_tokens_per_s_p50, r.output_tokens_per_s,
       CASE WHEN d.hardware IS NULL THEN NULL ELSE r.output_tokens_per_s / d.gpu_count END,
       CASE WHEN r.goodput_output_tokens_per_s > 0
            THEN r.cost_per_million_output_tokens_usd * r.output_tokens_per_s
                 / r.goodput_output_tokens_per_s END,
       coalesce((r.adequacy ->> 'ok')::boolean,
                r.adequacy IS NULL AND r.requests_succeeded >= :min_requests)
         AND r.client_bound IS NOT TRUE,
       r.requests_total, r.requests_failed, r.change_verdict
FROM deployments d
CROSS JOIN LATERAL (
    SELECT * FROM runs r
    WHERE r.team_id = :team AND r.deployment_id = d.id AND r.status = 'succeeded'
      AND r.finished_at >= :since AND r.finished_at <= :until
) r
WHERE d.team_id = :team AND (:everything OR r.endpoint_id = ANY(:watched))
ORDER BY r.endpoint_id, r.workload_fingerprint, r.mode, r.level, r.finished_at, r.id
"""

_JOBS_SQL = """
SELECT endpoint_id, workload_fingerprint, count(*) FILTER (WHERE status = 'succeeded'), count(*)
FROM jobs WHERE team_id = :team AND created_at >= :since AND created_at <= :until
  AND schedule_id IS NOT NULL AND status IN ('succeeded', 'failed')
GROUP BY endpoint_id, workload_fingerprint
"""
_FIGURE_COLUMNS = (
    "ttft_p50_ms",
    "ttft_p95_ms",
    "tpot_p50_ms",
    "tpot_p95_ms",
    "per_user_tokens_per_s_p50",
    "output_tokens_per_s",
    "output_tokens_per_s_per_gpu",
    "cost_per_million_at_slo_usd",
)


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
    query = text(_RUNS_SQL).bindparams(bindparam("watched", type_=ARRAY(UUID(as_uuid=True))))
    params: dict[str, Any] = {
        "team": team_id,
        "since": since,
        "until": until,
        "min_requests": ADEQUATE_MIN_REQUESTS,
        "everything": watched is None,
        "watched": sorted(watched or ()),
    }
    # Core rows on the connection: ORM row processing would cost more than the query.
    result = (await (await session.connection()).execute(query, params)).all()
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
    for key, lines in itertools.groupby(result, key=lambda r: (r[0], r[1], r[2], r[3])):
        endpoint_id, fingerprint, mode, level = key
        points = [
            RunPoint(
                run_id=line[4],
                job_id=line[5],
                finished_at=line[6],
                counted=bool(line[15]),
                requests_total=int(line[16] or 0),
                requests_failed=int(line[17] or 0),
                change_verdict=line[18],
                values=dict(zip(_FIGURE_COLUMNS, line[7:15], strict=True)),
            )
            for line in lines
        ]
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
                figures=row_figures(
                    points, since, until, jobs_succeeded=succeeded, jobs_finished=finished
                ),
            )
        )
    return rows
