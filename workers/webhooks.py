"""The webhook courier: sends due deliveries, from the maintenance process.

Deliveries must not queue behind benchmarks: a worker process runs one job at a time, for
hours if asked, so a Celery task waiting for it would be late by as much. The courier runs
in the maintenance process instead (workers/maintenance.py), on its event loop, with its own
database pool and HTTP client. A few sender loops each take the delivery due the longest
(row-locked, SKIP LOCKED: several maintenance replicas share the outbox), make one attempt,
record it and take the next; with nothing due they look again after POLL_S. A failed
attempt is simply due again later (delivery.backoff_s), so retries need no message either,
and a process that died mid-attempt leaves its delivery due for the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.net.outbound import Policy
from infercost.security import Vault
from infercost.settings import Settings
from infercost.webhooks.delivery import Outcome, deliver_next

log = logging.getLogger("infercost.maintenance.webhooks")

#: Deliveries in flight at once per process: a receiver slow to answer (up to the 10 s
#: timeout) holds up one sender, not the others.
SENDERS = 4
#: How long an idle sender waits before looking for due deliveries again.
POLL_S = 1.0


def _log(outcome: Outcome) -> None:
    if outcome.status == "delivered":
        log.info("delivery %s delivered (HTTP %s)", outcome.delivery_id, outcome.response_status)
    elif outcome.retry_in_s is None:
        log.warning("delivery %s failed for good: %s", outcome.delivery_id, outcome.error)
    else:
        log.info(
            "delivery %s failed (%s); next attempt in %g s",
            outcome.delivery_id,
            outcome.error,
            outcome.retry_in_s,
        )


async def run_courier(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    client: httpx.AsyncClient,
    stopping: asyncio.Event,
) -> None:
    """SENDERS sender loops until `stopping` is set; attempts in flight finish first (each
    is bounded by the receiver timeout). `client` is the courier's own: a slow receiver
    never holds a connection anything else needs."""
    vault = Vault(settings.secret_keys)
    # Every attempt resolves the receiver and checks each address (infercost/net/outbound.py).
    policy = Policy.from_settings(settings)

    async def sender() -> None:
        while not stopping.is_set():
            try:
                async with sessionmaker() as session:
                    outcome = await deliver_next(
                        session,
                        vault,
                        client,
                        backoff_base_s=settings.webhook_backoff_s,
                        max_attempts=settings.webhook_max_attempts,
                        policy=policy,
                    )
                    await session.commit()
            except Exception:
                log.exception("webhook courier: could not make an attempt")
                outcome = None
            if outcome is None:
                # Wake early when asked to stop, so shutdown does not wait a poll out.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), POLL_S)
            else:
                _log(outcome)

    await asyncio.gather(*(sender() for _ in range(SENDERS)))
