"""Enqueueing tasks by name, after the transaction that created their rows has committed."""

from __future__ import annotations

import logging
import uuid
from functools import partial

import anyio
from celery import Celery
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.jobs.repository import JobRepository
from infercost.queue import RUN_JOB_TASK

log = logging.getLogger("infercost.api.queue")


class TaskQueue:
    """Sends `benchmark.run_job`; a job the broker did not take is re-sent by the worker's sweep."""

    def __init__(self, celery: Celery, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self.celery = celery
        self.sessionmaker = sessionmaker

    async def enqueue_job(self, job_id: uuid.UUID) -> None:
        """Nudge a worker; the job row, already committed, is the source of truth."""
        send = partial(self.celery.send_task, RUN_JOB_TASK, args=[str(job_id)])
        try:
            await anyio.to_thread.run_sync(send)
        except Exception as exc:  # noqa: BLE001 - any broker failure leaves the job for the sweep
            log.warning(
                "broker did not take job %s (%s); the sweep will retry", job_id, type(exc).__name__
            )
            return
        async with self.sessionmaker() as session:
            await JobRepository(session).mark_enqueued(job_id)
            await session.commit()
