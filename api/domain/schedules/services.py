"""Schedule rules for one team: a template checked as a job is, valid times, the catalogue."""

from __future__ import annotations

import uuid
from datetime import datetime, time
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.jobs.schemas import JobCreate
from api.domain.jobs.services import JobService
from api.domain.schedules.schemas import (
    QuietHours,
    ScheduleCreate,
    ScheduleRead,
    ScheduleUpdate,
    SlotRead,
    Thresholds,
    When,
)
from infercost.db.base import utcnow
from infercost.errors import InvalidInput, NotFound
from infercost.schedules.alerts import SLO_COLUMNS
from infercost.schedules.models import Schedule
from infercost.schedules.repository import ScheduleRepository, SlotRow
from infercost.schedules.scheduler import first_due
from infercost.schedules.slots import check_cron, check_timezone
from infercost.teams.caps import check_room


def _clock(value: str) -> time:
    hours, minutes = value.split(":")
    return time(int(hours), int(minutes))


def _check_when(when: When, jitter_s: int) -> None:
    if (when.cron is None) == (when.interval_s is None):
        raise InvalidInput("when", "give either cron (with timezone) or interval_s, not both")
    problem = check_timezone(when.timezone)
    if problem:
        raise InvalidInput("when.timezone", problem)
    if when.cron is not None and (problem := check_cron(when.cron)):
        raise InvalidInput("when.cron", problem)
    if when.interval_s is not None and jitter_s >= when.interval_s:
        raise InvalidInput("jitter_s", f"must be shorter than the interval ({when.interval_s} s)")


def _check_thresholds(thresholds: Thresholds | None) -> dict[str, Any] | None:
    """The thresholds as stored; an SLO statistic no run column holds is refused."""
    if thresholds is None:
        return None
    stored: dict[str, Any] = msgspec.to_builtins(thresholds)
    for metric, stats in (stored.get("slo") or {}).items():
        for stat in stats:
            if (metric, stat) not in SLO_COLUMNS:
                raise InvalidInput(
                    f"thresholds.slo.{metric}.{stat}",
                    "thresholds watch p50 and p95 of ttft_ms, tpot_ms, itl_ms and e2e_ms",
                )
    return stored


class ScheduleService:
    """The caller's team's schedules."""

    def __init__(
        self, session: AsyncSession, team_id: uuid.UUID, jobs: JobService, *, max_schedules: int
    ) -> None:
        self.max_schedules = max_schedules
        self.session = session
        self.team_id = team_id
        self.repo = ScheduleRepository(session)
        self.jobs = jobs

    async def _template(self, data: JobCreate) -> dict[str, Any]:
        """The job each slot submits, checked and resolved exactly as POST /v1/jobs does
        (the preset, the plan's rules and caps, the endpoint, the dataset), so a slot never
        submits a job the API would have refused."""
        planned = await self.jobs.plan(data, preflight=False, field_prefix="job.")
        return {
            "request": msgspec.to_builtins(data),
            # Without a seed unless the job named one: each slot's job draws its own.
            **planned.plan.encode(seed=planned.seed_given),
            "dataset_id": None if planned.dataset_id is None else str(planned.dataset_id),
            "workload_fingerprint": planned.workload_fingerprint,
            "progress_total": planned.progress_total,
        }

    def _apply_when(self, schedule: Schedule, when: When, jitter_s: int) -> None:
        _check_when(when, jitter_s)
        schedule.cron, schedule.timezone, schedule.interval_s = (
            when.cron, when.timezone, when.interval_s
        )  # fmt: skip
        schedule.jitter_s = jitter_s

    @staticmethod
    def _apply_quiet(schedule: Schedule, quiet: QuietHours | None) -> None:
        schedule.quiet_start = None if quiet is None else _clock(quiet.start)
        schedule.quiet_end = None if quiet is None else _clock(quiet.end)

    @staticmethod
    def _reschedule(schedule: Schedule, now: datetime) -> None:
        """Count slots from now on: after a pause or a new timing, the slots before now are
        neither run nor recorded as missed (they were not the scheduler's to run)."""
        after = max(now, schedule.last_slot_at) if schedule.last_slot_at else now
        schedule.last_slot_at = after
        schedule.next_slot_at = first_due(schedule, after) if schedule.enabled else None

    async def create(self, data: ScheduleCreate) -> ScheduleRead:
        """Store a schedule; its first slot is the first one after now."""
        await check_room(
            self.session,
            Schedule,
            self.team_id,
            cap=self.max_schedules,
            variable="INFERCOST_MAX_SCHEDULES",
            noun="schedules",
            delete="DELETE /v1/schedules/{id}",
        )
        template = await self._template(data.job)
        now = utcnow()
        schedule = Schedule(
            id=uuid.uuid4(),
            team_id=self.team_id,
            endpoint_id=data.job.endpoint_id,
            name=data.name,
            template=template,
            enabled=data.enabled,
            thresholds=_check_thresholds(data.thresholds),
            max_consecutive_failures=data.max_consecutive_failures,
            consecutive_failures=0,
            created_at=now,
        )
        self._apply_when(schedule, data.when, data.jitter_s)
        self._apply_quiet(schedule, data.quiet_hours)
        self._reschedule(schedule, now)
        await self.repo.add(schedule)
        return await self.read(schedule.id)

    async def get(self, schedule_id: uuid.UUID) -> Schedule:
        """The team's schedule, or 404."""
        schedule = await self.repo.get(self.team_id, schedule_id, lock=True)
        if schedule is None:
            raise NotFound(f"no schedule {schedule_id} in your team: GET /v1/schedules")
        return schedule

    async def update(self, schedule_id: uuid.UUID, data: ScheduleUpdate) -> ScheduleRead:
        """Change the given fields. Only a change of timing moves the next slot: a new time
        rule, a pause or a resume counts slots from now; a new jitter keeps the slot that is
        due and moves only when it runs; any other change leaves the slots as they were."""
        schedule = await self.get(schedule_id)
        rule_before = (schedule.cron, schedule.timezone, schedule.interval_s)
        jitter_before, enabled_before = schedule.jitter_s, schedule.enabled
        if data.job is not msgspec.UNSET:
            schedule.template = await self._template(data.job)
            schedule.endpoint_id = data.job.endpoint_id
        when = data.when if data.when is not msgspec.UNSET else self._when(schedule)
        jitter = data.jitter_s if data.jitter_s is not msgspec.UNSET else schedule.jitter_s
        self._apply_when(schedule, when, jitter)
        if data.name is not msgspec.UNSET:
            schedule.name = data.name
        if data.quiet_hours is not msgspec.UNSET:
            self._apply_quiet(schedule, data.quiet_hours)
        if data.thresholds is not msgspec.UNSET:
            schedule.thresholds = _check_thresholds(data.thresholds)
        if data.max_consecutive_failures is not msgspec.UNSET:
            schedule.max_consecutive_failures = data.max_consecutive_failures
        if data.enabled is not msgspec.UNSET:
            self._set_enabled(schedule, data.enabled)
        schedule.updated_at = utcnow()
        rule = (schedule.cron, schedule.timezone, schedule.interval_s)
        if rule != rule_before or schedule.enabled != enabled_before:
            self._reschedule(schedule, schedule.updated_at)
        elif schedule.jitter_s != jitter_before and schedule.enabled:
            schedule.next_slot_at = first_due(
                schedule, schedule.last_slot_at or schedule.created_at
            )
        return await self.read(schedule.id)

    @staticmethod
    def _set_enabled(schedule: Schedule, enabled: bool) -> None:
        if enabled and not schedule.enabled:
            # A resume starts a fresh failure streak and forgets why it was stopped.
            schedule.consecutive_failures = 0
            schedule.disabled_reason = None
        schedule.enabled = enabled

    async def set_enabled(self, schedule_id: uuid.UUID, enabled: bool) -> ScheduleRead:
        """Pause or resume; a resumed schedule runs from the next slot after now (the slots
        it was paused through are not made up)."""
        schedule = await self.get(schedule_id)
        self._set_enabled(schedule, enabled)
        schedule.updated_at = utcnow()
        self._reschedule(schedule, schedule.updated_at)
        return await self.read(schedule.id)

    async def delete(self, schedule_id: uuid.UUID) -> None:
        """Remove the schedule and its slot ledger; its jobs stay (schedule_id set null)."""
        schedule = await self.get(schedule_id)
        await self.repo.delete(schedule)

    async def read(self, schedule_id: uuid.UUID) -> ScheduleRead:
        """One schedule with its last slot."""
        schedule = await self.repo.get(self.team_id, schedule_id)
        if schedule is None:
            raise NotFound(f"no schedule {schedule_id} in your team: GET /v1/schedules")
        last = await self.repo.last_slots(self.team_id, [schedule.id])
        return self._read(schedule, last.get(schedule.id))

    async def page(self, limit: int, offset: int) -> tuple[list[ScheduleRead], int]:
        """The catalogue: each schedule with its last and next run, in two queries."""
        rows, total = await self.repo.page(self.team_id, limit=limit, offset=offset)
        last = await self.repo.last_slots(self.team_id, [s.id for s in rows])
        return [self._read(s, last.get(s.id)) for s in rows], total

    async def slots(
        self, schedule_id: uuid.UUID, limit: int, offset: int
    ) -> tuple[list[SlotRead], int]:
        """The schedule's slot ledger, newest first (404 for another team's schedule)."""
        if await self.repo.get(self.team_id, schedule_id) is None:
            raise NotFound(f"no schedule {schedule_id} in your team: GET /v1/schedules")
        rows, total = await self.repo.slots(self.team_id, schedule_id, limit=limit, offset=offset)
        return [_slot(r) for r in rows], total

    @staticmethod
    def _when(schedule: Schedule) -> When:
        return When(cron=schedule.cron, timezone=schedule.timezone, interval_s=schedule.interval_s)

    def _read(self, schedule: Schedule, last: SlotRow | None) -> ScheduleRead:
        quiet = (
            None
            if schedule.quiet_start is None or schedule.quiet_end is None
            else QuietHours(
                start=schedule.quiet_start.strftime("%H:%M"),
                end=schedule.quiet_end.strftime("%H:%M"),
            )
        )
        return ScheduleRead(
            id=schedule.id,
            name=schedule.name,
            endpoint_id=schedule.endpoint_id,
            job=schedule.template["request"],
            when=self._when(schedule),
            jitter_s=schedule.jitter_s,
            enabled=schedule.enabled,
            disabled_reason=schedule.disabled_reason,
            quiet_hours=quiet,
            thresholds=schedule.thresholds,
            max_consecutive_failures=schedule.max_consecutive_failures,
            consecutive_failures=schedule.consecutive_failures,
            state=schedule.state,
            state_since=schedule.state_since,
            state_evidence=schedule.state_evidence,
            last_run=None if last is None else _slot(last),
            next_run_at=schedule.next_slot_at,
            created_at=schedule.created_at,
            updated_at=schedule.updated_at,
        )


def _slot(row: SlotRow) -> SlotRead:
    return SlotRead(
        slot_at=row.slot_at,
        outcome=row.outcome,
        job_id=row.job_id,
        job_status=row.job_status,
        reason=row.reason,
        recorded_at=row.recorded_at,
    )
