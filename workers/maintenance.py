"""The maintenance process (`infercost maintenance`): every periodic duty, off the job queue.

Five loops on one event loop, each on Postgres, the source of truth:
- the outbox relay: hands tasks written beside their jobs (task_outbox) to the broker, about
  once a second, and writes a new one for any queued job no worker claimed within
  requeue_after_s (backing off), so a flushed or restarted broker delays jobs, never loses
  them;
- the sweep: every maintenance_every_s takes up a running job whose heartbeat stopped for
  abandoned_after_s (its worker's host was lost): the first time its level in progress is
  kept as interrupted and the job handed to another worker, the second time the job fails
  with the reason (announced with job.finished); any run left 'running' under a job that
  ended is failed with a reason;
- the webhook courier (workers/webhooks.py);
- the scheduler (infercost.schedules.scheduler): every maintenance_every_s submits the due
  slot of each schedule once (a row lock per schedule and a unique key per slot make
  replicas safe) and judges the scheduled jobs that ended (alerts, failure streaks);
- retention: with sample_retention_days set, every retention_every_s deletes the raw samples
  of runs finished longer ago than that, PRUNE_BATCH runs a transaction (summaries stay, each
  run marked samples_pruned_at; SKIP LOCKED keeps replicas apart).

Why a process of its own and not Celery beat: beat only sends messages, so its sweep would
wait in a queue behind benchmarks (a job of hours delays it by hours) unless every deployment
also ran a dedicated consumer; it depends on the very broker whose loss the relay must
survive; and two beats fire every schedule twice. Here nothing waits behind a benchmark,
the sweep works with the broker down, and replicas are safe by construction: outbox rows and
stale jobs are taken FOR UPDATE SKIP LOCKED, the sweep's updates are guarded (a job is failed
and announced by exactly one replica), and deliveries are row-locked. Run one or a few.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

import httpx
from celery import Celery
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

import infercost.db.models  # noqa: F401 - every mapper registered before the first query
from infercost.db.base import utcnow
from infercost.db.engine import engine_for, make_sessionmaker
from infercost.jobs import outbox
from infercost.jobs.repository import Interruption, JobRepository
from infercost.jobs.tasks import RUN_JOB_TASK
from infercost.net.tls import tls_context
from infercost.schedules.scheduler import tick as schedule_tick
from infercost.settings import Settings
from workers.broker import make_celery
from workers.finish import announce_finished
from workers.webhooks import SENDERS, run_courier

log = logging.getLogger("infercost.maintenance")

#: How often the relay looks for unsent outbox rows (the writer's own send after commit is
#: the fast path; this bounds the delay when that send failed).
RELAY_EVERY_S = 1.0
#: Rows younger than this are left to their writer, which sends them right after its commit
#: (a shard coordinator, the API): the relay is for sends that failed, not a race with them.
RELAY_GRACE_S = 2.0
#: Rows one relay round takes at most.
RELAY_BATCH = 100
#: Runs whose samples one retention transaction deletes (a run holds up to a million rows).
PRUNE_BATCH = 20


async def relay_once(sessionmaker: async_sessionmaker[AsyncSession], celery: Celery) -> int:
    """Publish up to RELAY_BATCH outbox rows; returns how many the broker took (a refusal
    leaves the rest for the next round)."""

    def send(row: outbox.Pending) -> None:
        celery.send_task(row.task, args=row.args, priority=row.priority)

    async with sessionmaker() as session:
        rows = await outbox.take(session, limit=RELAY_BATCH, older_than_s=RELAY_GRACE_S)
        try:
            done = await outbox.publish(session, rows, send)
        finally:
            await session.commit()
    return len(done)


async def requeue_once(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings
) -> list[str]:
    """Stage a new message for each queued job whose message may be gone."""
    async with sessionmaker() as session:
        ids = await outbox.requeue_stale(
            session, RUN_JOB_TASK, timedelta(seconds=settings.requeue_after_s)
        )
        await session.commit()
    return [str(i) for i in ids]


async def sweep_once(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings
) -> list[Interruption]:
    """Hand over (or, a second time, fail) the jobs whose worker stopped, announcing each
    one failed; their level in progress is kept as interrupted (or failed)."""
    async with sessionmaker() as session:
        lost = await JobRepository(session).interrupt_abandoned(
            timedelta(seconds=settings.abandoned_after_s)
        )
        for outcome in lost:
            if outcome.failed:
                await announce_finished(session, outcome.job_id)
        await session.commit()
    return lost


async def prune_once(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings
) -> list[str]:
    """Delete the raw samples of up to PRUNE_BATCH runs older than the retention; returns
    the runs pruned (none when retention is off)."""
    if settings.sample_retention_days <= 0:
        return []
    cutoff = utcnow() - timedelta(days=settings.sample_retention_days)
    async with sessionmaker() as session:
        pruned = await JobRepository(session).prune_samples(cutoff, limit=PRUNE_BATCH)
        await session.commit()
    return [str(i) for i in pruned]


async def _every(
    seconds: float, stopping: asyncio.Event, what: str, work: Callable[[], Awaitable[None]]
) -> None:
    """Run `work` every `seconds` until stopping; an error is logged (at most once a
    minute while it repeats, e.g. with the broker down) and the next round tries again."""
    last_logged = 0.0
    while not stopping.is_set():
        try:
            await work()
        except Exception as exc:  # noqa: BLE001 - a database or broker away; next round retries
            now = time.monotonic()
            if now - last_logged >= 60.0:
                log.warning("%s failed (%s: %s); trying again", what, type(exc).__name__, exc)
                last_logged = now
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stopping.wait(), seconds)


async def run(settings: Settings, stopping: asyncio.Event) -> None:
    """The loops until `stopping` is set."""
    # A connection per sender, the relay, the sweep, the scheduler and retention.
    engine = engine_for(settings, pool_size=SENDERS + 4)
    sessionmaker = make_sessionmaker(engine)
    celery = make_celery(settings)

    async def relay() -> None:
        while await relay_once(sessionmaker, celery) == RELAY_BATCH:
            pass  # a backlog: keep going without waiting a round

    async def schedule() -> None:
        for slot in await schedule_tick(sessionmaker, settings):
            log.info(
                "schedule %s slot %s: %s%s",
                slot.schedule_id,
                slot.slot_at.isoformat(),
                slot.outcome,
                f" (job {slot.job_id})" if slot.job_id else f" ({slot.reason})",
            )

    async def sweep() -> None:
        for lost in await sweep_once(sessionmaker, settings):
            log.warning(
                "job %s lost its worker (no heartbeat); %s",
                lost.job_id,
                "marked failed" if lost.failed else "its level is measured again",
            )
        for job_id in await requeue_once(sessionmaker, settings):
            log.info("job %s still queued: its task is sent again", job_id)

    async def retention() -> None:
        pruned = 0
        while batch := await prune_once(sessionmaker, settings):
            pruned += len(batch)
            if len(batch) < PRUNE_BATCH or stopping.is_set():
                break
        if pruned:
            log.info(
                "retention: raw samples of %d runs older than %g days deleted",
                pruned,
                settings.sample_retention_days,
            )

    log.info(
        "maintenance: relay every %g s, sweep every %g s (abandoned after %g s, re-sent after "
        "%g s), %d webhook senders, %s",
        RELAY_EVERY_S,
        settings.maintenance_every_s,
        settings.abandoned_after_s,
        settings.requeue_after_s,
        SENDERS,
        f"raw samples kept {settings.sample_retention_days:g} days"
        if settings.sample_retention_days > 0
        else "raw samples kept forever",
    )
    try:
        async with httpx.AsyncClient(follow_redirects=False, verify=tls_context()) as client:
            await asyncio.gather(
                _every(RELAY_EVERY_S, stopping, "outbox relay", relay),
                _every(settings.maintenance_every_s, stopping, "sweep", sweep),
                _every(settings.maintenance_every_s, stopping, "scheduler", schedule),
                _every(settings.retention_every_s, stopping, "retention", retention),
                run_courier(settings, sessionmaker, client, stopping),
            )
    finally:
        celery.close()
        await engine.dispose()


def main(settings: Settings) -> None:
    """Run until SIGTERM or SIGINT; work in flight finishes first."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)

    async def go() -> None:
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        await run(settings, stopping)

    asyncio.run(go())
    log.info("maintenance: stopped")
