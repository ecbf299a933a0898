"""Reading a run's telemetry: series as JSON, or every sample as CSV."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.csv import stream_csv
from api.domain.telemetry.schemas import CSV_COLUMNS, Series, TelemetrySeries
from infercost.jobs.models import Run
from infercost.jobs.telemetry import TelemetryRepository


class TelemetryService:
    """The telemetry stored with runs; the caller checks the team's access to the run."""

    def __init__(self, session: AsyncSession) -> None:
        self.store = TelemetryRepository(session)

    async def series(self, run: Run, metrics: Sequence[str] | None) -> TelemetrySeries:
        """The run's series, grouped by metric, URL and labels, points in time order."""
        grouped: dict[tuple[str, str, str], Series] = {}
        async for sample in self.store.stream(run.id, metrics):
            key = (sample.metric, sample.url, json.dumps(sample.labels, sort_keys=True))
            found = grouped.get(key)
            if found is None:
                found = grouped[key] = Series(sample.metric, sample.url, sample.labels, [])
            found.points.append((sample.t, sample.value))
        errors = list((run.telemetry or {}).get("errors") or [])
        return TelemetrySeries(
            run_id=run.id,
            metrics=await self.store.metrics(run.id),
            series=list(grouped.values()),
            errors=errors,
        )


async def telemetry_csv(
    sessionmaker: async_sessionmaker[AsyncSession],
    run_id: uuid.UUID,
    metrics: Sequence[str] | None,
) -> AsyncIterator[str]:
    """Every telemetry sample of a run as CSV, over a session of its own (the response
    outlives the request's session; the caller checks the team's access first)."""
    async with sessionmaker() as session:
        rows = (
            [
                repr(sample.t),
                sample.url,
                sample.metric,
                json.dumps(sample.labels, sort_keys=True, separators=(",", ":")),
                repr(sample.value),
            ]
            async for sample in TelemetryRepository(session).stream(run_id, metrics)
        )
        async for chunk in stream_csv(CSV_COLUMNS, rows, batch=2000):
            yield chunk
