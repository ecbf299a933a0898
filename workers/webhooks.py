"""The worker's side of webhooks: one delivery attempt per task, and announcing a job's end.

Task bodies live here; workers/app.py registers them (`webhooks.deliver`) and schedules
retries with the countdown these functions return.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

import httpx

from infercost.queue import DELIVER_WEBHOOK_TASK
from infercost.webhooks.delivery import deliver
from infercost.webhooks.outbox import record_job_finished
from workers.runtime import Runtime

log = logging.getLogger("infercost.worker.webhooks")


async def deliver_once(rt: Runtime, delivery_id: uuid.UUID) -> float | None:
    """One attempt of a delivery, committed; the seconds until the next attempt when one
    is due, else None (delivered, given up, or nothing to do)."""
    # A client per attempt, not the load generator's pool: a slow receiver must never hold
    # a connection slot that a benchmark needs, and webhooks are rare enough to afford it.
    async with httpx.AsyncClient(follow_redirects=False) as client, rt.sessionmaker() as session:
        outcome = await deliver(
            session,
            rt.vault,
            client,
            delivery_id,
            backoff_base_s=rt.settings.webhook_backoff_s,
            max_attempts=rt.settings.webhook_max_attempts,
        )
        await session.commit()
    if outcome is None:
        log.info("delivery %s is not due (done, duplicate or deleted); skipping", delivery_id)
        return None
    if outcome.status == "delivered":
        log.info("delivery %s delivered (HTTP %s)", delivery_id, outcome.response_status)
    elif outcome.retry_in_s is None:
        log.warning("delivery %s failed for good: %s", delivery_id, outcome.error)
    else:
        log.info(
            "delivery %s failed (%s); next attempt in %g s",
            delivery_id,
            outcome.error,
            outcome.retry_in_s,
        )
    return outcome.retry_in_s


def send_deliveries(delivery_ids: Sequence[uuid.UUID]) -> None:
    """Nudge a worker for each committed delivery; one the broker did not take stays
    pending and the sweep re-sends it."""
    # Imported here: workers.app imports the runner, which imports this module.
    from workers.app import app

    for delivery_id in delivery_ids:
        try:
            app.send_task(DELIVER_WEBHOOK_TASK, args=[str(delivery_id)])
        except Exception as exc:  # noqa: BLE001 - any broker failure is left for the sweep
            log.warning(
                "broker did not take delivery %s (%s); the sweep will retry",
                delivery_id,
                type(exc).__name__,
            )


async def announce_job_finished(rt: Runtime, job_id: uuid.UUID) -> None:
    """Record job.finished for a job whose final status is committed, and send it.

    Called after that commit and never raising: a webhook problem (a bad subscription, the
    database or broker hiccuping) must not fail or lose a job that already ran.
    """
    try:
        async with rt.sessionmaker() as session:
            ids = await record_job_finished(session, job_id)
            await session.commit()
        send_deliveries(ids)
    except Exception:  # the job's outcome is already stored; only log this
        log.exception("could not record job.finished webhooks for job %s", job_id)
