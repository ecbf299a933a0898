"""Where a job stands in the queue and when it should start and end.

Jobs wait on one benchmark queue shared by every team and run one at a time per worker, in
the order the broker serves them: by priority, then in the order sent. A job's priority is
its place in its own team's line (infercost/jobs/outbox.py: its team's jobs running or queued
ahead of it, capped at 9), so the teams' lines are served round-robin. A queued job's start
is when a worker frees up for it: each running job ends after its remaining time, then each
job queued ahead of it takes the first free worker for its planned time. The number of
workers is taken to be the number of jobs running now (at least one): the API cannot see
idle workers, so with idle ones the estimate errs late, never early.

A job's planned time comes from its plan where the plan fixes it (a rate level's requests /
rate, a level's duration_s, warm-up and cool-down), and otherwise from its endpoint's pace:
a concurrency level of a request count at level c takes about
requests x seconds-per-request / c, where seconds-per-request is the mean concurrency over
requests/s (Little's law) of the endpoint's latest succeeded run, of the same workload when
there is one. A running job's remaining time follows its own progress once it has done
enough requests to say (its elapsed time x requests left / requests done).

Every estimate says what it rests on (`basis`); where a job ahead has no estimate, neither
has any job behind it.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from api.domain.jobs.schemas import QueueEstimate
from infercost.jobs.models import Job
from infercost.jobs.outbox import team_priority
from infercost.jobs.plan import LoadPlan, read_load
from infercost.jobs.repository import JobRepository

#: A running job's own pace is trusted from this many finished requests on.
MIN_DONE_FOR_PACE = 10


@dataclass(frozen=True, slots=True)
class Pace:
    """How long one request takes on an endpoint, from a run of it."""

    seconds_per_request: float
    same_workload: bool


@dataclass(frozen=True, slots=True)
class ActiveJob:
    """A queued or running job as the estimate needs it."""

    id: uuid.UUID
    status: str
    load: Mapping[str, Any]
    created_at: datetime
    started_at: datetime | None
    done: int
    total: int
    pace: Pace | None
    #: The broker priority of its message (0 first): its place in its team's line.
    priority: int = 0


def planned_seconds(load: Mapping[str, Any], pace: Pace | None) -> float | None:
    """Seconds the whole plan should take, or None when neither the plan nor a pace says."""
    plan = read_load(load)
    if plan is None:
        return None
    try:
        size = plan.size()
    except (ValueError, ArithmeticError):  # a plan no version of the API stored
        return None
    if plan.mode == "sweep":
        # A sweep of request counts runs levels whose rates only the sweep chooses.
        return None if plan.duration_s is None else size.seconds
    if plan.mode in ("rate", "trace") or plan.duration_s is not None:
        # A rate level's or a replay's schedule fixes its length.
        return size.seconds + _waits_for_cap(plan, pace)
    if pace is None:
        return None
    served = 0.0
    for level in plan.levels or []:
        count = plan.level_size(level).count or 0.0
        # A burst's N requests at once, at most max_concurrency of them in flight, take
        # about as long as N requests at that concurrency; a concurrency level's, at its own.
        at_once = min(level, plan.max_concurrency or level) if plan.mode == "burst" else level
        served += count * pace.seconds_per_request / at_once
    return size.seconds + served


def _waits_for_cap(plan: LoadPlan, pace: Pace | None) -> float:
    """How much longer a capped rate plan runs than its schedule: requests beyond the cap
    wait for a slot, so a level lasts at least as long as its requests take at the cap's
    concurrency. 0 without a cap (or a pace to tell)."""
    cap = plan.max_concurrency
    if plan.mode != "rate" or not cap or pace is None:
        return 0.0
    longer = 0.0
    for rate in plan.levels or []:
        level = plan.level_size(rate)
        count, scheduled = level.count or 0.0, level.scheduled_s or 0.0
        longer += max(0.0, count * pace.seconds_per_request / cap - scheduled)
    return longer


def remaining_seconds(job: ActiveJob, now: datetime) -> float | None:
    """Seconds until `job` should end, from now."""
    planned = planned_seconds(job.load, job.pace)
    if job.status != "running" or job.started_at is None:
        return planned
    elapsed = max((now - job.started_at).total_seconds(), 0.0)
    if job.done >= MIN_DONE_FOR_PACE and job.total > 0:
        return elapsed * max(job.total - job.done, 0) / job.done
    if planned is None:
        return None
    return max(planned - elapsed, 0.0)


def _pace_text(pace: Pace | None) -> str:
    if pace is None:
        return ""
    which = "this workload" if pace.same_workload else "another workload"
    return (
        f"; concurrency levels at {pace.seconds_per_request:.3g} s a request "
        f"(the endpoint's latest run of {which})"
    )


def estimate(job: ActiveJob, active: Sequence[ActiveJob], now: datetime) -> QueueEstimate:
    """`job`'s place in the queue and its expected start and end; `active` holds every
    queued or running job (all teams, `job` among them)."""
    running = [j for j in active if j.status == "running"]
    workers = max(1, len(running))
    if job.status == "running":
        left = remaining_seconds(job, now)
        basis = (
            f"its own pace so far ({job.done:,} of {job.total:,} requests)"
            if job.done >= MIN_DONE_FOR_PACE
            else "its plan" + _pace_text(job.pace)
        )
        return QueueEstimate(
            position=None,
            jobs_running=len(running),
            estimated_start_at=job.started_at,
            estimated_end_at=None if left is None else now + timedelta(seconds=left),
            basis=basis if left is not None else _unknown(job),
        )
    queued = sorted((j for j in active if j.status == "queued"), key=_served)
    ahead = [j for j in queued if _served(j) < _served(job)]
    # When each worker is free again, in seconds from now; a worker busy for a time nobody
    # can tell is left out.
    free = [left for j in running if (left := remaining_seconds(j, now)) is not None]
    free += [0.0] * (workers - len(running))
    heapq.heapify(free)
    for other in ahead:
        if not free:
            break
        took = planned_seconds(other.load, other.pace)
        start = heapq.heappop(free)
        if took is not None:
            heapq.heappush(free, start + took)
    position = len(ahead) + 1
    if not free:
        return QueueEstimate(
            position=position,
            jobs_running=len(running),
            estimated_start_at=None,
            estimated_end_at=None,
            basis="no estimate: the jobs ahead of it include some whose length cannot be told",
        )
    start = heapq.heappop(free)
    took = planned_seconds(job.load, job.pace)
    worker_text = f"{workers} worker{'s' if workers != 1 else ''} (as many as jobs running now)"
    basis = f"{len(ahead)} queued ahead, {len(running)} running, {worker_text}"
    basis += f"; no estimate of its end: {_unknown(job)}" if took is None else _pace_text(job.pace)
    return QueueEstimate(
        position=position,
        jobs_running=len(running),
        estimated_start_at=now + timedelta(seconds=start),
        estimated_end_at=None if took is None else now + timedelta(seconds=start + took),
        basis=basis,
    )


def _served(job: ActiveJob) -> tuple[int, datetime, uuid.UUID]:
    """The order the broker serves queued jobs in: priority, then the order sent."""
    return (job.priority, job.created_at, job.id)


def _unknown(job: ActiveJob) -> str:
    """Why a job's length cannot be told."""
    plan = read_load(job.load)
    if plan is not None and plan.mode == "sweep":
        return "a sweep of request counts chooses its levels as it goes"
    return (
        "its concurrency levels run until their requests are done, and the endpoint has no "
        "succeeded run to tell its pace"
    )


async def queue_estimate(jobs: JobRepository, job: Job, now: datetime) -> QueueEstimate | None:
    """`job`'s estimate, read from the database; None once it has ended."""
    if job.status not in ("queued", "running"):
        return None
    rows = await jobs.active_jobs()
    if not any(row.id == job.id for row in rows):
        return None  # it ended since it was read
    paces: dict[tuple[uuid.UUID, str | None], Pace] = {}  # fingerprint "*": any workload
    for row in await jobs.latest_paces(sorted({row.endpoint_id for row in rows})):
        seconds = row.mean_concurrency / row.requests_per_s
        paces.setdefault((row.endpoint_id, row.workload_fingerprint), Pace(seconds, True))
        paces.setdefault((row.endpoint_id, "*"), Pace(seconds, False))
    # A job not yet handed to the broker will get its place in its team's line.
    places = _team_places(rows)
    active = [
        ActiveJob(
            id=row.id,
            status=row.status,
            load=row.load,
            created_at=row.created_at,
            started_at=row.started_at,
            done=row.progress_done,
            total=row.progress_total,
            pace=paces.get((row.endpoint_id, row.workload_fingerprint))
            or paces.get((row.endpoint_id, "*")),
            priority=row.queue_priority
            if row.queue_priority is not None
            else team_priority(places[row.id]),
        )
        for row in rows
    ]
    this = next(a for a in active if a.id == job.id)
    return estimate(this, active, now)


def _team_places(rows: Sequence[Any]) -> dict[uuid.UUID, int]:
    """Each active job's place in its team's line: the team's jobs running, and queued
    before it (as infercost.jobs.outbox counts it when it sends the job)."""
    places: dict[uuid.UUID, int] = {}
    teams: dict[uuid.UUID, list[Any]] = {}
    for row in rows:
        teams.setdefault(row.team_id, []).append(row)
    for mine in teams.values():
        running = sum(1 for row in mine if row.status == "running")
        queued = sorted(
            (r for r in mine if r.status == "queued"), key=lambda r: (r.created_at, r.id)
        )
        for row in mine:
            places[row.id] = 0 if row.status == "running" else running
        for before, row in enumerate(queued):
            places[row.id] = running + before
    return places
