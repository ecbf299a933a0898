"""Per-team caps on jobs: how much one plan may ask for, and how many may wait or run.

A plan over a cap can never run as sent: 422 on `load`. A team at its cap of queued and
running jobs can submit again once one ends: 409. Each message gives the figure, the limit
and the variable that raises it (README, "Security and operations").
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.plans.schemas import Load
from infercost.errors import Conflict, InvalidInput
from infercost.jobs.active import count_active_locked
from infercost.jobs.arrivals import DEFAULT_REQUESTS_PER_LEVEL
from infercost.jobs.sweep import DEFAULT_RATE_LEVELS, DEFAULT_SWEEP_DURATION_S
from infercost.settings import Settings


@dataclass(frozen=True, slots=True)
class PlanSize:
    """What a load plan asks for, as far as it can be known before it runs: requests and
    seconds over every level, warm-up and cool-down included. `uncounted` levels are left
    out of `seconds` (concurrency levels of a request count: how long they take depends on
    the server) or of `requests` (levels of a duration at concurrency: how many depends on
    it too)."""

    requests: int
    seconds: float
    uncounted: int


def plan_size(load: Load) -> PlanSize:
    """The size of a plan as submitted (before its defaults are stored)."""
    per_level = load.requests_per_level or DEFAULT_REQUESTS_PER_LEVEL
    warmup_s = load.warmup_s or 0.0
    if load.mode == "sweep":
        count = 2 + (load.rate_levels or DEFAULT_RATE_LEVELS)
        if load.duration_s is None and load.requests_per_level is not None:
            return PlanSize(count * (per_level + load.warmup_requests), 0.0, count)
        # A sweep with neither runs DEFAULT_SWEEP_DURATION_S per level (stored so).
        seconds = load.duration_s or DEFAULT_SWEEP_DURATION_S
        return PlanSize(0, count * (seconds + warmup_s + load.cooldown_s), count)
    requests = 0.0
    seconds = 0.0
    uncounted = 0
    for level in load.levels or []:
        seconds += load.cooldown_s
        if load.mode == "burst":
            # That many requests at once: how long they take depends on the server.
            requests += level
            uncounted += 1
        elif load.mode == "rate":
            if load.duration_s is not None:
                requests += level * (load.duration_s + warmup_s)
                seconds += load.duration_s + warmup_s
            else:
                requests += per_level + load.warmup_requests + level * warmup_s
                seconds += (per_level + load.warmup_requests) / level + warmup_s
        elif load.duration_s is not None:
            seconds += load.duration_s + warmup_s
            uncounted += 1
        else:
            requests += per_level + load.warmup_requests
            uncounted += 1
    return PlanSize(round(requests), seconds, uncounted)


class JobLimits:
    """The caps of one team's job submissions (settings: INFERCOST_MAX_*)."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID, settings: Settings) -> None:
        self.session = session
        self.team_id = team_id
        self.settings = settings

    def check_plan(self, load: Load) -> None:
        """422 on `load` when the plan sends more requests or runs longer than one job may."""
        size = plan_size(load)
        cap = self.settings.max_requests_per_job
        if size.requests > cap:
            raise InvalidInput(
                "load",
                f"this plan sends about {size.requests:,} requests (warm-up included), over "
                f"this server's limit of {cap:,} per job (INFERCOST_MAX_REQUESTS_PER_JOB): "
                "use fewer levels or fewer requests per level",
            )
        limit_s = self.settings.max_job_duration_s
        if size.seconds > limit_s:
            note = (
                f" ({size.uncounted} concurrency levels of a request count not included: "
                "their duration depends on the server)"
                if size.uncounted and load.mode == "concurrency"
                else ""
            )
            raise InvalidInput(
                "load",
                f"this plan runs for about {size.seconds / 3600:,.1f} h ({size.seconds:,.0f} s, "
                f"warm-up and cool-down included){note}, over this server's limit of "
                f"{limit_s / 3600:g} h per job (INFERCOST_MAX_JOB_DURATION_S={limit_s:g}): "
                "shorten the levels, raise the rates or split the job",
            )

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
