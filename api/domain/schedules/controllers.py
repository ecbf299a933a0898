"""Schedule routes: POST, GET /v1/schedules; GET, PATCH, DELETE /v1/schedules/{id}; pause,
resume and the slot ledger."""

from __future__ import annotations

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody

from api.auth import AppSettings, CurrentCaller
from api.db import DbSession
from api.domain.audit.services import AuditTrail
from api.domain.jobs.controllers import provide_job_service
from api.domain.schedules.schemas import ScheduleCreate, ScheduleRead, ScheduleUpdate, SlotRead
from api.domain.schedules.services import ScheduleService
from api.schemas import Limit, Offset, Page, PathId


def provide_schedule_service(
    db_session: DbSession, caller: CurrentCaller, state: State, settings: AppSettings
) -> ScheduleService:
    """The service for the caller's team, with the job rules a template is checked by."""
    return ScheduleService(
        db_session,
        caller.team_id,
        provide_job_service(db_session, caller, state, settings),
        max_schedules=settings.max_schedules,
    )


class ScheduleController(Controller):
    """Benchmarks run on a cron or an interval by the maintenance process, with alerts."""

    path = "/v1/schedules"
    tags = ["schedules"]
    dependencies = {"schedules": Provide(provide_schedule_service, sync_to_thread=False)}

    @post("/", status_code=201, summary="Create a schedule")
    async def create_schedule(
        self,
        schedules: NamedDependency[ScheduleService],
        audit: NamedDependency[AuditTrail],
        data: JSONBody[ScheduleCreate],
    ) -> ScheduleRead:
        """`job` is a POST /v1/jobs body, checked the same way (422 as it would be); `when`
        is {"cron", "timezone"} or {"interval_s"}. Each slot submits one job, skipped while
        the previous one is still queued or running, or in the quiet hours."""
        read = await schedules.create(data)
        await audit.record(
            "schedule.create", "schedule", read.id, f"created schedule '{read.name or read.id}'"
        )
        return read

    @get("/", summary="List schedules")
    async def list_schedules(
        self, schedules: NamedDependency[ScheduleService], limit: Limit = 50, offset: Offset = 0
    ) -> Page[ScheduleRead]:
        """Your team's schedules, oldest first, each with its last and next run."""
        items, total = await schedules.page(limit, offset)
        return Page(items=items, total=total, limit=limit, offset=offset)

    @get("/{schedule_id:uuid}", summary="Read a schedule")
    async def get_schedule(
        self, schedules: NamedDependency[ScheduleService], schedule_id: PathId
    ) -> ScheduleRead:
        """One schedule: its template, timing, state (ok or degraded, with the evidence of
        the last change) and last and next run."""
        return await schedules.read(schedule_id)

    @patch("/{schedule_id:uuid}", summary="Change a schedule")
    async def update_schedule(
        self,
        schedules: NamedDependency[ScheduleService],
        audit: NamedDependency[AuditTrail],
        schedule_id: PathId,
        data: JSONBody[ScheduleUpdate],
    ) -> ScheduleRead:
        """Change the fields given; the next run is recomputed."""
        read = await schedules.update(schedule_id, data)
        changed = sorted(msgspec.to_builtins(data))
        await audit.record(
            "schedule.update",
            "schedule",
            schedule_id,
            f"changed schedule '{read.name or read.id}': {', '.join(changed) or 'nothing'}",
            {"fields": changed},
        )
        return read

    @delete("/{schedule_id:uuid}", summary="Delete a schedule")
    async def delete_schedule(
        self,
        schedules: NamedDependency[ScheduleService],
        audit: NamedDependency[AuditTrail],
        schedule_id: PathId,
    ) -> None:
        """Remove the schedule and its slot ledger (204); its jobs stay."""
        schedule = await schedules.get(schedule_id)
        await schedules.delete(schedule_id)
        await audit.record(
            "schedule.delete",
            "schedule",
            schedule_id,
            f"deleted schedule '{schedule.name or schedule_id}'",
        )

    @post("/{schedule_id:uuid}/pause", status_code=200, summary="Pause a schedule")
    async def pause_schedule(
        self,
        schedules: NamedDependency[ScheduleService],
        audit: NamedDependency[AuditTrail],
        schedule_id: PathId,
    ) -> ScheduleRead:
        """No slot runs until it is resumed (a job already submitted goes on)."""
        read = await schedules.set_enabled(schedule_id, False)
        await audit.record(
            "schedule.pause", "schedule", schedule_id, f"paused schedule '{read.name or read.id}'"
        )
        return read

    @post("/{schedule_id:uuid}/resume", status_code=200, summary="Resume a schedule")
    async def resume_schedule(
        self,
        schedules: NamedDependency[ScheduleService],
        audit: NamedDependency[AuditTrail],
        schedule_id: PathId,
    ) -> ScheduleRead:
        """Run again from the next slot; a schedule stopped after failures starts a fresh
        streak and its disabled_reason is cleared."""
        read = await schedules.set_enabled(schedule_id, True)
        await audit.record(
            "schedule.resume", "schedule", schedule_id, f"resumed schedule '{read.name or read.id}'"
        )
        return read

    @get("/{schedule_id:uuid}/runs", summary="A schedule's slots")
    async def list_slots(
        self,
        schedules: NamedDependency[ScheduleService],
        schedule_id: PathId,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[SlotRead]:
        """Each handled slot, newest first: submitted (with its job and the job's status),
        skipped, missed or refused, with the reason."""
        items, total = await schedules.slots(schedule_id, limit, offset)
        return Page(items=items, total=total, limit=limit, offset=offset)
