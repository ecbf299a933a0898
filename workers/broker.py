"""The workers' Celery app configuration (the worker, the maintenance relay and a job's
shard coordinator send or consume with it); the API sends with its own (api/queue.py)."""

from __future__ import annotations

from celery import Celery

from infercost.jobs.tasks import TASK_PREFIX, TRANSPORT_OPTIONS
from infercost.settings import Settings


def make_celery(settings: Settings) -> Celery:
    """A Celery app bound to the broker; creating it opens no connection."""
    app = Celery("infercost", broker=settings.redis_url, set_as_current=False)
    app.conf.update(
        task_default_queue=settings.queue,
        task_routes={f"{TASK_PREFIX}*": {"queue": settings.queue}},
        task_acks_late=True,
        task_reject_on_worker_lost=False,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        broker_transport_options=TRANSPORT_OPTIONS,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    return app
