"""The Celery app of the workers: `celery -A workers.app worker` (or `infercost worker`)."""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from celery import signals

from infercost.jobs.repository import JobRepository
from infercost.queue import RUN_JOB_TASK, SWEEP_TASK, make_celery
from infercost.settings import Settings
from workers.runner import run_job
from workers.runtime import Runtime

log = logging.getLogger("infercost.worker")
# httpx logs every request at INFO: far too much on the load generator's hot path.
logging.getLogger("httpx").setLevel(logging.WARNING)

settings = Settings.from_env()
app = make_celery(settings)

#: Set in each worker process when it starts; tasks run on its loop.
_runtime: Runtime | None = None

#: A queued job whose task never reached the broker is re-sent after this long.
STRANDED_AFTER = timedelta(seconds=30)


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
def _sweep_on_start(sender: Any = None, **_: Any) -> None:
    app.send_task(SWEEP_TASK)


@app.task(name=RUN_JOB_TASK, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def run_job_task(job_id: str) -> None:
    """Run one benchmark job; its state and results go to Postgres."""
    rt = runtime()
    rt.loop.run_until_complete(run_job(rt, uuid.UUID(job_id)))


@app.task(name=SWEEP_TASK, time_limit=60)
def sweep_stranded() -> int:
    """Re-send jobs the API stored but could not hand to the broker."""
    rt = runtime()

    async def sweep() -> list[uuid.UUID]:
        async with rt.sessionmaker() as session:
            return await JobRepository(session).stranded_job_ids(STRANDED_AFTER)

    stranded = rt.loop.run_until_complete(sweep())
    for job_id in stranded:
        log.info("re-sending stranded job %s", job_id)
        app.send_task(RUN_JOB_TASK, args=[str(job_id)])
    return len(stranded)
