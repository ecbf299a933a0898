"""Enqueueing tasks by name: an outbox row in the job's transaction, a send after commit.

The row (infercost/jobs/outbox.py) is what makes the send durable; the send right after
the commit only makes it quick. When the broker refuses, the row stays and the maintenance
relay (workers/maintenance.py) sends it within a second or so of the broker's return.
The API's Celery app only sends by name; it never imports task code.
"""

from __future__ import annotations

import logging
import uuid

from celery import Celery
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.jobs import outbox
from infercost.jobs.tasks import RUN_JOB_TASK, TASK_PREFIX, TRANSPORT_OPTIONS
from infercost.settings import Settings

log = logging.getLogger("infercost.api.queue")


def make_celery(settings: Settings) -> Celery:
    """The API's Celery app, only for sending tasks by name to the workers' queue (the
    workers configure their own app in workers/broker.py); creating it opens no connection."""
    app = Celery("infercost", broker=settings.redis_url, set_as_current=False)
    app.conf.update(
        task_default_queue=settings.queue,
        task_routes={f"{TASK_PREFIX}*": {"queue": settings.queue}},
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        broker_transport_options=TRANSPORT_OPTIONS,
    )
    return app


class TaskQueue:
    """Stages `benchmark.run_job` in the job's transaction and sends it once committed."""

    def __init__(self, celery: Celery, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self.celery = celery
        self.sessionmaker = sessionmaker

    def stage_job(self, session: AsyncSession, job_id: uuid.UUID) -> None:
        """Write the job's task to the outbox in the session's (the job's) transaction."""
        outbox.add_task(session, RUN_JOB_TASK, [str(job_id)], job_id)

    async def enqueue_job(self, job_id: uuid.UUID) -> None:
        """Nudge a worker now: send the job's outbox row unless a relay holds it already."""

        def send(row: outbox.Pending) -> None:
            self.celery.send_task(row.task, args=row.args, priority=row.priority)

        try:
            async with self.sessionmaker() as session:
                rows = await outbox.take(session, job_id=job_id)
                try:
                    await outbox.publish(session, rows, send)
                finally:
                    await session.commit()
        except Exception as exc:  # noqa: BLE001 - any failure leaves the row for the relay
            log.warning(
                "broker did not take job %s (%s); the maintenance relay will send it",
                job_id,
                type(exc).__name__,
            )
