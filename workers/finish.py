"""What happens when a job ends: its final state, then what follows from it.

The job's status and its job.finished webhook event commit together (the outbox: an event
is announced exactly when what it reports is stored, and the maintenance process's courier
sends it, workers/webhooks.py). Then each run is judged against its baseline
(infercost.history), in a transaction of its own with its regression.detected event.
"""

from __future__ import annotations

import logging
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.retry import retry_transient
from infercost.history.changes import RunChange, record_changes
from infercost.jobs.repository import JobRepository
from infercost.webhooks.outbox import record_job_finished, record_regressions
from workers.runtime import Runtime

log = logging.getLogger("infercost.worker")


async def announce_finished(session: AsyncSession, job_id: uuid.UUID) -> None:
    """Record job.finished in the session's transaction, inside a savepoint: a problem
    with the webhooks is logged and never keeps the job's own status from committing."""
    try:
        async with session.begin_nested():
            await record_job_finished(session, job_id)
    except Exception:
        log.exception("could not record the job.finished webhooks of job %s", job_id)


async def record_run_changes(rt: Runtime, job_id: uuid.UUID) -> list[RunChange]:
    """Judge each succeeded run of the job against its baseline (infercost.history) in a
    transaction of its own, with a regression.detected webhook event when any regressed; a
    failure is logged and costs only the verdicts, never the job."""
    try:
        async with rt.sessionmaker() as session:
            changes = await record_changes(session, job_id)
            # Announced with the verdicts it reports: both commit, or neither.
            await record_regressions(session, job_id, changes)
            await session.commit()
    except Exception:
        log.exception("could not decide the changes of job %s's runs", job_id)
        return []
    return changes


async def finish_job(
    rt: Runtime, job_id: uuid.UUID, status: str, error: str | None, *, token: int | None = None
) -> None:
    """Record the job's final status and error with its job.finished event (unless a cancel
    got there first: the API announced that one, or the runner holding `token` lost the
    job), then judge its runs. A lost connection is retried (one transaction, guarded)."""

    async def finish() -> None:
        async with rt.sessionmaker() as session:
            if await JobRepository(session).finish(job_id, status, error, token=token):
                await announce_finished(session, job_id)
            await session.commit()

    await retry_transient(
        finish, budget_s=rt.settings.store_retry_s, what=f"finishing job {job_id}"
    )
    await record_run_changes(rt, job_id)
