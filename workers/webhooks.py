"""The webhook courier: sends due deliveries from a thread of each worker's main process.

Deliveries must not queue behind benchmarks: a worker process runs one job at a time, for
hours if asked, so a Celery task waiting for it would be late by as much. The courier lives
beside the pool instead, in the process that supervises it (as the sweep's nudge does),
with its own event loop, database pool and HTTP client. A few sender loops each take the
delivery due the longest (row-locked, SKIP LOCKED: several workers share the outbox), make
one attempt, record it and take the next; with nothing due they look again after POLL_S.
A failed attempt is simply due again later (delivery.backoff_s), so retries need no
message either, and a worker that died mid-attempt leaves its delivery due for the next.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import httpx

from infercost.db.engine import make_engine, make_sessionmaker
from infercost.outbound import Policy
from infercost.security import Vault
from infercost.settings import Settings
from infercost.webhooks.delivery import Outcome, deliver_next

log = logging.getLogger("infercost.worker.webhooks")

#: Deliveries in flight at once per worker: a receiver slow to answer (up to the 10 s
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


class Courier:
    """The sender loops on a thread of their own; start() once, stop() at shutdown."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="infercost-courier", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        """Let attempts in flight finish (each is bounded by the receiver timeout)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        engine = make_engine(self.settings.require_database_url(), pool_size=SENDERS)
        sessionmaker = make_sessionmaker(engine)
        vault = Vault(self.settings.secret_keys)
        # Every attempt resolves the receiver and checks each address (infercost/outbound.py).
        policy = Policy.from_settings(self.settings)
        # Its own client, not the load generator's pool: a slow receiver must never hold a
        # connection a benchmark needs.
        async with httpx.AsyncClient(follow_redirects=False) as client:

            async def sender() -> None:
                while not self._stopping.is_set():
                    try:
                        async with sessionmaker() as session:
                            outcome = await deliver_next(
                                session,
                                vault,
                                client,
                                backoff_base_s=self.settings.webhook_backoff_s,
                                max_attempts=self.settings.webhook_max_attempts,
                                policy=policy,
                            )
                            await session.commit()
                    except Exception:
                        log.exception("webhook courier: could not make an attempt")
                        outcome = None
                    if outcome is None:
                        await asyncio.sleep(POLL_S)
                    else:
                        _log(outcome)

            await asyncio.gather(*(sender() for _ in range(SENDERS)))
        await engine.dispose()
