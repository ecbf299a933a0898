"""Reading a run's telemetry: series as JSON, or every sample as CSV."""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import AsyncIterator, Sequence

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.domain.telemetry.schemas import CSV_COLUMNS, Series, TelemetrySeries
from infercost.errors import NotFound
from infercost.jobs.models import Run
from infercost.jobs.repository import JobRepository
from infercost.telemetry.store import TelemetryRepository


class TelemetryService:
    """A team's view of the telemetry stored with its runs."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.session = session
        self.team_id = team_id
        self.store = TelemetryRepository(session)

    async def run(self, run_id: uuid.UUID) -> Run:
        """The team's run, or 404."""
        run = await JobRepository(self.session).get_run(self.team_id, run_id)
        if run is None:
            raise NotFound(f"no run {run_id}")
        return run

    async def series(self, run_id: uuid.UUID, metrics: Sequence[str] | None) -> TelemetrySeries:
        """The run's series, grouped by metric, URL and labels, points in time order."""
        run = await self.run(run_id)
        grouped: dict[tuple[str, str, str], Series] = {}
        async for sample in self.store.stream(run_id, metrics):
            key = (sample.metric, sample.url, json.dumps(sample.labels, sort_keys=True))
            found = grouped.get(key)
            if found is None:
                found = grouped[key] = Series(sample.metric, sample.url, sample.labels, [])
            found.points.append((sample.t, sample.value))
        errors = list((run.telemetry or {}).get("errors") or [])
        return TelemetrySeries(
            run_id=run_id,
            metrics=await self.store.metrics(run_id),
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
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    async with sessionmaker() as session:
        count = 0
        async for sample in TelemetryRepository(session).stream(run_id, metrics):
            labels = json.dumps(sample.labels, sort_keys=True, separators=(",", ":"))
            writer.writerow([repr(sample.t), sample.url, sample.metric, labels, repr(sample.value)])
            count += 1
            if count % 2000 == 0:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
    yield buffer.getvalue()
