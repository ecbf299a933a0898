"""How many jobs a team has queued or running, counted under the team's submission lock.

POST /v1/jobs (api/domain/jobs/limits.py) and the scheduler (infercost/schedules/scheduler.py)
both submit jobs against INFERCOST_MAX_ACTIVE_JOBS; each counts here, holding the same lock
until its transaction ends, so two submissions at once cannot both slip under the cap.
"""

from __future__ import annotations

import uuid
from typing import Final

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import owned_by, unscoped
from infercost.jobs.models import Job

#: The statuses that count against the cap.
ACTIVE: Final = ("queued", "running")


def lock_key(team_id: uuid.UUID) -> str:
    """The advisory lock's key: one per team, shared by every submitter."""
    return f"infercost.jobs.active:{team_id}"


async def count_active_locked(session: AsyncSession, team_id: uuid.UUID) -> int:
    """Take the team's submission lock (held until this transaction ends) and count its
    queued and running jobs, one added earlier in this transaction included."""
    lock = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
    await session.execute(
        unscoped(lock, "an advisory lock named after the team: it reads no table"),
        {"key": lock_key(team_id)},
    )
    active = await session.scalar(
        select(func.count()).select_from(Job).where(owned_by(Job, team_id), Job.status.in_(ACTIVE))
    )
    return int(active or 0)
