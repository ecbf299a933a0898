"""Queries about jobs, runs and request samples, for the API and the workers alike."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, delete, func, select, update
from sqlalchemy.dialects.postgresql import distinct_on, insert
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.base import utcnow
from infercost.db.scope import owned_by, readable, unscoped
from infercost.figures.metrics import model_columns, percentile_columns
from infercost.jobs import outbox
from infercost.jobs.models import Job, RequestSample, Run, RunModelFigures, TelemetrySample
from infercost.jobs.tasks import RUN_JOB_TASK

#: Column order of the COPY into request_samples: the table's own (infercost/jobs/models.py);
#: rows from infercost.jobs.samples.sample_rows follow it.
SAMPLE_COLUMNS: tuple[str, ...] = tuple(column.name for column in RequestSample.__table__.columns)


@dataclass(frozen=True, slots=True)
class Interruption:
    """What a worker's death did to its job: failed it, or handed it over with `token`."""

    job_id: uuid.UUID
    failed: bool
    token: int


class JobRepository:
    """Jobs, runs and samples; every read a user makes is scoped by team_id
    (infercost.db.scope), the worker's by the id it was handed. Callers commit."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # --- jobs -----------------------------------------------------------------------------

    async def add_job(self, values: dict[str, Any]) -> tuple[Job, bool]:
        """Insert a job; with an idempotency key already used by the team, return that job.

        The bool is True when this call created the job.
        """
        created = await self.session.scalar(
            insert(Job)
            .values(id=uuid.uuid4(), **values)
            .on_conflict_do_nothing(index_elements=[Job.team_id, Job.idempotency_key])
            .returning(Job.id)
        )
        team = readable(Job, values["team_id"])
        if created is not None:
            job = await self.session.scalar(team.where(Job.id == created))
            assert job is not None
            return job, True
        existing = await self.session.scalar(
            team.where(Job.idempotency_key == values["idempotency_key"])
        )
        assert existing is not None, "conflict without a row: idempotency key index is missing"
        return existing, False

    async def get_job(self, team_id: uuid.UUID, job_id: uuid.UUID) -> Job | None:
        """The team's job."""
        return await self.session.scalar(readable(Job, team_id).where(Job.id == job_id))

    async def get_jobs(self, team_id: uuid.UUID, job_ids: Sequence[uuid.UUID]) -> list[Job]:
        """The team's jobs of these ids, in one query."""
        if not job_ids:
            return []
        rows = await self.session.scalars(readable(Job, team_id).where(Job.id.in_(job_ids)))
        return list(rows)

    async def page_jobs(
        self, team_id: uuid.UUID, *, limit: int, offset: int, status: str | None = None
    ) -> tuple[list[Job], int]:
        """The team's jobs, newest first, and how many match."""
        where = [owned_by(Job, team_id)]
        if status:
            where.append(Job.status == status)
        total = await self.session.scalar(select(func.count()).select_from(Job).where(*where))
        rows = await self.session.scalars(
            select(Job)
            .where(*where)
            .order_by(Job.created_at.desc(), Job.id)
            .limit(limit)
            .offset(offset)
        )
        return list(rows), int(total or 0)

    async def active_jobs(self) -> Sequence[Row[Any]]:
        """Every queued or running job of every team, by plan and progress only: the queue
        is shared, so a job's place in it counts other teams' jobs (never shown)."""
        query = select(
            Job.id,
            Job.team_id,
            Job.queue_priority,
            Job.status,
            Job.endpoint_id,
            Job.workload_fingerprint,
            Job.load,
            Job.created_at,
            Job.started_at,
            Job.progress_done,
            Job.progress_total,
        ).where(Job.status.in_(("queued", "running")))
        reason = "a job's place in the shared queue counts every team's jobs (never shown)"
        rows = await self.session.execute(unscoped(query, reason))
        return rows.all()

    async def latest_paces(self, endpoint_ids: Sequence[uuid.UUID]) -> Sequence[Row[Any]]:
        """Per endpoint and workload fingerprint, the latest succeeded run's mean
        concurrency and requests/s (how long a request takes there), newest first."""
        if not endpoint_ids:
            return []
        latest = (
            select(
                Run.endpoint_id,
                Run.workload_fingerprint,
                Run.mean_concurrency,
                Run.requests_per_s,
                Run.finished_at,
            )
            .where(
                Run.endpoint_id.in_(endpoint_ids),
                Run.status == "succeeded",
                Run.requests_per_s > 0,
                Run.mean_concurrency > 0,
            )
            .ext(distinct_on(Run.endpoint_id, Run.workload_fingerprint))
            .order_by(Run.endpoint_id, Run.workload_fingerprint, Run.finished_at.desc())
            .subquery()
        )
        query = select(latest).order_by(latest.c.finished_at.desc())
        reason = "the pace of the endpoints of every team's jobs ahead in the shared queue"
        rows = await self.session.execute(unscoped(query, reason))
        return rows.all()

    async def cancel(self, team_id: uuid.UUID, job_id: uuid.UUID) -> Job | None:
        """Move a queued or running job to cancelled; None when it was not in such a state."""
        job: Job | None = await self.session.scalar(
            update(Job)
            .where(Job.id == job_id, owned_by(Job, team_id), Job.status.in_(("queued", "running")))
            .values(status="cancelled", finished_at=utcnow(), error="cancelled by the user")
            .returning(Job)
        )
        return job

    async def delete_finished(self, team_id: uuid.UUID, job_id: uuid.UUID) -> bool:
        """Delete a job that has ended, with its runs, samples, telemetry and shards (the
        foreign keys cascade; the status board's triggers rebuild its rows). False when the
        job is queued or running: a worker may be writing to it."""
        deleted = await self.session.scalar(
            delete(Job)
            .where(
                Job.id == job_id,
                owned_by(Job, team_id),
                Job.status.not_in(("queued", "running")),
            )
            .returning(Job.id)
        )
        return deleted is not None

    async def prune_samples(self, finished_before: datetime, *, limit: int) -> list[uuid.UUID]:
        """Delete the raw request and telemetry samples of up to `limit` runs that finished
        before `finished_before` under a job that has ended, and mark each run pruned; the
        run's summary stays. Runs another pruner holds are skipped (SKIP LOCKED)."""
        ids = list(
            await self.session.scalars(
                unscoped(
                    select(Run.id)
                    .join(Job, Job.id == Run.job_id)
                    .where(
                        Run.samples_pruned_at.is_(None),
                        Run.finished_at < finished_before,
                        Job.status.not_in(("queued", "running")),
                    )
                    .order_by(Run.finished_at)
                    .limit(limit)
                    .with_for_update(of=Run, skip_locked=True),
                    "retention prunes every team's old samples",
                )
            )
        )
        if not ids:
            return []
        await self.session.execute(delete(RequestSample).where(RequestSample.run_id.in_(ids)))
        await self.session.execute(delete(TelemetrySample).where(TelemetrySample.run_id.in_(ids)))
        await self.session.execute(
            update(Run).where(Run.id.in_(ids)).values(samples_pruned_at=utcnow())
        )
        return ids

    # --- worker side ----------------------------------------------------------------------

    async def claim(self, job_id: uuid.UUID) -> Job | None:
        """queued -> running, guarded, so a duplicate delivery finds nothing to claim. The
        claim takes the job's lease: its fencing token goes up by one, and the returned
        job's lease_token is the one every later write of this runner must carry."""
        now = utcnow()
        job: Job | None = await self.session.scalar(
            update(Job)
            .where(Job.id == job_id, Job.status == "queued")
            .values(
                status="running",
                started_at=now,
                heartbeat_at=now,
                lease_token=Job.lease_token + 1,
            )
            .returning(Job)
        )
        return job

    async def hold_lease(self, job_id: uuid.UUID, token: int) -> bool:
        """Whether the runner holding `token` still owns the job (running, or cancelled by
        its user and so still writing its last level), locking the job row until the
        transaction ends: a sweep giving the job up waits for this write, or this write
        sees that it was given up. Called first in every transaction a runner writes."""
        query = (
            select(Job.id)
            .where(
                Job.id == job_id,
                Job.lease_token == token,
                Job.status.in_(("running", "cancelled")),
            )
            .with_for_update(key_share=True)
        )
        held = await self.session.scalar(unscoped(query, "the runner holds the job's lease"))
        return held is not None

    async def heartbeat(
        self, job_id: uuid.UUID, done: int, total: int | None = None, *, token: int | None = None
    ) -> bool:
        """Record progress and that the worker lives; False once the job is no longer running
        (a user cancelled it, or the sweep gave it up) or, with `token`, once another claim
        took its lease. `total` replaces the planned count when a level's real count becomes
        known (duration levels)."""
        values: dict[str, Any] = {"progress_done": done, "heartbeat_at": utcnow()}
        if total is not None:
            values["progress_total"] = total
        where = [Job.id == job_id, Job.status == "running"]
        if token is not None:
            where.append(Job.lease_token == token)
        still_running = await self.session.scalar(
            update(Job).where(*where).values(**values).returning(Job.id)
        )
        return still_running is not None

    async def renew_lease(self, job_id: uuid.UUID, token: int) -> str | None:
        """Move the heartbeat of a job this runner holds; returns its status ('running', or
        'cancelled' by its user: the runner stores its last level, then stops), or None
        when the lease is lost (given up by the sweep, or claimed again)."""
        status: str | None = await self.session.scalar(
            update(Job)
            .where(
                Job.id == job_id,
                Job.lease_token == token,
                Job.status.in_(("running", "cancelled")),
            )
            .values(heartbeat_at=utcnow())
            .returning(Job.status)
        )
        return status

    async def resume(self, job_id: uuid.UUID, token: int) -> Job | None:
        """Take a running job whose worker died back up (interrupt() handed it over with
        `token`): its fencing token goes up by one, as a claim's does; None when it is no
        longer running or another runner took it (a duplicate delivery)."""
        job: Job | None = await self.session.scalar(
            update(Job)
            .where(Job.id == job_id, Job.status == "running", Job.lease_token == token)
            .values(heartbeat_at=utcnow(), lease_token=Job.lease_token + 1)
            .returning(Job)
        )
        return job

    async def interrupt(
        self,
        job_id: uuid.UUID,
        reason: str,
        *,
        stale_before: datetime | None = None,
        token: int | None = None,
    ) -> Interruption | None:
        """The worker running a job died (`reason` says how it is known). The first time, its
        level in progress is kept as 'interrupted' (never evidence) and the job is handed to
        another worker, which measures that level again (an outbox row with the new fencing
        token, sent first: infercost/jobs/outbox.py); the second time, or for a sweep (whose
        levels depend on each other), the job fails with the reason. With `stale_before`,
        only while its heartbeat is older (the maintenance sweep); with `token`, only while
        that runner still holds the job (a shard of its level died). None when the job no
        longer runs (or beat since, or moved on): another path got there first. The caller
        commits."""
        query = select(Job).where(Job.id == job_id, Job.status == "running")
        if stale_before is not None:
            query = query.where(Job.heartbeat_at < stale_before)
        if token is not None:
            query = query.where(Job.lease_token == token)
        reason_lock = "the worker's death is recorded on the job it ran, by id"
        job = await self.session.scalar(unscoped(query.with_for_update(), reason_lock))
        if job is None:
            return None
        now = utcnow()
        running_runs = [Run.job_id == job_id, Run.status == "running"]
        sweep = (job.load or {}).get("mode") == "sweep"
        if job.interruptions >= 1 or sweep:
            why = (
                "a sweep's levels follow from each other, so it is not measured again"
                if sweep
                else "its level was already measured again once after an earlier death"
            )
            error = (
                f"{reason}; {why}: levels already measured are kept, resubmit the job to "
                "measure the rest"
            )
            await self.session.execute(
                update(Job)
                .where(Job.id == job_id)
                .values(status="failed", finished_at=now, error=error)
            )
            await self.session.execute(
                update(Run)
                .where(*running_runs)
                # One failure, one reason: the run says what its job says.
                .values(status="failed", finished_at=now, live=None, error=error)
            )
            return Interruption(job_id, failed=True, token=job.lease_token)
        await self.session.execute(
            update(Run)
            .where(*running_runs)
            .values(
                status="interrupted",
                finished_at=now,
                error=f"{reason}; the level was measured again in another run (replaces_run_id)",
            )
        )
        token = job.lease_token + 1
        await self.session.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(
                interruptions=Job.interruptions + 1,
                lease_token=token,
                # No runner holds it until one takes it up (resume): waiting for a free
                # worker is not a second death, so the sweep leaves it alone, and the relay
                # sends it again if its message is lost (outbox.requeue_stale).
                heartbeat_at=None,
            )
        )
        outbox.add_task(
            self.session, RUN_JOB_TASK, outbox.job_args(job_id, "running", token), job_id
        )
        return Interruption(job_id, failed=False, token=token)

    async def interrupt_abandoned(self, silent_for: timedelta) -> list[Interruption]:
        """interrupt() each running job whose worker stopped sending heartbeats (its whole
        host lost, or a death Celery did not report), and fail every run still 'running'
        under a job that no longer runs and has been silent as long. Guarded: several sweeps
        at once handle each job once, and only the one that did returns it."""
        seconds = silent_for.total_seconds()
        cutoff = utcnow() - silent_for
        stale = select(Job.id).where(Job.status == "running", Job.heartbeat_at < cutoff)
        ids = list(
            await self.session.scalars(
                unscoped(stale.with_for_update(skip_locked=True), "every team's lost jobs")
            )
        )
        reason = f"the worker running this job stopped (no heartbeat for over {seconds:.0f} s)"
        done = []
        for job_id in ids:
            outcome = await self.interrupt(job_id, reason, stale_before=cutoff)
            if outcome is not None:
                done.append(outcome)
        await self.session.execute(
            update(Run)
            .where(
                Run.status == "running",
                Run.job_id == Job.id,
                Job.status != "running",
                func.coalesce(Job.heartbeat_at, Job.finished_at) < cutoff,
            )
            .values(
                status="failed",
                finished_at=utcnow(),
                live=None,
                # The job's own reason where it has one (it failed for this level), so the
                # run and the job never give two accounts of one failure.
                error=func.coalesce(
                    Job.error,
                    f"the worker measuring this level stopped (no heartbeat for over "
                    f"{seconds:.0f} s) before its samples were stored",
                ),
            )
        )
        return done

    async def fail_abandoned(self, silent_for: timedelta) -> list[uuid.UUID]:
        """interrupt_abandoned(), returning the jobs it failed."""
        return [o.job_id for o in await self.interrupt_abandoned(silent_for) if o.failed]

    async def measured_levels(
        self, job_id: uuid.UUID
    ) -> tuple[dict[int, Run], dict[int, uuid.UUID]]:
        """A job's runs as a resumed runner needs them: per level index, the run that is not
        interrupted (a level measured before the death), and the latest interrupted run
        (which the level's new run replaces)."""
        rows = await self.session.scalars(
            unscoped(
                select(Run).where(Run.job_id == job_id).order_by(Run.created_at),
                "the runner reads the runs of the job it holds",
            )
        )
        kept: dict[int, Run] = {}
        interrupted: dict[int, uuid.UUID] = {}
        for run in rows:
            if run.status == "interrupted":
                interrupted[run.level_index] = run.id
            else:
                kept[run.level_index] = run
        return kept, interrupted

    async def set_sweep(
        self,
        job_id: uuid.UUID,
        sweep: dict[str, Any],
        done: int | None = None,
        total: int | None = None,
    ) -> None:
        """Record a sweep's levels so far and how it stopped, whatever the job's status (a
        cancelled sweep says so too); with done and total, its progress as well."""
        values: dict[str, Any] = {"sweep": sweep}
        if done is not None and total is not None:
            values.update(progress_done=done, progress_total=total)
        await self.session.execute(update(Job).where(Job.id == job_id).values(**values))

    async def finish(
        self, job_id: uuid.UUID, status: str, error: str | None = None, *, token: int | None = None
    ) -> bool:
        """running -> succeeded|failed; False if the job was cancelled meanwhile or, with
        `token`, if that runner's lease was lost. A failed job's runs still 'running' (their
        level broke off where its own failure could not be written, say the database was
        away) fail with the job's reason: one failure, one reason, on the job and its run."""
        where = [Job.id == job_id, Job.status == "running"]
        if token is not None:
            where.append(Job.lease_token == token)
        result = await self.session.execute(
            update(Job).where(*where).values(status=status, error=error, finished_at=utcnow())
        )
        finished = bool(result.rowcount)  # type: ignore[attr-defined]
        if finished and status == "failed":
            await self.session.execute(
                update(Run)
                .where(Run.job_id == job_id, Run.status == "running")
                .values(status="failed", finished_at=utcnow(), live=None, error=error)
            )
        return finished

    # --- runs -----------------------------------------------------------------------------

    async def add_run(self, run: Run) -> Run:
        """Insert a run as it starts."""
        self.session.add(run)
        await self.session.flush()
        return run

    async def update_run(self, run_id: uuid.UUID, **values: Any) -> None:
        """Record a run's outcome and figures; with its `stats`, every percentile column is
        written from them in the same statement (infercost.figures.metrics.percentile_columns)."""
        if "stats" in values:
            values = {**values, **percentile_columns(values["stats"])}
        await self.session.execute(update(Run).where(Run.id == run_id).values(**values))
        if "models" in values:
            # Each model's row follows its block: written again whenever the block is.
            await self.session.execute(
                delete(RunModelFigures).where(RunModelFigures.run_id == run_id)
            )
            rows = model_columns(values["models"])
            if rows:
                await self.session.execute(
                    insert(RunModelFigures), [{"run_id": run_id, **row} for row in rows]
                )

    async def runs_of_jobs(self, team_id: uuid.UUID, job_ids: Sequence[uuid.UUID]) -> list[Run]:
        """The runs of several of the team's jobs, by job and level order: one a level, the
        run that stands (a run interrupted by its worker's death is left out; the run that
        measured its level again names it in replaces_run_id)."""
        if not job_ids:
            return []
        rows = await self.session.scalars(
            readable(Run, team_id)
            .where(Run.job_id.in_(job_ids), Run.status != "interrupted")
            .order_by(Run.job_id, Run.level_index)
        )
        return list(rows)

    async def get_run(self, team_id: uuid.UUID, run_id: uuid.UUID) -> Run | None:
        """The team's run."""
        return await self.session.scalar(readable(Run, team_id).where(Run.id == run_id))

    # --- samples --------------------------------------------------------------------------

    async def delete_samples(self, run_id: uuid.UUID) -> None:
        """Remove a run's samples, so storing its level again (a retry after a lost
        connection, when the first commit may have landed) leaves each row exactly once."""
        await self.session.execute(delete(RequestSample).where(RequestSample.run_id == run_id))

    async def copy_samples(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Bulk-write request samples with COPY (rows in SAMPLE_COLUMNS order)."""
        if not rows:
            return
        connection = await self.session.connection()
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None
        await driver.copy_records_to_table(
            RequestSample.__tablename__, records=rows, columns=SAMPLE_COLUMNS
        )

    async def samples_page(
        self, run_id: uuid.UUID, *, after_seq: int, limit: int, warmup: bool | None
    ) -> list[RequestSample]:
        """Samples of a run in seq order, after `after_seq` (keyset pagination)."""
        query = select(RequestSample).where(
            RequestSample.run_id == run_id, RequestSample.seq > after_seq
        )
        if warmup is not None:
            query = query.where(RequestSample.warmup.is_(warmup))
        rows = await self.session.scalars(query.order_by(RequestSample.seq).limit(limit))
        return list(rows)

    async def stream_samples(
        self, run_id: uuid.UUID, *, warmup: bool | None, batch: int = 2000
    ) -> AsyncIterator[RequestSample]:
        """Every sample of a run in seq order, fetched in batches (for CSV export)."""
        after = -1
        while True:
            page = await self.samples_page(run_id, after_seq=after, limit=batch, warmup=warmup)
            for sample in page:
                yield sample
            if len(page) < batch:
                return
            after = page[-1].seq
