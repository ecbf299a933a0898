"""The task outbox: a Celery task to send, written in the transaction that needs it sent.

A job and the message that starts it commit together, so a broker that is down or loses
its data can delay a job but never lose it: the API tries to publish right after its commit
(the fast path), and the maintenance relay (workers/maintenance.py) publishes whatever is
left two seconds later. Rows are taken FOR UPDATE SKIP LOCKED, so the API and any number of
relays never send the same row twice at once; a row is deleted in the transaction that
records the send.
Sending stays at least once (a commit can fail after the broker took the message): the
worker's claim is guarded, so a duplicate does nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    ForeignKey,
    Identity,
    String,
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
    rows = await session.scalars(query.with_for_update(skip_locked=True))
    return [Pending(r.id, r.task, list(r.args), r.job_id) for r in rows]


async def sent(session: AsyncSession, rows: Sequence[Pending]) -> None:
    """Forget published rows, and record on their jobs that the broker took them."""
    if not rows:
        return
    await session.execute(delete(TaskOutbox).where(TaskOutbox.id.in_([r.id for r in rows])))
    job_ids = [r.job_id for r in rows if r.job_id is not None]
    if job_ids:
        await session.execute(
            update(Job)
            .where(Job.id.in_(job_ids))
            .values(enqueued_at=func.now(), enqueue_count=Job.enqueue_count + 1)
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
#: outbox row. Locked SKIP LOCKED, so two relays never re-publish the same job at once.
_STALE_QUEUED = sql_text(
    """
    SELECT j.id FROM jobs j
    WHERE j.status = 'queued'
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
    ids = list(
        await session.scalars(
            unscoped(_STALE_QUEUED, reason),
            {"after_s": requeue_after.total_seconds(), "max_exp": max_exp, "limit": limit},
        )
    )
    if ids:
        await session.execute(
            insert(TaskOutbox), [{"task": task, "args": [str(i)], "job_id": i} for i in ids]
        )
    return ids
