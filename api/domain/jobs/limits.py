"""Per-team caps on jobs: how many may wait or run at once.

A team at its cap of queued and running jobs can submit again once one ends: 409, with the
figure, the limit and the variable that raises it (README, "Security and operations"). What
one plan may ask for is a rule of the plan itself (infercost.jobs.rules.job_size).
"""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from infercost.errors import Conflict
from infercost.jobs.active import count_active_locked
from infercost.settings import Settings


class JobLimits:
    """The cap on one team's jobs queued or running (settings: INFERCOST_MAX_ACTIVE_JOBS)."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID, settings: Settings) -> None:
        self.session = session
        self.team_id = team_id
        self.settings = settings

    async def check_active(self) -> None:
        """409 when the team, counting a job just added in this transaction, has more jobs
        queued or running than it may. Submissions of one team are serialised here (a lock
        held until the transaction ends), so two at once cannot both slip under the cap."""
        active = await count_active_locked(self.session, self.team_id)
        cap = self.settings.max_active_jobs
        if active > cap:
            raise Conflict(
                f"your team already has {cap} jobs queued or running, this server's limit "
                f"(INFERCOST_MAX_ACTIVE_JOBS={cap}): wait for one to finish, or cancel one "
                "(POST /v1/jobs/{id}/cancel), then submit again",
                limit=cap,
            )
