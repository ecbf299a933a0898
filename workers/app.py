"""The Celery app of the workers: `celery -A workers.app worker` (or `infercost worker`)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

from celery import signals

from infercost.jobs.repository import JobRepository
from infercost.queue import (
    DELIVER_WEBHOOK_TASK,
    RUN_JOB_TASK,
    RUN_SHARD_TASK,
    SWEEP_TASK,
    make_celery,
)
from infercost.settings import Settings
from infercost.webhooks.repository import WebhookRepository
from workers.runner import run_job, run_shard
from workers.runtime import Runtime
from workers.webhooks import announce_job_finished, deliver_once, send_deliveries

log = logging.getLogger("infercost.worker")
# httpx logs every request at INFO: far too much on the load generator's hot path.
logging.getLogger("httpx").setLevel(logging.WARNING)

settings = Settings.from_env()
app = make_celery(settings)

#: Set in each worker process when it starts; tasks run on its loop.
_runtime: Runtime | None = None

#: A queued job whose task never reached the broker is re-sent after this long.
STRANDED_AFTER = timedelta(seconds=30)
#: A running job whose worker sent no heartbeat for this long is failed (its worker died).
ABANDONED_AFTER = timedelta(seconds=120)
SWEEP_EVERY_S = 60.0
#: A pending webhook delivery this far past due lost its message; the sweep re-sends it.
DELIVERY_OVERDUE_AFTER = timedelta(seconds=120)


def runtime() -> Runtime:
    """This process's runtime, started on first use if the pool gave no process-init signal."""
    global _runtime  # noqa: PLW0603 - one runtime per process, made at process start
    if _runtime is None:
        _runtime = Runtime.start(settings)
    return _runtime


@signals.worker_process_init.connect
def _start_runtime(**_: Any) -> None:
    runtime()


@signals.worker_process_shutdown.connect
def _close_runtime(**_: Any) -> None:
    global _runtime  # noqa: PLW0603
    if _runtime is not None:
        _runtime.close()
        _runtime = None


@signals.worker_ready.connect
def _sweep_periodically(sender: Any = None, **_: Any) -> None:
    """Nudge a sweep now and every SWEEP_EVERY_S; stale nudges expire instead of piling up."""

    def nudge() -> None:
        while True:
            try:
                app.send_task(SWEEP_TASK, expires=SWEEP_EVERY_S)
            except Exception:  # noqa: BLE001 - the broker may be down; try again next round
                log.warning("could not queue the sweep; retrying in %s s", SWEEP_EVERY_S)
            time.sleep(SWEEP_EVERY_S)

    threading.Thread(target=nudge, name="infercost-sweep", daemon=True).start()


@app.task(name=RUN_JOB_TASK, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def run_job_task(job_id: str) -> None:
    """Run one benchmark job; its state and results go to Postgres."""
    rt = runtime()
    rt.loop.run_until_complete(run_job(rt, uuid.UUID(job_id)))


@app.task(name=RUN_SHARD_TASK, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def run_shard_task(job_id: str, run_id: str, shard: int, shards: int) -> None:
    """Run one shard of a sharded level (load.shards); its samples go to Postgres."""
    rt = runtime()
    rt.loop.run_until_complete(run_shard(rt, uuid.UUID(job_id), uuid.UUID(run_id), shard, shards))


@app.task(name=DELIVER_WEBHOOK_TASK, time_limit=60, soft_time_limit=50)
def deliver_webhook_task(delivery_id: str) -> None:
    """One attempt of a webhook delivery; a failed one schedules the next with backoff."""
    rt = runtime()
    retry_in_s = rt.loop.run_until_complete(deliver_once(rt, uuid.UUID(delivery_id)))
    if retry_in_s is None:
        return
    try:
        deliver_webhook_task.apply_async(args=[delivery_id], countdown=retry_in_s)
    except Exception as exc:  # noqa: BLE001 - the row says when it is due; the sweep re-sends
        log.warning(
            "broker did not take the retry of delivery %s (%s); the sweep will re-send it",
            delivery_id,
            type(exc).__name__,
        )


@app.task(name=SWEEP_TASK, time_limit=60)
def sweep() -> None:
    """Re-send jobs the API stored but could not hand to the broker, fail running jobs
    whose worker died, so no job waits forever, and re-send webhook deliveries whose
    message was lost."""
    rt = runtime()

    async def find() -> tuple[list[uuid.UUID], list[uuid.UUID], list[uuid.UUID]]:
        async with rt.sessionmaker() as session:
            repo = JobRepository(session)
            stranded = await repo.stranded_job_ids(STRANDED_AFTER)
            abandoned = await repo.fail_abandoned(ABANDONED_AFTER)
            await session.commit()
        for job_id in abandoned:
            await announce_job_finished(rt, job_id)
        async with rt.sessionmaker() as session:
            overdue = await WebhookRepository(session).requeue_overdue(DELIVERY_OVERDUE_AFTER)
            await session.commit()
        return stranded, abandoned, overdue

    stranded, abandoned, overdue = rt.loop.run_until_complete(find())
    for job_id in abandoned:
        log.warning("job %s lost its worker (no heartbeat); marked failed", job_id)
    if overdue:
        log.info("re-sending %d overdue webhook deliveries", len(overdue))
        send_deliveries(overdue)
    for job_id in stranded:
        log.info("re-sending stranded job %s", job_id)
        app.send_task(RUN_JOB_TASK, args=[str(job_id)])
