"""One failure, one reason: a failed job's runs still 'running' fail with the job's own
error, whether the runner records the failure (JobRepository.finish) or the sweep does
(fail_abandoned), on rows written straight to the test database."""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.jobs.repository import JobRepository
from tests.conftest import TeamClient, insert_finished_run

pytestmark = pytest.mark.integration


async def _running(db: asyncpg.Connection, team: TeamClient) -> tuple[uuid.UUID, uuid.UUID]:
    endpoint = await team.create_endpoint()
    job_id, run_id = await insert_finished_run(db, team.team_id, endpoint["id"])
    await db.execute(
        "UPDATE jobs SET status = 'running', finished_at = NULL, lease_token = 7,"
        " heartbeat_at = now() - interval '1 hour' WHERE id = $1",
        uuid.UUID(job_id),
    )
    await db.execute("UPDATE runs SET status = 'running' WHERE id = $1", uuid.UUID(run_id))
    return uuid.UUID(job_id), uuid.UUID(run_id)


async def _errors(db: asyncpg.Connection, job_id: uuid.UUID) -> tuple[str, str, str]:
    job = await db.fetchval("SELECT error FROM jobs WHERE id = $1", job_id)
    status, run = await db.fetchrow("SELECT status, error FROM runs WHERE job_id = $1", job_id)
    return str(job), str(run), str(status)


async def test_the_runner_s_reason_is_the_run_s(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    job_id, _ = await _running(db, team)
    reason = "run 1: storing 40 samples: the database could not be reached for 60 s"
    async with sessions() as session:
        assert await JobRepository(session).finish(job_id, "failed", reason, token=7)
        await session.commit()
    assert await _errors(db, job_id) == (reason, reason, "failed")


async def test_the_sweep_s_reason_is_the_run_s(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    job_id, _ = await _running(db, team)
    # Its worker died once before: this second death fails the job (the first is measured
    # again, tests/faults/test_faults.py).
    await db.execute("UPDATE jobs SET interruptions = 1 WHERE id = $1", job_id)
    async with sessions() as session:
        failed = await JobRepository(session).fail_abandoned(timedelta(minutes=30))
        await session.commit()
    assert job_id in failed
    job, run, status = await _errors(db, job_id)
    assert status == "failed"
    assert run == job
    assert "no heartbeat for over 1800 s" in job
