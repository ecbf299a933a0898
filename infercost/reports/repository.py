"""The queries a report needs beyond run summaries: TTFT histograms, binned in SQL, and
the deployment each run measured."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import readable, readable_sql
from infercost.jobs.deployments import Deployment
from infercost.jobs.models import Run

#: Bins of a TTFT histogram: enough to show a tail, few enough to stay a small chart.
TTFT_BINS = 30

# Log-spaced bins shared by every run of the report, so levels overlay on one axis.
# width_bucket puts the maximum in bucket bins + 1; the upper bound is nudged past it. When
# every TTFT is equal the range is widened to about 5% so there is still one real bin. The
# samples are those of the team's runs only (readable_sql binds :team_id).
_TTFT_HISTOGRAM = text(
    """
    WITH s AS (
        SELECT q.run_id, ln(greatest(q.ttft_ms, 0.001)) AS x
        FROM request_samples q JOIN runs owner ON owner.id = q.run_id
        WHERE owner.team_id = :team_id AND q.run_id = ANY(:run_ids) AND NOT q.warmup
          AND q.error_class IS NULL AND q.ttft_ms IS NOT NULL
    ), r AS (
        SELECT min(x) AS lo, greatest(max(x), min(x) + 0.05) * (1 + 1e-12) + 1e-12 AS hi
        FROM s
    )
    SELECT s.run_id, width_bucket(s.x, r.lo, r.hi, :bins) AS bucket, count(*) AS n,
           min(r.lo) AS lo, min(r.hi) AS hi
    FROM s CROSS JOIN r
    GROUP BY s.run_id, bucket
    """
)


@dataclass(frozen=True, slots=True)
class MeasuredOn:
    """What one run measured, as recorded when it started (deployment row, engine version)."""

    model: str
    engine: str | None
    engine_version: str | None
    hardware: str | None
    gpu_count: int


class ReportRepository:
    """Aggregates over raw samples, computed by Postgres so no sample crosses the wire."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def ttft_histograms(
        self, team_id: uuid.UUID, run_ids: Sequence[uuid.UUID], bins: int = TTFT_BINS
    ) -> tuple[list[float], dict[uuid.UUID, list[int]]]:
        """Shared bin edges (ms, log-spaced) and each of the team's runs' counts of measured,
        successful requests per bin; no edges and no counts when no such request has a TTFT."""
        if not run_ids:
            return [], {}
        query = readable_sql(_TTFT_HISTOGRAM, team_id)
        rows = (await self.session.execute(query, {"run_ids": list(run_ids), "bins": bins})).all()
        if not rows:
            return [], {}
        lo, hi = float(rows[0].lo), float(rows[0].hi)
        step = (hi - lo) / bins
        edges = [math.exp(lo + i * step) for i in range(bins + 1)]
        counts: dict[uuid.UUID, list[int]] = {run_id: [0] * bins for run_id in run_ids}
        for row in rows:
            # Bucket 0 and bins + 1 cannot occur (lo is the minimum, hi is past the maximum).
            counts[row.run_id][min(max(int(row.bucket), 1), bins) - 1] += int(row.n)
        return edges, counts

    async def measured_on(
        self, team_id: uuid.UUID, run_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, MeasuredOn]:
        """Each of the team's runs' deployment and engine version, as snapshotted when it
        started."""
        if not run_ids:
            return {}
        rows = await self.session.execute(
            readable(
                Run,
                team_id,
                Run.id,
                Deployment.model,
                Deployment.engine,
                Run.engine_version,
                Deployment.hardware,
                Deployment.gpu_count,
            )
            .join(Deployment, Deployment.id == Run.deployment_id)
            .where(Run.id.in_(list(run_ids)))
        )
        return {
            row.id: MeasuredOn(
                row.model, row.engine, row.engine_version, row.hardware, row.gpu_count
            )
            for row in rows
        }
