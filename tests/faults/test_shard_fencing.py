"""Shards under the job's lease, on a real Postgres: the coordinator's shard tasks commit
with their rows through the task outbox (a broker that refuses them leaves them for the
relay), every task carries the fencing token, and every shard write of a runner that lost
the job is refused. (On the suite's own database and API: nothing here needs the fault
tests' processes.)"""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import Any

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

import workers.runner.shards
from infercost.jobs import outbox
from infercost.jobs.deployments import DEPLOYMENT_OF_ENDPOINT_SQL
from infercost.jobs.repository import JobRepository
from infercost.jobs.tasks import RUN_SHARD_TASK
from infercost.shards.store import ShardRepository
from tests.conftest import TeamClient
from workers.lease import LeaseLost
from workers.runner.shards import ShardSlot, ShardStopped, coordinate

pytestmark = pytest.mark.integration


async def claimed_job_with_run(
    db: asyncpg.Connection, team: TeamClient, sessions: async_sessionmaker[AsyncSession]
) -> tuple[uuid.UUID, uuid.UUID, int]:
    """A job claimed by a runner (status running, its token) and a running run of it."""
    endpoint = await team.create_endpoint()
    job_id: uuid.UUID = await db.fetchval(
        "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, progress_done,"
        " progress_total, created_at) VALUES (gen_random_uuid(), $1, $2, 'queued', '{}',"
        ' \'{"mode": "concurrency"}\', 0, 10, now()) RETURNING id',
        uuid.UUID(team.team_id),
        uuid.UUID(endpoint["id"]),
    )
    async with sessions() as session:
        job = await JobRepository(session).claim(job_id)
        await session.commit()
    assert job is not None
    deployment_id = await db.fetchval(DEPLOYMENT_OF_ENDPOINT_SQL, uuid.UUID(endpoint["id"]))
    run_id: uuid.UUID = await db.fetchval(
        "INSERT INTO runs (id, team_id, job_id, endpoint_id, deployment_id, level_index, level,"
        " mode, status, created_at, requests_total, requests_succeeded, requests_failed)"
        " SELECT gen_random_uuid(), j.team_id, j.id, j.endpoint_id, $2, 0, 4, 'concurrency',"
        " 'running', now(), 0, 0, 0 FROM jobs j WHERE j.id = $1 RETURNING id",
        job_id,
        deployment_id,
    )
    return job_id, run_id, job.lease_token


async def test_shard_tasks_commit_with_their_rows_and_wait_for_the_relay_when_refused(
    team: TeamClient,
    db: asyncpg.Connection,
    sessions: async_sessionmaker[AsyncSession],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(workers.runner.shards, "START_TIMEOUT_S", 1.0)
    job_id, run_id, token = await claimed_job_with_run(db, team, sessions)
    rt: Any = SimpleNamespace(sessionmaker=sessions)

    def broker_down(name: str, args: list[Any]) -> None:
        raise ConnectionError("the broker is down")

    async def own_shard(slot: ShardSlot) -> None:
        assert slot.token == token
        assert await slot.claim()
        slot.start_beating(lambda: 0)
        try:
            await slot.wait_for_start()
        except ShardStopped:
            pass
        finally:
            await slot.stop_beating()

    outcome = await coordinate(
        rt,
        job_id,
        run_id,
        3,
        token=token,
        own_shard=own_shard,
        heartbeat=lambda done: _true(),
        enqueue=broker_down,
    )
    assert outcome.error is not None and outcome.error.startswith("only 1 of 3 shards started")
    # The refused tasks stayed in the outbox, committed with the shard rows and carrying the
    # coordinator's token: what the maintenance relay sends once the broker is back.
    rows = await db.fetch(
        "SELECT task, args FROM task_outbox WHERE args->>1 = $1 ORDER BY id", str(run_id)
    )
    assert [(r["task"], json.loads(r["args"])) for r in rows] == [
        (RUN_SHARD_TASK, [str(job_id), str(run_id), shard, 3, token]) for shard in (1, 2)
    ]
    assert await db.fetchval("SELECT count(*) FROM run_shards WHERE run_id = $1", run_id) == 3
    sent: list[tuple[str, list[Any]]] = []
    async with sessions() as session:
        taken = await outbox.take(session, ids=[])
        assert taken == []
        relayed = [
            row for row in await outbox.take(session, limit=1000) if row.args[1] == str(run_id)
        ]
        await outbox.publish(session, relayed, lambda row: sent.append((row.task, row.args)))
        await session.commit()
    assert sent == [
        (RUN_SHARD_TASK, [str(job_id), str(run_id), shard, 3, token]) for shard in (1, 2)
    ]
    assert not await db.fetchval(
        "SELECT count(*) FROM task_outbox WHERE args->>1 = $1", str(run_id)
    )


async def _true() -> bool:
    return True


async def test_every_shard_write_of_a_runner_that_lost_the_job_is_refused(
    team: TeamClient,
    db: asyncpg.Connection,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    job_id, run_id, old = await claimed_job_with_run(db, team, sessions)
    async with sessions() as session:
        await ShardRepository(session).add(run_id, 2)
        await session.commit()
    # The sweep gave the job back to the queue and another runner claimed it: token + 1.
    await db.execute("UPDATE jobs SET status = 'queued' WHERE id = $1", job_id)
    async with sessions() as session:
        job = await JobRepository(session).claim(job_id)
        await session.commit()
    assert job is not None
    new = job.lease_token
    assert new == old + 1
    async with sessions() as session:
        repo = ShardRepository(session)
        assert not await repo.claim(run_id, 0, "old:1", job_id=job_id, token=old)
        assert await repo.claim(run_id, 0, "new:1", job_id=job_id, token=new)
        assert await repo.claim(run_id, 1, "new:2", job_id=job_id, token=new)
        assert await repo.beat(run_id, 0, job_id, 5, ready=True, token=old) == (False, None)
        assert await repo.beat(run_id, 0, job_id, 7, ready=True, token=new) == (True, None)
        assert not await repo.finish(run_id, 1, "succeeded", job_id=job_id, token=old)
        await session.commit()
    rows = await db.fetch(
        "SELECT shard, status, worker, requests_done FROM run_shards WHERE run_id = $1"
        " ORDER BY shard",
        run_id,
    )
    assert [tuple(r) for r in rows] == [(0, "running", "new:1", 7), (1, "running", "new:2", 0)]
    # The old coordinator can start no sharded level: no shard rows, no tasks.
    other_run: uuid.UUID = await db.fetchval(
        "INSERT INTO runs (id, team_id, job_id, endpoint_id, deployment_id, level_index, level,"
        " mode, status, created_at, requests_total, requests_succeeded, requests_failed)"
        " SELECT gen_random_uuid(), team_id, job_id, endpoint_id, deployment_id, 1, 8, mode,"
        " 'running', now(), 0, 0, 0 FROM runs WHERE id = $1 RETURNING id",
        run_id,
    )
    rt: Any = SimpleNamespace(sessionmaker=sessions)
    with pytest.raises(LeaseLost):
        await coordinate(
            rt,
            job_id,
            other_run,
            2,
            token=old,
            own_shard=lambda slot: _nothing(),
            heartbeat=lambda done: _true(),
            enqueue=lambda name, args: None,
        )
    assert not await db.fetchval("SELECT count(*) FROM run_shards WHERE run_id = $1", other_run)
    assert not await db.fetchval(
        "SELECT count(*) FROM task_outbox WHERE args->>1 = $1", str(other_run)
    )
    # The runner that holds the lease finishes its shard.
    async with sessions() as session:
        assert await JobRepository(session).hold_lease(job_id, new)
        assert await ShardRepository(session).finish(
            run_id, 1, "succeeded", job_id=job_id, token=new, requests_done=3
        )
        await session.commit()


async def _nothing() -> None:
    return None
