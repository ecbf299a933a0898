"""Telemetry samples in Postgres: written in bulk with COPY, read back per run and metric.

Reads serve only metrics the mapping knows: the scraper stores nothing else, and rows of
other metrics written before it filtered (raw exporter output) are not shown.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.engines.metrics import METRIC_TABLE
from infercost.jobs.models import TelemetrySample

#: Metric names a read may return: each mapped source, as exposed or with the `_total` the
#: Prometheus parser adds to a counter.
SERVED_METRICS: frozenset[str] = frozenset(
    name for spec in METRIC_TABLE for name in (spec.source, spec.source + "_total")
)

#: COPY column order of `copy_telemetry` rows.
TELEMETRY_COLUMNS = ("run_id", "t", "url", "metric", "labels", "value")


class TelemetryRepository:
    """The telemetry_samples table; callers check the run's team first."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def copy(
        self,
        run_id: uuid.UUID,
        rows: Sequence[tuple[float, str, str, dict[str, str], float]],
    ) -> None:
        """Bulk-write (t, url, metric, labels, value) rows of one run with COPY."""
        if not rows:
            return
        connection = await self.session.connection()
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None
        records = [
            (run_id, t, url, metric, json.dumps(labels), value)
            for t, url, metric, labels, value in rows
        ]
        await driver.copy_records_to_table(
            TelemetrySample.__tablename__, records=records, columns=TELEMETRY_COLUMNS
        )

    async def metrics(self, run_id: uuid.UUID) -> list[str]:
        """The (mapped) metric names scraped during a run, sorted."""
        rows = await self.session.scalars(
            select(TelemetrySample.metric)
            .where(
                TelemetrySample.run_id == run_id,
                TelemetrySample.metric.in_(sorted(SERVED_METRICS)),
            )
            .distinct()
            .order_by(TelemetrySample.metric)
        )
        return list(rows)

    async def stream(
        self, run_id: uuid.UUID, metrics: Sequence[str] | None, batch: int = 5000
    ) -> AsyncIterator[TelemetrySample]:
        """A run's samples of mapped metrics (optionally only `metrics`) by metric, series
        and time."""
        wanted = sorted(SERVED_METRICS if not metrics else SERVED_METRICS & set(metrics))
        query: Any = select(TelemetrySample).where(
            TelemetrySample.run_id == run_id, TelemetrySample.metric.in_(wanted)
        )
        query = query.order_by(
            TelemetrySample.metric, TelemetrySample.url, TelemetrySample.labels, TelemetrySample.t
        )
        result = await self.session.stream_scalars(query.execution_options(yield_per=batch))
        async for row in result:
            yield row
