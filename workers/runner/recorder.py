"""The recorder: a job's runs and their storage, every write under the job's lease.

It inserts a level's run with the price in effect as it starts, writes progress and the
running figures as the job's heartbeat, and stores a measured level (its samples, figures
and telemetry) or marks it failed. Writes that store measurements are retried through a
lost database connection (workers/lease.py `stored`); every transaction starts by checking
the lease's fencing token, so a runner that lost its job writes nothing more.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from functools import partial
from typing import Any

from infercost.db.base import utcnow
from infercost.db.retry import is_transient
from infercost.endpoints.models import Endpoint
from infercost.endpoints.pricing import hourly_price
from infercost.figures.metrics import RequestTiming, RunFigures
from infercost.jobs.deployments import deployment_of
from infercost.jobs.models import Job, Run
from infercost.jobs.repository import JobRepository
from infercost.jobs.samples import sample_rows
from infercost.jobs.telemetry import TelemetryRepository
from workers.lease import Lease, LeaseLost, LevelNotStored, stored
from workers.progress import Progress
from workers.runtime import Runtime
from workers.telemetry import LevelTelemetry

log = logging.getLogger("infercost.worker")


def figures_to_columns(figures: RunFigures) -> dict[str, Any]:
    """The runs-table columns of a run's figures: scalars as columns, distributions as JSONB
    (JobRepository.update_run writes the percentile columns from those)."""
    nested = {"errors", "client", "stats", "not_measured"}
    columns = {f.name: getattr(figures, f.name) for f in fields(figures) if f.name not in nested}
    columns["stats"] = {**figures.stats, "errors": figures.errors, "client": figures.client}
    if figures.not_measured:
        columns["stats"]["not_measured"] = figures.not_measured
    return columns


def failure_message(timings: Sequence[RequestTiming]) -> str | None:
    """'all N requests failed: <most common reason>' when nothing succeeded, else None."""
    if not timings or any(t.succeeded for t in timings):
        return None
    reasons = Counter(t.error or t.error_class or "unknown error" for t in timings)
    reason, _ = reasons.most_common(1)[0]
    return f"all {len(timings)} requests failed: {reason}"


class Recorder:
    """One job's runs in the database, written by the runner holding its lease."""

    def __init__(self, rt: Runtime, job: Job, endpoint: Endpoint, lease: Lease) -> None:
        self.rt = rt
        self.job = job
        self.endpoint = endpoint
        self.lease = lease

    async def start_run(
        self, level_index: int, level: float, mode: str, *, replaces: uuid.UUID | None = None
    ) -> uuid.UUID:
        """Insert the level's run with the price in effect as it starts (the snapshot that
        later queries re-price from), or a note saying how to give the endpoint a price;
        retried through a lost database connection (workers/lease.py). `replaces`: the run
        of this level that its worker's death interrupted."""
        run_id, started_at = uuid.uuid4(), utcnow()
        return await stored(
            partial(
                self._insert_run, run_id, level_index, level, mode, started_at, replaces=replaces
            ),
            settings=self.rt.settings,
            what=f"job {self.job.id} level {level:g}",
        )

    async def _insert_run(
        self,
        run_id: uuid.UUID,
        level_index: int,
        level: float,
        mode: str,
        started_at: datetime,
        *,
        replaces: uuid.UUID | None = None,
    ) -> uuid.UUID:
        """One attempt of start_run, under the lease; keeps a run an earlier attempt
        committed before its connection broke."""
        async with self.rt.sessionmaker() as session:
            await self.lease.hold(session)
            if await JobRepository(session).get_run(self.job.team_id, run_id) is not None:
                return run_id
            price = await hourly_price(session, self.endpoint, started_at)
            deployment_id = await deployment_of(session, self.endpoint)
            run = Run(
                id=run_id,
                team_id=self.job.team_id,
                job_id=self.job.id,
                endpoint_id=self.endpoint.id,
                deployment_id=deployment_id,
                engine_version=self.endpoint.engine_version,
                level_index=level_index,
                level=float(level),
                mode=mode,
                status="running",
                started_at=started_at,
                usd_per_hour=price.usd_per_hour,
                price_note=price.note,
                usd_per_million_input_tokens=price.per_token[0] if price.per_token else None,
                usd_per_million_output_tokens=price.per_token[1] if price.per_token else None,
                workload_fingerprint=self.job.workload_fingerprint,
                replaces_run_id=replaces,
            )
            await JobRepository(session).add_run(run)
            await session.commit()
        return run.id

    async def note_prompt_tokenizer(self, run_id: uuid.UUID, block: dict[str, Any]) -> None:
        """Say on the run, before it is measured, how its prompt lengths were built."""
        async with self.rt.sessionmaker() as session:
            await self.lease.hold(session)
            await JobRepository(session).update_run(run_id, stats={"prompt_tokenizer": block})
            await session.commit()

    async def beat(
        self,
        progress: Progress,
        run_id: uuid.UUID | None = None,
        live: dict[str, Any] | None = None,
    ) -> bool:
        """Write progress as the job's heartbeat, and `live` as the running figures of run
        `run_id` (cleared with the level's figures, in store_run); False when the job is no
        longer running (cancelled) or its lease was lost. A database that does not answer
        for a moment is waited out: the level goes on, its samples in memory."""
        try:
            async with self.rt.sessionmaker() as session:
                repo = JobRepository(session)
                running = await repo.heartbeat(
                    self.job.id, progress.done, progress.total, token=self.lease.token
                )
                if running and live is not None and run_id is not None:
                    await repo.update_run(run_id, live=live)
                await session.commit()
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning("job %s: progress not written (database unreachable)", self.job.id)
            return True
        return running

    async def store_run(
        self,
        run_id: uuid.UUID,
        status: str,
        timings: list[RequestTiming],
        figures: RunFigures,
        progress: Progress,
        *,
        telemetry: LevelTelemetry,
        origin_s: float,
        prompt_tokenizer: dict[str, Any] | None,
        samples: bool = True,
        replay: dict[str, Any] | None = None,
    ) -> None:
        """Store a level's samples (unless its shards stored them) and figures with the
        job's progress, then its telemetry in a transaction of its own: a telemetry value
        the database refuses costs the telemetry, never the measured level."""
        summary = telemetry.summary(timings, origin_s, self.endpoint.gpu_count)
        columns = figures_to_columns(figures)
        if prompt_tokenizer is not None:
            columns["stats"]["prompt_tokenizer"] = prompt_tokenizer
        # Held in memory until stored: a lost connection is retried for store_retry_s, and
        # each attempt replaces what an earlier one may have committed (one transaction).
        sample_values = sample_rows(run_id, timings) if samples else []

        async def store() -> None:
            async with self.rt.sessionmaker() as session:
                await self.lease.hold(session)
                repo = JobRepository(session)
                if samples:
                    await repo.delete_samples(run_id)
                    await repo.copy_samples(sample_values)
                await repo.update_run(
                    run_id,
                    status=status,
                    finished_at=utcnow(),
                    telemetry=summary,
                    live=None,
                    replay=replay,
                    **columns,
                )
                await repo.heartbeat(
                    self.job.id, progress.done, progress.total, token=self.lease.token
                )
                await session.commit()

        try:
            await stored(
                store,
                settings=self.rt.settings,
                what=f"run {run_id}: storing {len(sample_values)} samples",
            )
        except LevelNotStored as exc:
            await self.fail_run(run_id, str(exc))
            raise
        rows = telemetry.rows(origin_s)
        if not rows:
            return

        async def store_telemetry() -> None:
            async with self.rt.sessionmaker() as session:
                await self.lease.hold(session)
                await TelemetryRepository(session).copy(run_id, rows)
                await session.commit()

        try:
            await stored(
                store_telemetry, settings=self.rt.settings, what=f"run {run_id}: telemetry"
            )
        except LeaseLost:
            raise
        except Exception as exc:
            log.exception("run %s: storing %d telemetry values failed", run_id, len(rows))
            note = (
                f"the scraped values could not be stored ({type(exc).__name__}); "
                "the figures above were computed from them"
            )
            async with self.rt.sessionmaker() as session:
                await self.lease.hold(session)  # as every write: only while the job is ours
                await JobRepository(session).update_run(
                    run_id,
                    telemetry={
                        **(summary or {}),
                        "errors": [*(summary or {}).get("errors", []), note],
                    },
                )
                await session.commit()

    async def fail_run(self, run_id: uuid.UUID, error: str) -> None:
        """Mark a level failed with why, if this runner still holds the job; best effort (the
        sweep fails runs of a job it gives up, so none stays 'running')."""
        try:
            async with self.rt.sessionmaker() as session:
                if await JobRepository(session).hold_lease(self.lease.job_id, self.lease.token):
                    await JobRepository(session).update_run(
                        run_id, status="failed", finished_at=utcnow(), live=None, error=error
                    )
                    await session.commit()
        except Exception:
            log.exception("run %s: could not record that its level failed", run_id)
