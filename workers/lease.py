"""A runner's lease on its job: fenced writes, a heartbeat of its own, retried stores.

Claiming a job increments its fencing token (jobs.lease_token); the runner keeps the token
it got and every transaction it writes starts by checking it (JobRepository.hold_lease),
under a row lock, so a runner that lost its job (the sweep gave it up after its heartbeat
stopped, or a later claim took it) writes nothing more and stops. The heartbeat runs for
the whole job, not only while a level sends requests, so preparing prompts or storing a
large level never looks like a dead worker.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.db.retry import is_transient, retry_transient
from infercost.jobs.repository import JobRepository
from infercost.settings import Settings

log = logging.getLogger("infercost.worker")

T = TypeVar("T")


class LeaseLost(Exception):
    """The job is no longer this runner's: the sweep gave it up, or another claim took it."""


class LevelNotStored(Exception):
    """A measured level could not be stored within the retry budget; says so in words."""


def heartbeat_every_s(settings: Settings) -> float:
    """How often the lease is renewed: several times within the abandonment bound."""
    return min(10.0, max(0.5, settings.abandoned_after_s / 6))


@dataclass(frozen=True, slots=True)
class Lease:
    """The job this runner claimed and the fencing token its claim got."""

    job_id: uuid.UUID
    token: int

    async def hold(self, session: AsyncSession) -> None:
        """Check the lease first in a write transaction (and lock the job row until it ends);
        raise LeaseLost when it is gone."""
        if not await JobRepository(session).hold_lease(self.job_id, self.token):
            raise LeaseLost(f"job {self.job_id}: lease {self.token} is no longer held")

    async def keep(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        every_s: float,
        on_lost: Callable[[], None],
    ) -> None:
        """Renew the lease every `every_s` until cancelled; call on_lost once it is refused.
        A database that does not answer is waited out: the sweep's bound decides."""
        while True:
            await asyncio.sleep(every_s)
            try:
                async with sessionmaker() as session:
                    status = await JobRepository(session).renew_lease(self.job_id, self.token)
                    await session.commit()
            except Exception as exc:
                if is_transient(exc):
                    log.warning("job %s: heartbeat lost its database connection", self.job_id)
                else:
                    log.exception("job %s: heartbeat failed", self.job_id)
                continue
            if status is None:
                log.warning("job %s: lease %d lost; stopping its runner", self.job_id, self.token)
                on_lost()
                return


async def stored(work: Callable[[], Awaitable[T]], *, settings: Settings, what: str) -> T:
    """Run a runner's write transaction, retrying it through lost connections for up to
    settings.store_retry_s; past that, LevelNotStored says what was lost and why."""
    try:
        return await retry_transient(work, budget_s=settings.store_retry_s, what=what)
    except LeaseLost:
        raise
    except Exception as exc:
        if not is_transient(exc):
            raise
        raise LevelNotStored(
            f"{what}: the database could not be reached for {settings.store_retry_s:.0f} s "
            f"({type(exc).__name__}); the level's measurements were lost"
        ) from exc
