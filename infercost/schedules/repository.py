"""Queries about a team's schedules and their slot ledger. Callers commit."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, delete, func, select, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import owned_by, readable
from infercost.jobs.models import Job
from infercost.schedules.models import Schedule, ScheduleRun


@dataclass(frozen=True, slots=True)
class SlotRow:
    """A ledger row with its job's status."""

    schedule_id: uuid.UUID
    slot_at: datetime
    outcome: str
    job_id: uuid.UUID | None
    job_status: str | None
    reason: str | None
    recorded_at: datetime


#: Ledger rows with their job's status (a statement is immutable: each use extends a copy);
#: `_slots_of` scopes it to a team.
SLOTS_QUERY = select(
    ScheduleRun.schedule_id,
    ScheduleRun.slot_at,
    ScheduleRun.outcome,
    ScheduleRun.job_id,
    Job.status,
    ScheduleRun.reason,
    ScheduleRun.created_at,
).outerjoin(Job, Job.id == ScheduleRun.job_id)


def _slots_of(team_id: uuid.UUID) -> Select[*tuple[Any, ...]]:
    """SLOTS_QUERY over the ledgers of the team's schedules only."""
    return SLOTS_QUERY.join(Schedule, Schedule.id == ScheduleRun.schedule_id).where(
        owned_by(Schedule, team_id)
    )


class ScheduleRepository:
    """Schedules of a team (reads scoped by team_id)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def disable_for_endpoint(
        self, team_id: uuid.UUID, endpoint_id: uuid.UUID, reason: str
    ) -> None:
        """Stop every schedule of an endpoint (it was deleted): no slot of it runs again."""
        await self.session.execute(
            update(Schedule)
            .where(owned_by(Schedule, team_id), Schedule.endpoint_id == endpoint_id)
            .values(enabled=False, next_slot_at=None, disabled_reason=reason)
        )

    async def add(self, schedule: Schedule) -> None:
        """Insert in the caller's transaction."""
        self.session.add(schedule)
        await self.session.flush()

    async def get(
        self, team_id: uuid.UUID, schedule_id: uuid.UUID, *, lock: bool = False
    ) -> Schedule | None:
        """The team's schedule; with `lock`, row-locked against a scheduler tick."""
        query = readable(Schedule, team_id).where(Schedule.id == schedule_id)
        if lock:
            query = query.with_for_update()
        schedule: Schedule | None = await self.session.scalar(
            query.execution_options(populate_existing=True)
        )
        return schedule

    async def delete(self, schedule: Schedule) -> None:
        """Remove it with its ledger (its jobs keep running, schedule_id set null)."""
        await self.session.execute(delete(Schedule).where(Schedule.id == schedule.id))

    async def page(
        self, team_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[Schedule], int]:
        """One page of the team's schedules, oldest first, and how many there are."""
        total = await self.session.scalar(
            select(func.count()).select_from(Schedule).where(owned_by(Schedule, team_id))
        )
        rows = await self.session.scalars(
            readable(Schedule, team_id)
            .order_by(Schedule.created_at, Schedule.id)
            .limit(limit)
            .offset(offset)
        )
        return list(rows), int(total or 0)

    async def last_slots(
        self, team_id: uuid.UUID, ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, SlotRow]:
        """The newest ledger row of each of the team's schedules, in one query."""
        if not ids:
            return {}
        rows = await self.session.execute(
            _slots_of(team_id)
            .where(ScheduleRun.schedule_id.in_(list(ids)))
            .ext(distinct_on(ScheduleRun.schedule_id))
            .order_by(ScheduleRun.schedule_id, ScheduleRun.slot_at.desc())
        )
        return {row[0]: SlotRow(*row) for row in rows}

    async def slots(
        self, team_id: uuid.UUID, schedule_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[SlotRow], int]:
        """The team's schedule's ledger, newest slot first, and how many rows it has."""
        total = await self.session.scalar(
            select(func.count())
            .select_from(ScheduleRun)
            .where(ScheduleRun.schedule_id == schedule_id)
        )
        rows = await self.session.execute(
            _slots_of(team_id)
            .where(ScheduleRun.schedule_id == schedule_id)
            .order_by(ScheduleRun.slot_at.desc())
            .limit(limit)
            .offset(offset)
        )
        return [SlotRow(*row) for row in rows], int(total or 0)
