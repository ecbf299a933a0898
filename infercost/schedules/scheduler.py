"""The scheduler: one tick submits each due slot's job, exactly once, and judges ended jobs.

Run by the maintenance process (workers/maintenance.py) every few seconds, on Postgres:
- each due schedule is taken FOR UPDATE SKIP LOCKED and re-checked, in a transaction of its
  own, so two replicas never handle the same schedule at once, and the one that comes
  second finds the slot already handled;
- the slot's ledger row (schedule_runs) is unique per (schedule, slot), and the job's
  idempotency key is derived from both, so even a replica with a stale view cannot submit
  a slot twice;
- `last_slot_at` is stored with the slot, so a restarted scheduler carries on from it:
  the newest due slot runs, the older ones are recorded as missed.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.db.base import utcnow
from infercost.endpoints.models import Endpoint
from infercost.endpoints.preflight import refuse_if_failed
from infercost.errors import Conflict
from infercost.jobs import outbox
from infercost.jobs.active import ACTIVE, count_active_locked
from infercost.jobs.models import Job, Run
from infercost.jobs.plan import seeded
from infercost.jobs.tasks import RUN_JOB_TASK
from infercost.schedules.alerts import judge, verdicts_settled
from infercost.schedules.models import Schedule, ScheduleRun
from infercost.schedules.slots import Timing, due_at, due_slots, in_quiet_hours, next_slot
from infercost.settings import Settings

#: Schedules one tick takes at most (the rest wait for the next tick).
TICK_BATCH = 100
UNFINISHED = ACTIVE
MISSED = "the scheduler was not running at this slot; only the newest due slot ran"


@dataclass(frozen=True, slots=True)
class SlotOutcome:
    """What a tick did with one slot."""

    schedule_id: uuid.UUID
    slot_at: datetime
    outcome: str
    job_id: uuid.UUID | None = None
    reason: str | None = None


def timing(schedule: Schedule) -> Timing:
    """The schedule's slot rules, for infercost.schedules.slots."""
    return Timing(
        id=schedule.id,
        cron=schedule.cron,
        timezone=schedule.timezone,
        interval_s=schedule.interval_s,
        jitter_s=schedule.jitter_s,
        quiet_start=schedule.quiet_start,
        quiet_end=schedule.quiet_end,
    )


def first_due(schedule: Schedule, after: datetime) -> datetime:
    """When the first slot after `after` is due (jitter included): next_slot_at's value."""
    rules = timing(schedule)
    return due_at(rules, next_slot(rules, after))


def job_values(schedule: Schedule, slot: datetime) -> dict[str, Any]:
    """The job row a slot submits: the stored template, a fresh seed unless the template
    fixed one (identical prompts would let a prefix cache answer), and a key per slot."""
    template = schedule.template
    return {
        "team_id": schedule.team_id,
        "endpoint_id": schedule.endpoint_id,
        "status": "queued",
        # The plan as the API resolved and stored it (infercost/jobs/plan.py).
        "workload": seeded(template["workload"], secrets.randbits(32)),
        "load": template["load"],
        "slo": template["slo"],
        "idempotency_key": f"schedule:{schedule.id}:{slot.isoformat()}",
        "dataset_id": None if template["dataset_id"] is None else uuid.UUID(template["dataset_id"]),
        "workload_fingerprint": template.get("workload_fingerprint"),
        "progress_total": template["progress_total"],
        "schedule_id": schedule.id,
    }


async def _over_cap(session: AsyncSession, team_id: uuid.UUID, settings: Settings) -> str | None:
    """Why the team may not have one more job queued (INFERCOST_MAX_ACTIVE_JOBS), or None.
    Counted as POST /v1/jobs counts (infercost/jobs/active.py), under the same lock."""
    cap = settings.max_active_jobs
    if await count_active_locked(session, team_id) >= cap:
        return f"the team already has {cap} jobs queued or running (INFERCOST_MAX_ACTIVE_JOBS)"
    return None


async def _failed_check(session: AsyncSession, schedule: Schedule) -> str | None:
    """Why the slot's job is refused because its endpoint failed its last preflight check
    (as POST /v1/jobs refuses it), or None: the check passed, never ran, or the template
    sends `"force": true`."""
    request = schedule.template.get("request") or {}
    if request.get("force"):
        return None
    endpoint = await session.scalar(
        select(Endpoint).where(
            Endpoint.id == schedule.endpoint_id,
            Endpoint.team_id == schedule.team_id,
            Endpoint.deleted_at.is_(None),
        )
    )
    if endpoint is None:
        return "the endpoint was deleted"
    try:
        refuse_if_failed(endpoint.id, endpoint.name, endpoint.check, endpoint.checked_at)
    except Conflict as refused:
        return refused.detail
    return None


async def _claim(
    session: AsyncSession, schedule: Schedule, slot: datetime, outcome: str, reason: str | None
) -> uuid.UUID | None:
    """Write the slot's ledger row; None when the slot was handled already."""
    row_id: uuid.UUID | None = await session.scalar(
        insert(ScheduleRun)
        .values(
            id=uuid.uuid4(), schedule_id=schedule.id, slot_at=slot, outcome=outcome, reason=reason
        )
        .on_conflict_do_nothing(index_elements=[ScheduleRun.schedule_id, ScheduleRun.slot_at])
        .returning(ScheduleRun.id)
    )
    return row_id


async def _judge_last(
    session: AsyncSession, schedule: Schedule, now: datetime, *, wait: bool
) -> None:
    """Judge the schedule's last job if it ended and was not judged yet; with `wait`, only
    once its regression verdicts are in (or overdue)."""
    if schedule.last_job_id is None or schedule.judged_job_id == schedule.last_job_id:
        return
    job = await session.get(Job, schedule.last_job_id, populate_existing=True)
    if job is None or job.status in UNFINISHED:
        return
    if wait:
        runs = list(
            await session.scalars(
                select(Run).where(Run.job_id == job.id, Run.status == "succeeded")
            )
        )
        if not verdicts_settled(job, runs, now):
            return
    await judge(session, schedule, job, now)


async def handle(
    session: AsyncSession, schedule: Schedule, now: datetime, settings: Settings
) -> list[SlotOutcome]:
    """Handle the schedule's due slots (the caller holds its row lock and commits): the
    newest one is submitted, skipped or refused, the older ones are recorded as missed."""
    # A job that ended since the last tick counts before the next is decided (its failure
    # may stop the schedule; its outcome is never left unjudged behind a newer job).
    await _judge_last(session, schedule, now, wait=False)
    if not schedule.enabled:
        schedule.next_slot_at = None
        return []
    slots = due_slots(timing(schedule), schedule.last_slot_at or schedule.created_at, now)
    done: list[SlotOutcome] = []
    if not slots:
        schedule.next_slot_at = first_due(schedule, schedule.last_slot_at or schedule.created_at)
        return done
    *missed, slot = slots
    for old in missed:
        if await _claim(session, schedule, old, "missed", MISSED) is not None:
            done.append(SlotOutcome(schedule.id, old, "missed", reason=MISSED))
    outcome: str = "submitted"
    reason: str | None = None
    previous = (
        None if schedule.last_job_id is None else await session.get(Job, schedule.last_job_id)
    )
    if in_quiet_hours(timing(schedule), slot):
        outcome, reason = "skipped", "in the schedule's quiet hours"
    elif previous is not None and previous.status in UNFINISHED:
        outcome = "skipped"
        reason = f"the previous job {previous.id} is still {previous.status}"
    elif (failed := await _failed_check(session, schedule)) is not None:
        outcome, reason = "refused", failed
    elif (cap := await _over_cap(session, schedule.team_id, settings)) is not None:
        outcome, reason = "refused", cap
    row_id = await _claim(session, schedule, slot, outcome, reason)
    schedule.last_slot_at = slot
    schedule.next_slot_at = first_due(schedule, slot)
    if row_id is None:
        return done  # handled already (by another replica that saw the same slot)
    job_id = None
    if outcome == "submitted":
        job_id = await session.scalar(
            insert(Job)
            .values(id=uuid.uuid4(), **job_values(schedule, slot))
            .on_conflict_do_nothing(index_elements=[Job.team_id, Job.idempotency_key])
            .returning(Job.id)
        )
        if job_id is not None:
            # The task's outbox row commits with the job; the relay hands it to the broker.
            outbox.add_task(session, RUN_JOB_TASK, [str(job_id)], job_id)
            schedule.last_job_id = job_id
            row = await session.get(ScheduleRun, row_id)
            assert row is not None
            row.job_id = job_id
    done.append(SlotOutcome(schedule.id, slot, outcome, job_id, reason))
    return done


async def tick(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings, now: datetime | None = None
) -> list[SlotOutcome]:
    """One round: the last job of every schedule (paused ones too: a job that ran is judged
    whatever became of its schedule) that ended and was not judged yet is judged, once its
    verdicts are in; then every due enabled schedule is handled. Each in a transaction of its
    own. `now` is injectable for tests."""
    now = now or utcnow()
    async with sessionmaker() as session:
        due = list(
            await session.scalars(
                select(Schedule.id)
                .where(Schedule.enabled, Schedule.next_slot_at <= now)
                .order_by(Schedule.next_slot_at)
                .limit(TICK_BATCH)
            )
        )
        pending = list(
            await session.scalars(
                select(Schedule.id)
                .join(Job, Job.id == Schedule.last_job_id)
                .where(
                    Schedule.judged_job_id.is_distinct_from(Schedule.last_job_id),
                    Job.status.not_in(UNFINISHED),
                )
                .limit(TICK_BATCH)
            )
        )
    done: list[SlotOutcome] = []
    for schedule_id in pending:
        async with sessionmaker() as session:
            schedule = await _locked(session, schedule_id)
            if schedule is not None:
                await _judge_last(session, schedule, now, wait=True)
                await session.commit()
    for schedule_id in due:
        async with sessionmaker() as session:
            schedule = await _locked(session, schedule_id)
            # Re-checked under the lock: a replica that got here first moved next_slot_at.
            if schedule is None or not schedule.enabled or schedule.next_slot_at is None:
                continue
            if schedule.next_slot_at > now:
                continue
            done.extend(await handle(session, schedule, now, settings))
            await session.commit()
    return done


async def _locked(session: AsyncSession, schedule_id: uuid.UUID) -> Schedule | None:
    """The schedule, row-locked for this transaction; None when another replica holds it."""
    schedule: Schedule | None = await session.scalar(
        select(Schedule)
        .where(Schedule.id == schedule_id)
        .with_for_update(skip_locked=True)
        .execution_options(populate_existing=True)
    )
    return schedule
