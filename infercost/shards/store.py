"""Shards of a run: the worker processes that run one load level together (load.shards).

The worker running the job (the coordinator) inserts one row per shard, queues a
`benchmark.run_shard` task for each other shard and runs shard 0 itself. Each shard claims
its row with a guarded status change, prepares its requests, says it is ready, waits for
the agreed instant (`start_at`, written by the coordinator once every shard is ready),
runs, COPYs its samples and finishes its row. While it lives it sends a heartbeat with its
request count, so the coordinator can count progress and notice a shard that died.

Every shard write is fenced like the job's own (workers/lease.py): the coordinator's task
carries the fencing token of its lease on the job, and a shard's claim, heartbeat and finish
go through only while the job still holds that token (running, or cancelled by its user).
A shard of a runner that lost its job writes nothing and stops.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    ColumnElement,
    Float,
    ForeignKey,
    SmallInteger,
    String,
    Text,
    func,
    select,
    update,
)
from sqlalchemy import exists as sql_exists
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, utcnow
from infercost.db.scope import unscoped
from infercost.jobs.models import Job, RequestSample, Run

SHARD_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
#: Statuses a shard never leaves.
SHARD_DONE = ("succeeded", "failed", "cancelled")


class RunShard(Base):
    """One shard of a run: its state, the agreed and the actual start, and client health."""

    __tablename__ = "run_shards"
    __table_args__ = (CheckConstraint(f"status IN {SHARD_STATUSES}", name="status"),)

    run_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True
    )
    shard: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    # host:pid of the worker process that claimed it.
    worker: Mapped[str | None] = mapped_column(String(255))
    claimed_at: Mapped[datetime | None]
    # Prepared (prompts built and checked, connections open) and waiting for start_at.
    ready_at: Mapped[datetime | None]
    # The agreed instant every shard starts at; the clock origin of its samples.
    start_at: Mapped[datetime | None]
    # When this shard's load actually began (wall clock, microseconds), and how late that
    # was against start_at on this host's clock.
    started_at: Mapped[datetime | None]
    start_lag_ms: Mapped[float | None] = mapped_column(Float)
    heartbeat_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    requests_done: Mapped[int] = mapped_column(default=0)
    # CPU seconds per second of the shard's process while its load ran.
    cpu_util: Mapped[float | None] = mapped_column(Float)
    # The reading side's health of the shard's process over the level (the run's `client`
    # keys of workers/loadgen/health.py: lags, stalls, collections, pause exposure).
    reading: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    error: Mapped[str | None] = mapped_column(Text)


def lease_held(job_id: uuid.UUID, token: int) -> ColumnElement[bool]:
    """True while the job's lease still has fencing token `token` (running, or cancelled by
    its user and so still storing its last level): the guard of every shard write."""
    return sql_exists().where(
        Job.id == job_id,
        Job.lease_token == token,
        Job.status.in_(("running", "cancelled")),
    )


class ShardRepository:
    """Shard rows and a run's samples read back; callers commit. The coordinator's writes
    (add, set_start, stop) run after it checked its lease in the same transaction
    (JobRepository.hold_lease); a shard's own take its job and token."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, run_id: uuid.UUID, shards: int) -> None:
        """Insert the run's shard rows, all queued."""
        await self.session.execute(
            insert(RunShard).values([{"run_id": run_id, "shard": i} for i in range(shards)])
        )

    async def claim(
        self, run_id: uuid.UUID, shard: int, worker: str, *, job_id: uuid.UUID, token: int
    ) -> bool:
        """queued -> running, guarded, so a duplicate delivery finds nothing to claim (nor a
        shard of a runner that lost the job's lease)."""
        now = utcnow()
        claimed = await self.session.scalar(
            update(RunShard)
            .where(
                RunShard.run_id == run_id,
                RunShard.shard == shard,
                RunShard.status == "queued",
                lease_held(job_id, token),
            )
            .values(status="running", worker=worker, claimed_at=now, heartbeat_at=now)
            .returning(RunShard.shard)
        )
        return claimed is not None

    async def beat(
        self,
        run_id: uuid.UUID,
        shard: int,
        job_id: uuid.UUID,
        done: int,
        *,
        ready: bool,
        token: int,
    ) -> tuple[bool, datetime | None]:
        """Record that the shard lives, its requests so far, and (once) that it is ready.

        Returns whether it should go on (its row still running, its job still running and
        still under lease `token`) and the agreed start instant once the coordinator has
        set it.
        """
        values: dict[str, Any] = {"heartbeat_at": utcnow(), "requests_done": done}
        if ready:
            # The first moment it said so.
            values["ready_at"] = func.coalesce(RunShard.ready_at, func.now())
        row = (
            await self.session.execute(
                update(RunShard)
                .where(
                    RunShard.run_id == run_id,
                    RunShard.shard == shard,
                    RunShard.status == "running",
                    lease_held(job_id, token),
                )
                .values(**values)
                .returning(RunShard.start_at)
            )
        ).first()
        if row is None:
            return False, None
        status = select(Job.status).where(Job.id == job_id)
        reason = "a shard reads the status of the job whose lease its task carries"
        job_status = await self.session.scalar(unscoped(status, reason))
        return job_status == "running", row[0]

    async def finish(
        self,
        run_id: uuid.UUID,
        shard: int,
        status: str,
        *,
        job_id: uuid.UUID,
        token: int,
        **values: Any,
    ) -> bool:
        """running -> a final status with its figures; False if it was stopped meanwhile or
        the job's lease moved on (call JobRepository.hold_lease first in the transaction
        that also stores the shard's samples)."""
        result = await self.session.execute(
            update(RunShard)
            .where(
                RunShard.run_id == run_id,
                RunShard.shard == shard,
                RunShard.status == "running",
                lease_held(job_id, token),
            )
            .values(status=status, finished_at=utcnow(), heartbeat_at=utcnow(), **values)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def of_run(self, run_id: uuid.UUID) -> list[RunShard]:
        """The run's shards in order, read fresh."""
        rows = await self.session.scalars(
            select(RunShard)
            .where(RunShard.run_id == run_id)
            .order_by(RunShard.shard)
            .execution_options(populate_existing=True)
        )
        return list(rows)

    async def set_start(self, run_id: uuid.UUID, start_at: datetime) -> None:
        """Tell every shard of the run the instant to start at."""
        await self.session.execute(
            update(RunShard).where(RunShard.run_id == run_id).values(start_at=start_at)
        )

    async def stop(self, run_id: uuid.UUID, status: str, error: str) -> None:
        """Stop every shard not finished yet (a queued one will then never be claimed)."""
        await self.session.execute(
            update(RunShard)
            .where(RunShard.run_id == run_id, RunShard.status.in_(("queued", "running")))
            .values(status=status, error=error, finished_at=utcnow())
        )

    async def run_and_job(self, run_id: uuid.UUID) -> tuple[Run, Job] | None:
        """A shard's run and its job (None when either is gone)."""
        query = select(Run, Job).join(Job, Job.id == Run.job_id).where(Run.id == run_id)
        reason = "a shard loads the run and job its task names"
        row = (await self.session.execute(unscoped(query, reason))).first()
        return None if row is None else (row[0], row[1])

    async def samples(self, run_id: uuid.UUID) -> list[RequestSample]:
        """Every stored sample of the run, in seq order."""
        rows = await self.session.scalars(
            select(RequestSample).where(RequestSample.run_id == run_id).order_by(RequestSample.seq)
        )
        return list(rows)
