"""The Celery app configuration shared by the producer (api) and the consumer (workers).

The api only sends tasks by name; it never imports task code.
"""

from __future__ import annotations

from celery import Celery

from infercost.settings import Settings

RUN_JOB_TASK = "benchmark.run_job"
#: One shard of a sharded level: (job_id, run_id, shard), sent by the job's coordinator.
RUN_SHARD_TASK = "benchmark.run_shard"


def make_celery(settings: Settings) -> Celery:
    """A Celery app bound to the broker; creating it opens no connection."""
    app = Celery("infercost", broker=settings.redis_url, set_as_current=False)
    app.conf.update(
        task_default_queue=settings.queue,
        task_routes={
            "benchmark.*": {"queue": settings.queue},
        },
        task_acks_late=True,
        task_reject_on_worker_lost=False,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        # A job's state lives in Postgres; a lost message is re-published by the maintenance
        # relay, so the broker need not hold unacked messages longer than the longest job.
        broker_transport_options={"visibility_timeout": 6 * 3600},
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    return app
