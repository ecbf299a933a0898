"""A watched deployment's state: its latest figures against the schedule's thresholds.

`breaches` is pure (runs' figures in, breaches out); `judge` applies it to a schedule after
one of its jobs ended, counts consecutive failures (stopping the schedule after N), and
records one `deployment.degraded` or `deployment.recovered` webhook event when the state
changes, in the same transaction as the new state, so a change is announced exactly once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import readable
from infercost.endpoints.pricing import rfc3339
from infercost.jobs.models import Job, Run
from infercost.schedules.models import Schedule
from infercost.webhooks.outbox import record_event

#: The SLO figures a threshold may name, and the run columns that hold them.
SLO_COLUMNS = {
    (metric, stat): f"{metric.removesuffix('_ms')}_{stat}_ms"
    for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
    for stat in ("p50", "p95")
}
#: Availability is the share of the schedule's finished jobs that succeeded over this window.
AVAILABILITY_WINDOW = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class RunFigures:
    """What a threshold reads of one succeeded run."""

    id: uuid.UUID
    level: float
    figures: dict[str, float | None]
    change_verdict: str | None


def breaches(
    thresholds: dict[str, Any] | None, runs: list[RunFigures], availability: float | None
) -> list[dict[str, Any]]:
    """Every threshold the runs (or the availability) break, each with its figure, limit,
    value and run; a run the history judged a regression is a breach too."""
    found: list[dict[str, Any]] = []
    limits = thresholds or {}
    slo: dict[str, dict[str, float]] = limits.get("slo") or {}
    cost_cap = limits.get("max_cost_per_million_usd")
    for run in runs:
        for metric, stats in slo.items():
            for stat, limit in stats.items():
                column = SLO_COLUMNS[(metric, stat)]
                value = run.figures.get(column)
                if value is not None and value > limit:
                    found.append(_breach("slo", column, limit, value, run))
        cost = run.figures.get("cost_per_million_output_tokens_usd")
        if cost_cap is not None and cost is not None and cost > cost_cap:
            found.append(
                _breach(
                    "max_cost_per_million_usd",
                    "cost_per_million_output_tokens_usd",
                    cost_cap,
                    cost,
                    run,
                )
            )
        if run.change_verdict == "regression":
            found.append(_breach("regression", "change_verdict", None, "regression", run))
    floor = limits.get("min_availability")
    if floor is not None and availability is not None and availability < floor:
        found.append(
            {"threshold": "min_availability", "figure": "availability", "limit": floor,
             "value": availability, "window_h": AVAILABILITY_WINDOW.total_seconds() / 3600}
        )  # fmt: skip
    return found


def _breach(
    threshold: str, figure: str, limit: float | None, value: Any, run: RunFigures
) -> dict[str, Any]:
    return {
        "threshold": threshold,
        "figure": figure,
        "limit": limit,
        "value": value,
        "run_id": str(run.id),
        "level": run.level,
    }


def verdicts_settled(job: Job, runs: list[Run], now: datetime) -> bool:
    """Whether the job's runs have their regression verdicts (decided just after the job
    ends, in a transaction of its own) or have waited long enough for them."""
    finished = job.finished_at or now
    return all(r.change_verdict is not None for r in runs) or now - finished >= timedelta(
        seconds=60
    )


async def availability(session: AsyncSession, schedule: Schedule, now: datetime) -> float | None:
    """Share of the schedule's jobs finished in AVAILABILITY_WINDOW that succeeded
    (cancelled ones are left out); None without any."""
    rows = await session.execute(
        readable(Job, schedule.team_id, Job.status, func.count())
        .where(
            Job.schedule_id == schedule.id,
            Job.status.in_(("succeeded", "failed")),
            Job.finished_at >= now - AVAILABILITY_WINDOW,
        )
        .group_by(Job.status)
    )
    counts = {status: int(n) for status, n in rows}
    total = sum(counts.values())
    return None if total == 0 else counts.get("succeeded", 0) / total


def _figures(run: Run) -> RunFigures:
    columns = [*SLO_COLUMNS.values(), "cost_per_million_output_tokens_usd"]
    return RunFigures(
        id=run.id,
        level=run.level,
        figures={c: getattr(run, c) for c in columns},
        change_verdict=run.change_verdict,
    )


async def judge(session: AsyncSession, schedule: Schedule, job: Job, now: datetime) -> None:
    """Take the ended `job` into the schedule's record (row-locked by the caller): its
    failure streak, its state, and the webhook of a state change."""
    schedule.judged_job_id = job.id
    if job.status == "failed":
        schedule.consecutive_failures += 1
        if schedule.consecutive_failures >= schedule.max_consecutive_failures:
            schedule.enabled = False
            schedule.disabled_reason = (
                f"stopped after {schedule.consecutive_failures} consecutive failed jobs "
                f"(the last, {job.id}: {job.error or 'no error recorded'}); fix the "
                "deployment, then resume the schedule"
            )
    elif job.status == "succeeded":
        schedule.consecutive_failures = 0
    runs = list(
        await session.scalars(
            readable(Run, schedule.team_id)
            .where(Run.job_id == job.id, Run.status == "succeeded")
            .order_by(Run.level_index)
        )
    )
    share = await availability(session, schedule, now)
    found = breaches(schedule.thresholds, [_figures(r) for r in runs], share)
    if found:
        state = "degraded"
    elif runs or job.status == "succeeded":
        state = "ok"
    else:
        return  # a job with nothing measured and no availability breach says nothing new
    if state == schedule.state or (schedule.state is None and state == "ok"):
        schedule.state = state
        return
    event = "deployment.degraded" if state == "degraded" else "deployment.recovered"
    evidence = {
        "schedule_id": str(schedule.id),
        "schedule_name": schedule.name,
        "endpoint_id": str(schedule.endpoint_id),
        "state": state,
        "previous_state": schedule.state,
        "job_id": str(job.id),
        "job_status": job.status,
        "job_url": f"/v1/jobs/{job.id}",
        "report_url": f"/v1/jobs/{job.id}/report",
        "run_ids": [str(r.id) for r in runs],
        "availability": share,
        "breaches": found,
        "at": rfc3339(now),
    }
    schedule.state = state
    schedule.state_since = now
    schedule.state_evidence = evidence
    await record_event(session, schedule.team_id, event, evidence)
