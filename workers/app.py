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
from infercost.queue import RUN_JOB_TASK, RUN_SHARD_TASK, SWEEP_TASK, make_celery
from infercost.settings import Settings
from workers.finish import announce_finished
from workers.runner import run_job, run_shard
from workers.runtime import Runtime
from workers.webhooks import Courier

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


#: The webhook courier of this worker, in its main process (not in the pool's processes,
#: which run benchmarks one at a time): started when the worker is ready.
_courier: Courier | None = None


@signals.worker_ready.connect
def _start_courier(sender: Any = None, **_: Any) -> None:
    global _courier  # noqa: PLW0603 - one courier per worker
    _courier = Courier(settings)
    _courier.start()


@signals.worker_shutdown.connect
def _stop_courier(**_: Any) -> None:
    if _courier is not None:
        _courier.stop()


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


@app.task(name=SWEEP_TASK, time_limit=60)
def sweep() -> None:
    """Re-send jobs the API stored but could not hand to the broker, and fail running jobs
    whose worker died (announcing each to webhooks in the same transaction), so no job
    waits forever."""
    rt = runtime()

    async def find() -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        async with rt.sessionmaker() as session:
            repo = JobRepository(session)
            stranded = await repo.stranded_job_ids(STRANDED_AFTER)
            abandoned = await repo.fail_abandoned(ABANDONED_AFTER)
            for job_id in abandoned:
                await announce_finished(session, job_id)
            await session.commit()
            return stranded, abandoned

    stranded, abandoned = rt.loop.run_until_complete(find())
    for job_id in abandoned:
        log.warning("job %s lost its worker (no heartbeat); marked failed", job_id)
    for job_id in stranded:
        log.info("re-sending stranded job %s", job_id)
        app.send_task(RUN_JOB_TASK, args=[str(job_id)])
