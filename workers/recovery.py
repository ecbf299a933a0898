"""A worker process's death, as Celery reports it: its job's level is measured again.

When a pool process dies mid-task (SIGKILL, out of memory), the worker's parent process
learns it at once (billiard sees the child exit; Celery fails the task with WorkerLostError
and sends task_failure there). workers/app.py hands that to interrupt_lost_job here: the
job's level in progress is kept as 'interrupted' and the job is handed, with a new fencing
token, to the next free worker process (the restarted one, or another worker's) at the
broker's first priority; a second death fails the job with the reason
(infercost.jobs.repository.JobRepository.interrupt). The parent waits for that (up to
HAND_OVER_WAIT_S) before it takes its next message, so the restarted pool process takes
the hand-over rather than the next queued job; a database that does not answer in time
delays the hand-over, never the worker. A whole host lost sends no such report: the
maintenance sweep's heartbeat bound covers it.

The process of a shard of a sharded level (load.shards) dying is the same loss: the job is
taken off its runner (the coordinator, whose fencing token the shard carried: it stops at
its next write) and handed over, and the whole level is measured again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid

import infercost.db.models  # noqa: F401 - every mapper registered before the first query
from infercost.db.engine import engine_for, make_sessionmaker
from infercost.jobs import outbox
from infercost.jobs.repository import Interruption, JobRepository
from infercost.settings import Settings
from workers.broker import make_celery
from workers.finish import announce_finished

log = logging.getLogger("infercost.worker")

#: How long the worker's parent waits for a hand-over to be recorded and sent before it
#: goes on consuming (it goes on recording meanwhile, on its own thread).
HAND_OVER_WAIT_S = 5.0


async def interrupt_lost_job(
    settings: Settings, job_id: uuid.UUID, reason: str, token: int | None = None
) -> Interruption | None:
    """Record the death on the job (one transaction, with its job.finished event when it
    fails), then send the hand-over at once (what the broker refuses, the relay sends).
    `token`: a shard's, so only the runner it served is taken off the job."""
    engine = engine_for(settings, pool_size=1)
    sessionmaker = make_sessionmaker(engine)
    try:
        async with sessionmaker() as session:
            outcome = await JobRepository(session).interrupt(job_id, reason, token=token)
            if outcome is not None and outcome.failed:
                await announce_finished(session, job_id)
            await session.commit()
        if outcome is not None and not outcome.failed:
            with make_celery(settings) as celery:

                def send(row: outbox.Pending) -> None:
                    celery.send_task(row.task, args=row.args, priority=row.priority)

                try:
                    async with sessionmaker() as session:
                        rows = await outbox.take(session, job_id=job_id)
                        try:
                            await outbox.publish(session, rows, send)
                        finally:
                            await session.commit()
                except Exception as exc:  # noqa: BLE001 - the row stays for the relay
                    log.warning(
                        "job %s: the broker did not take its hand-over (%s); the relay will",
                        job_id,
                        type(exc).__name__,
                    )
        return outcome
    finally:
        await engine.dispose()


def on_worker_lost(
    settings: Settings, job_id: uuid.UUID, reason: str, token: int | None = None
) -> threading.Thread:
    """interrupt_lost_job on a thread of its own, waited for up to HAND_OVER_WAIT_S (the
    parent must not take its next message before the hand-over is sent, nor hang on a
    database that is away); a failure is logged and left to the sweep's heartbeat bound."""

    def run() -> None:
        try:
            outcome = asyncio.run(interrupt_lost_job(settings, job_id, reason, token))
        except Exception:
            log.exception("job %s: its worker process died and this could not be recorded", job_id)
            return
        if outcome is None:
            log.info("job %s: its worker process died after the job ended", job_id)
        elif outcome.failed:
            log.warning("job %s: its worker process died a second time; job failed", job_id)
        else:
            log.warning("job %s: its worker process died; its level is measured again", job_id)

    thread = threading.Thread(target=run, name=f"worker-lost-{job_id}", daemon=True)
    thread.start()
    thread.join(HAND_OVER_WAIT_S)
    return thread
