"""The task outbox: a Celery task to send, written in the transaction that needs it sent.

A job and the message that starts it commit together, so a broker that is down or loses
its data can delay a job but never lose it: the API tries to publish right after its commit
(the fast path), and the maintenance relay (workers/maintenance.py) publishes whatever is
left two seconds later. Rows are taken FOR UPDATE SKIP LOCKED, so the API and any number of
relays never send the same row twice at once; a row is deleted in the transaction that
records the send.
Sending stays at least once (a commit can fail after the broker took the message): the
worker's claim is guarded, so a duplicate does nothing.

Fair share between teams: a job's message carries a broker priority, 1 + its place in its
own team's line (the team's jobs running, and queued ahead of it), capped at PRIORITY_LOWEST.
The broker hands out lower numbers first (kombu's Redis transport keeps one list per
priority, infercost.jobs.tasks.TRANSPORT_OPTIONS), so a team's first job waits only behind
the jobs running now and other teams' first jobs, never behind another team's backlog;
teams' second jobs come next, and so on: the teams' lines are served round-robin. Priority
0 goes first: a running job handed over after its worker died
(infercost.jobs.repository.JobRepository.interrupt) and the shard tasks of a running level.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    ForeignKey,
    Identity,
    SmallInteger,
    String,
    Table,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy import text as sql_text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base
from infercost.db.scope import unscoped
from infercost.jobs.models import Job
from infercost.jobs.tasks import PRIORITY_FIRST, PRIORITY_LOWEST

#: Re-publishing a queued job backs off: after requeue_after, then 2x, 4x, and at most
#: this many times requeue_after apart, so a job waiting hours behind others gathers a
#: handful of duplicate messages (each a no-op for the worker), not hundreds.
MAX_REQUEUE_FACTOR = 8


class TaskOutbox(Base):
    """One task to publish: its name and arguments, and the job it starts (if any)."""

    __tablename__ = "task_outbox"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    task: Mapped[str] = mapped_column(String(64))
    args: Mapped[list[Any]] = mapped_column(JSONB)
    job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


@dataclass(frozen=True, slots=True)
class Pending:
    """An outbox row taken for sending."""

    id: int
    task: str
    args: list[Any]
    job_id: uuid.UUID | None
    #: The broker priority to send it with (0 first): its job's place in its team's line.
    priority: int = 0


def team_priority(ahead: int | None) -> int:
    """The broker priority of a queued job with `ahead` jobs of its own team running or
    queued before it: 1 + its place in its team's line, the last steps shared; a running job
    (None: one handed over after its worker died) goes first."""
    if ahead is None:
        return PRIORITY_FIRST
    return PRIORITY_FIRST + 1 + max(0, min(ahead, PRIORITY_LOWEST - PRIORITY_FIRST - 1))


#: Per job, how many jobs of its own team run or wait ahead of it; null for a running job
#: (one handed over after its worker died: it goes first).
_AHEAD_IN_TEAM = sql_text(
    """
    SELECT j.id,
           CASE WHEN j.status = 'running' THEN NULL ELSE (
             SELECT count(*) FROM jobs o
             WHERE o.team_id = j.team_id
               AND (o.status = 'running'
                    OR (o.status = 'queued' AND (o.created_at, o.id) < (j.created_at, j.id)))
           ) END AS ahead
    FROM jobs j
    WHERE j.id = ANY(:ids)
    """
)


async def team_places(
    session: AsyncSession, job_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, int | None]:
    """Each job's place in its team's line (jobs of the team running or queued ahead);
    None for a running job."""
    if not job_ids:
        return {}
    reason = "a job's broker priority counts its own team's jobs ahead of it"
    rows = await session.execute(unscoped(_AHEAD_IN_TEAM, reason), {"ids": list(job_ids)})
    return {row.id: None if row.ahead is None else int(row.ahead) for row in rows}


def add_task(
    session: AsyncSession, task: str, args: list[Any], job_id: uuid.UUID | None
) -> TaskOutbox:
    """Write a task to send in the session's transaction (it is sent once that commits);
    the row has its id once the session flushes."""
    row = TaskOutbox(task=task, args=args, job_id=job_id)
    session.add(row)
    return row


async def take(
    session: AsyncSession,
    *,
    job_id: uuid.UUID | None = None,
    ids: Sequence[int] | None = None,
    limit: int = 100,
    older_than_s: float | None = None,
) -> list[Pending]:
    """Lock up to `limit` unsent rows (a job's, those of `ids`, or the oldest; with
    `older_than_s`, only rows written at least that long ago), skipping rows another sender
    holds; the caller publishes them, then calls sent() and commits."""
    query = select(TaskOutbox).order_by(TaskOutbox.id).limit(limit)
    if older_than_s is not None:
        query = query.where(TaskOutbox.created_at < func.now() - timedelta(seconds=older_than_s))
    if job_id is not None:
        query = query.where(TaskOutbox.job_id == job_id)
    if ids is not None:
        query = query.where(TaskOutbox.id.in_(ids))
    rows = list(await session.scalars(query.with_for_update(skip_locked=True)))
    places = await team_places(session, sorted({r.job_id for r in rows if r.job_id is not None}))
    return [
        Pending(
            r.id,
            r.task,
            list(r.args),
            r.job_id,
            team_priority(places.get(r.job_id)) if r.job_id is not None else PRIORITY_FIRST,
        )
        for r in rows
    ]


async def sent(session: AsyncSession, rows: Sequence[Pending]) -> None:
    """Forget published rows, and record on their jobs that the broker took them and at
    which priority (the best of its messages: a worker takes whichever comes first)."""
    if not rows:
        return
    await session.execute(delete(TaskOutbox).where(TaskOutbox.id.in_([r.id for r in rows])))
    jobs = cast(Table, Job.__table__)
    given = [{"b_id": r.job_id, "b_priority": r.priority} for r in rows if r.job_id is not None]
    if given:
        priority = bindparam("b_priority", type_=SmallInteger())
        await session.execute(
            update(jobs)
            .where(jobs.c.id == bindparam("b_id"))
            .values(
                enqueued_at=func.now(),
                enqueue_count=jobs.c.enqueue_count + 1,
                queue_priority=func.least(func.coalesce(jobs.c.queue_priority, priority), priority),
            ),
            given,
        )


async def publish(
    session: AsyncSession, rows: Sequence[Pending], send: Callable[[Pending], Any]
) -> list[Pending]:
    """Send each row with `send` (which raises when the broker refuses), in order, in one
    thread off the event loop (a broker may be slow to answer), and record the ones sent;
    stops at the first refusal, leaving the rest for the next round, and raises it once the
    sent ones are recorded (the caller commits either way)."""

    def send_all() -> tuple[list[Pending], Exception | None]:
        done: list[Pending] = []
        for row in rows:
            try:
                send(row)
            except Exception as exc:  # noqa: BLE001 - re-raised once the sent are recorded
                return done, exc
            done.append(row)
        return done, None

    done, refused = await asyncio.to_thread(send_all) if rows else ([], None)
    await sent(session, done)
    if refused is not None:
        raise refused
    return done


#: Queued jobs whose message may be gone: last handed to the broker (or created) longer ago
#: than requeue_after times a factor that doubles with each hand-over, with no unsent
#: outbox row; and running jobs handed over after their worker died (heartbeat cleared) that
#: no worker took up as long. Locked SKIP LOCKED, so two relays never re-publish the same
#: job at once.
_STALE_QUEUED = sql_text(
    """
    SELECT j.id, j.status, j.lease_token FROM jobs j
    WHERE (j.status = 'queued' OR (j.status = 'running' AND j.heartbeat_at IS NULL))
      AND coalesce(j.enqueued_at, j.created_at) < now() - make_interval(
            secs => :after_s * power(2, least(greatest(j.enqueue_count - 1, 0), :max_exp)))
      AND NOT EXISTS (SELECT 1 FROM task_outbox o WHERE o.job_id = j.id)
    ORDER BY j.created_at
    LIMIT :limit
    FOR UPDATE OF j SKIP LOCKED
    """
)


async def requeue_stale(
    session: AsyncSession, task: str, requeue_after: timedelta, *, limit: int = 100
) -> list[uuid.UUID]:
    """Write a new outbox row for each queued job that no worker claimed within the bound
    (its message may be gone: a flushed or restarted broker); returns their ids."""
    max_exp = MAX_REQUEUE_FACTOR.bit_length() - 1
    reason = "the relay re-sends the queued jobs of every team that no worker claimed"
    rows = (
        await session.execute(
            unscoped(_STALE_QUEUED, reason),
            {"after_s": requeue_after.total_seconds(), "max_exp": max_exp, "limit": limit},
        )
    ).all()
    if rows:
        await session.execute(
            insert(TaskOutbox),
            [{"task": task, "args": job_args(r.id, r.status, r.lease_token), "job_id": r.id}
             for r in rows],
        )  # fmt: skip
    return [r.id for r in rows]


def job_args(job_id: uuid.UUID, status: str, token: int) -> list[Any]:
    """The arguments of a job's `benchmark.run_job`: its id, and for a running job handed
    over after its worker died, the fencing token the hand-over gave it."""
    return [str(job_id)] if status == "queued" else [str(job_id), token]
