"""The outbox: events become delivery rows in the producer's own transaction.

Usage, from any producer (the worker when a job ends, the API when one is cancelled, the
history feature when it finds a regression)::

    await record_event(session, team_id, "regression.detected", {...})
    await session.commit()

Because the rows commit (or roll back) with the change that caused them, an event is never
announced for something that did not happen, and never lost: each worker's courier
(workers/webhooks.py) sends the deliveries that are due, whatever the broker does.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.base import utcnow
from infercost.db.scope import readable, unscoped
from infercost.endpoints.pricing import rfc3339
from infercost.history.changes import RunChange
from infercost.jobs.models import Job, Run
from infercost.webhooks.models import EVENTS, Webhook
from infercost.webhooks.repository import WebhookRepository


def _delivery_row(webhook_id: uuid.UUID, event: str, data: dict[str, Any]) -> dict[str, Any]:
    """One pending delivery of `event` to a webhook, its payload stamped with the delivery's
    own id (receivers use it to drop duplicates)."""
    delivery_id = uuid.uuid4()
    payload = {
        "id": str(delivery_id),
        "event": event,
        "created_at": rfc3339(utcnow()),
        "data": data,
    }
    return {"id": delivery_id, "webhook_id": webhook_id, "event": event, "payload": payload}


async def record_event(
    session: AsyncSession, team_id: uuid.UUID, event: str, data: dict[str, Any]
) -> list[uuid.UUID]:
    """Queue `event` for every webhook of the team subscribed to it, in the caller's
    transaction; returns the new delivery ids. Nothing more is needed once the caller
    commits: the courier (workers/webhooks.py) polls the outbox and sends them when due.

    `event` is one of EVENTS; `data` is the event's JSON-ready body (strings, numbers,
    lists, dicts), sent as the payload's `data`.
    """
    if event not in EVENTS:
        raise ValueError(f"unknown webhook event {event!r}; known: {', '.join(EVENTS)}")
    repo = WebhookRepository(session)
    rows = [_delivery_row(w.id, event, data) for w in await repo.subscribed(team_id, event)]
    await repo.add_deliveries(rows)
    return [row["id"] for row in rows]


async def record_ping(session: AsyncSession, webhook: Webhook) -> uuid.UUID:
    """Queue a `ping` to one webhook (whatever it subscribes to), to test a receiver."""
    data = {"webhook_id": str(webhook.id), "message": "a test delivery from infercost"}
    row = _delivery_row(webhook.id, "ping", data)
    await WebhookRepository(session).add_deliveries([row])
    delivery_id: uuid.UUID = row["id"]
    return delivery_id


def _run_data(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.id),
        "level": run.level,
        "mode": run.mode,
        "status": run.status,
        "slo_passed": run.slo_passed,
        "ttft_p95_ms": run.ttft_p95_ms,
        "tpot_p95_ms": run.tpot_p95_ms,
        "output_tokens_per_s": run.output_tokens_per_s,
        "cost_per_million_output_tokens_usd": run.cost_per_million_output_tokens_usd,
    }


async def job_finished_data(session: AsyncSession, job: Job) -> dict[str, Any]:
    """The `data` of a job.finished event: the job's outcome and each level's headline
    figures, enough for a portal to show a result without calling back."""
    runs = await session.scalars(
        readable(Run, job.team_id)
        .where(Run.job_id == job.id, Run.status != "interrupted")
        .order_by(Run.level_index)
    )
    return {
        "job": {
            "id": str(job.id),
            "status": job.status,
            "error": job.error,
            "endpoint_id": str(job.endpoint_id),
            "created_at": rfc3339(job.created_at),
            "started_at": rfc3339(job.started_at),
            "finished_at": rfc3339(job.finished_at),
        },
        "runs": [_run_data(run) for run in runs],
    }


async def record_job_finished(session: AsyncSession, job_id: uuid.UUID) -> list[uuid.UUID]:
    """record_event("job.finished") for a job whose final status is in this session's view
    (committed, or written earlier in the same transaction)."""
    query = select(Job).where(Job.id == job_id).execution_options(populate_existing=True)
    reason = "a job's end is announced by what ended it: the worker holding it, a user's cancel"
    job = await session.scalar(unscoped(query, reason))
    if job is None:
        return []
    return await record_event(
        session, job.team_id, "job.finished", await job_finished_data(session, job)
    )


async def record_regressions(
    session: AsyncSession, job_id: uuid.UUID, changes: Sequence[RunChange]
) -> list[uuid.UUID]:
    """record_event("regression.detected") when any of a job's runs regressed against its
    baseline (infercost.history), in the transaction that stores those verdicts; one event
    per job, listing each regressed run with its per-metric detail."""
    regressed = [c for c in changes if c.verdict == "regression"]
    if not regressed:
        return []
    reason = "the worker that judged the job's runs announces their regressions"
    job = await session.scalar(unscoped(select(Job).where(Job.id == job_id), reason))
    if job is None:
        return []
    data = {
        "job_id": str(job.id),
        "endpoint_id": str(job.endpoint_id),
        "regressions": [c.as_dict() for c in regressed],
    }
    return await record_event(session, job.team_id, "regression.detected", data)
