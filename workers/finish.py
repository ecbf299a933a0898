"""What happens when a job ends: its final state, then what follows from it.

The job's status is written first, in its own transaction, so nothing later can lose it;
then each run's change against its baseline (infercost.history), then the job.finished
webhooks are recorded and sent (workers/webhooks.py).
"""

from __future__ import annotations

import logging
import uuid

from infercost.history.changes import RunChange, record_changes
from infercost.jobs.repository import JobRepository
from infercost.webhooks.outbox import record_regressions
from workers.runtime import Runtime
from workers.webhooks import announce_job_finished, send_deliveries

history_log = logging.getLogger("infercost.worker.history")


async def record_run_changes(rt: Runtime, job_id: uuid.UUID) -> list[RunChange]:
    """Judge each succeeded run of the job against its baseline (infercost.history) in a
    transaction of its own, with a regression.detected webhook event when any regressed; a
    failure is logged and costs only the verdicts, never the job."""
    try:
        async with rt.sessionmaker() as session:
            changes = await record_changes(session, job_id)
            # Announced with the verdicts it reports: both commit, or neither.
            deliveries = await record_regressions(session, job_id, changes)
            await session.commit()
    except Exception:  # noqa: BLE001 - the job's outcome is already stored; only log this
        history_log.exception("could not decide the changes of job %s's runs", job_id)
        return []
    send_deliveries(deliveries)
    return changes


async def finish_job(rt: Runtime, job_id: uuid.UUID, status: str, error: str | None) -> None:
    """Record the job's final status and error, then announce it to the team's webhooks
    (unless a cancel got there first: the API announced that one)."""
    async with rt.sessionmaker() as session:
        finished = await JobRepository(session).finish(job_id, status, error)
        await session.commit()
    await record_run_changes(rt, job_id)
    if finished:
        await announce_job_finished(rt, job_id)
