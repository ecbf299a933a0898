"""The Celery app of the workers: `celery -A workers.app worker` (or `infercost worker`).

Workers only run benchmarks. Periodic work (the outbox relay, the sweep for abandoned and
stranded jobs, webhook delivery) lives in the maintenance process (workers/maintenance.py),
never in a worker's parent and never queued behind hours-long jobs.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from celery import signals
from celery.exceptions import WorkerLostError

from infercost.jobs.tasks import RUN_JOB_TASK, RUN_SHARD_TASK
from infercost.net.redact import install_log_redaction
from infercost.settings import Settings
from workers.broker import make_celery
from workers.recovery import on_worker_lost
from workers.runner import run_job, run_shard
from workers.runtime import Runtime

log = logging.getLogger("infercost.worker")
# httpx logs every request at INFO: far too much on the load generator's hot path.
logging.getLogger("httpx").setLevel(logging.WARNING)

settings = Settings.from_env()
app = make_celery(settings)

#: Set in each worker process when it starts; tasks run on its loop.
_runtime: Runtime | None = None


def runtime() -> Runtime:
    """This process's runtime, started on first use if the pool gave no process-init signal."""
    global _runtime  # noqa: PLW0603 - one runtime per process, made at process start
    if _runtime is None:
        _runtime = Runtime.start(settings)
    return _runtime


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _redact_logs(logger: logging.Logger, **_: Any) -> None:
    # No credential in any log line of a worker (infercost/net/redact.py).
    install_log_redaction(logger)
    install_log_redaction()


@signals.worker_process_init.connect
def _start_runtime(**_: Any) -> None:
    runtime()


@signals.worker_process_shutdown.connect
def _close_runtime(**_: Any) -> None:
    global _runtime  # noqa: PLW0603
    if _runtime is not None:
        _runtime.close()
        _runtime = None


@signals.task_failure.connect
def _pool_process_lost(
    sender: Any = None, exception: BaseException | None = None, args: Any = None, **_: Any
) -> None:
    """In the worker's parent: the pool process running a job, or a shard of its level,
    died (WorkerLostError, known the moment it exits), so the level is measured again
    (workers/recovery.py)."""
    name = getattr(sender, "name", None)
    if not isinstance(exception, WorkerLostError) or name not in (RUN_JOB_TASK, RUN_SHARD_TASK):
        return
    try:
        job_id = uuid.UUID(str(args[0]))
        # A shard task: (job_id, run_id, shard, count, token); a shard sent without its
        # coordinator's token is left to the coordinator's own bound.
        token = None if name == RUN_JOB_TASK else int(args[4])
    except (TypeError, ValueError, IndexError):
        return
    what = "this job" if name == RUN_JOB_TASK else f"shard {args[2]} of its level"
    reason = f"the worker process running {what} died ({exception})"
    on_worker_lost(settings, job_id, reason, token)


@app.task(name=RUN_JOB_TASK, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def run_job_task(job_id: str, resume_token: int | None = None) -> None:
    """Run one benchmark job; its state and results go to Postgres. With `resume_token`,
    take up a job whose worker died (workers/recovery.py) and measure what it had left."""
    rt = runtime()
    rt.loop.run_until_complete(run_job(rt, uuid.UUID(job_id), resume_token=resume_token))


@app.task(name=RUN_SHARD_TASK, time_limit=6 * 3600, soft_time_limit=6 * 3600 - 60)
def run_shard_task(
    job_id: str, run_id: str, shard: int, shards: int, token: int | None = None
) -> None:
    """Run one shard of a sharded level (load.shards); its samples go to Postgres. `token`:
    the fencing token of the coordinator's lease, which every write of the shard checks."""
    rt = runtime()
    rt.loop.run_until_complete(
        run_shard(rt, uuid.UUID(job_id), uuid.UUID(run_id), shard, shards, token=token)
    )
