"""The queries that make failures safe, on a real Postgres and with two sessions at once where
the point is concurrency: the fencing token of a job's lease, the sweep of abandoned jobs
with several maintenance replicas, and the task outbox (SKIP LOCKED, backoff)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.db.engine import make_engine, make_sessionmaker
from infercost.jobs import outbox
from infercost.jobs.deployments import DEPLOYMENT_OF_ENDPOINT_SQL
from infercost.jobs.repository import JobRepository
from infercost.jobs.tasks import RUN_JOB_TASK
from tests.conftest import TeamClient
from workers.maintenance import RELAY_GRACE_S

pytestmark = pytest.mark.integration


@pytest.fixture
async def sessions(fault_database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = make_engine(fault_database_url)
    try:
        yield make_sessionmaker(engine)
    finally:
        await engine.dispose()


async def new_job(db: asyncpg.Connection, team: TeamClient, status: str = "queued") -> uuid.UUID:
    """A job row of the team's (on a fresh endpoint) written straight to the database."""
    endpoint = await team.create_endpoint()
    job_id: uuid.UUID = await db.fetchval(
        "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, progress_done,"
        " progress_total, created_at) VALUES (gen_random_uuid(), $1, $2, $3, '{}',"
        ' \'{"mode": "concurrency"}\', 0, 10, now()) RETURNING id',
        uuid.UUID(team.team_id),
        uuid.UUID(endpoint["id"]),
        status,
    )
    return job_id


async def test_each_claim_moves_the_fencing_token_and_a_stale_runner_is_refused(
    fault_team: TeamClient,
    fault_db: asyncpg.Connection,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    job_id = await new_job(fault_db, fault_team)
    async with sessions() as session:
        first = await JobRepository(session).claim(job_id)
        assert await JobRepository(session).claim(job_id) is None  # a duplicate delivery
        await session.commit()
    assert first is not None and first.lease_token == 1
    # Put back in the queue and claimed again (a re-run): the token moves on to 2.
    await fault_db.execute("UPDATE jobs SET status = 'queued' WHERE id = $1", job_id)
    async with sessions() as session:
        second = await JobRepository(session).claim(job_id)
        await session.commit()
    assert second is not None and second.lease_token == 2
    async with sessions() as session:
        repo = JobRepository(session)
        # Every write of the first runner is refused; the second runner's go through.
        assert await repo.hold_lease(job_id, 1) is False
        assert await repo.heartbeat(job_id, 5, token=1) is False
        assert await repo.renew_lease(job_id, 1) is None
        assert await repo.finish(job_id, "succeeded", token=1) is False
        assert await repo.hold_lease(job_id, 2) is True
        assert await repo.heartbeat(job_id, 7, token=2) is True
        await session.commit()
    row = await fault_db.fetchrow("SELECT status, progress_done FROM jobs WHERE id = $1", job_id)
    assert (row["status"], row["progress_done"]) == ("running", 7)
    # A user's cancel: the runner may still store its last level, but no longer beats as
    # running.
    await fault_db.execute("UPDATE jobs SET status = 'cancelled' WHERE id = $1", job_id)
    async with sessions() as session:
        repo = JobRepository(session)
        assert await repo.renew_lease(job_id, 2) == "cancelled"
        assert await repo.hold_lease(job_id, 2) is True
        assert await repo.heartbeat(job_id, 8, token=2) is False


async def test_two_sweeps_at_once_take_up_an_abandoned_job_and_its_run_once(
    fault_team: TeamClient,
    fault_db: asyncpg.Connection,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    job_id = await new_job(fault_db, fault_team, status="running")
    stale = "UPDATE jobs SET heartbeat_at = now() - interval '60 seconds' WHERE id = $1"
    await fault_db.execute(stale, job_id)
    token = await fault_db.fetchval("SELECT lease_token FROM jobs WHERE id = $1", job_id)
    endpoint_id = await fault_db.fetchval("SELECT endpoint_id FROM jobs WHERE id = $1", job_id)
    deployment_id = await fault_db.fetchval(DEPLOYMENT_OF_ENDPOINT_SQL, endpoint_id)
    run_id = await fault_db.fetchval(
        "INSERT INTO runs (id, team_id, job_id, endpoint_id, deployment_id, level_index, level,"
        " mode, status, created_at, requests_total, requests_succeeded, requests_failed)"
        " SELECT gen_random_uuid(), j.team_id, j.id, j.endpoint_id, $2, 0, 4, 'concurrency',"
        " 'running', now(), 0, 0, 0 FROM jobs j WHERE j.id = $1 RETURNING id",
        job_id,
        deployment_id,
    )
    async with sessions() as a, sessions() as b:
        # Replica A takes the job up but has not committed; replica B skips the row A
        # holds and reports nothing, then or after A's commit.
        got_a = await JobRepository(a).interrupt_abandoned(timedelta(seconds=30))
        got_b = await JobRepository(b).interrupt_abandoned(timedelta(seconds=30))
        await a.commit()
        got_b += await JobRepository(b).interrupt_abandoned(timedelta(seconds=30))
        await b.commit()
    # The first death: handed over with the next fencing token, not failed.
    assert [(o.job_id, o.failed, o.token) for o in got_a] == [(job_id, False, token + 1)]
    assert got_b == []
    job = await fault_db.fetchrow(
        "SELECT status, interruptions, lease_token FROM jobs WHERE id = $1", job_id
    )
    assert tuple(job) == ("running", 1, token + 1)
    handed = await fault_db.fetch("SELECT task, args FROM task_outbox WHERE job_id = $1", job_id)
    assert [(r["task"], json.loads(r["args"])) for r in handed] == [
        ("benchmark.run_job", [str(job_id), token + 1])
    ]
    run = await fault_db.fetchrow(
        "SELECT status, error, finished_at FROM runs WHERE id = $1", run_id
    )
    assert run["status"] == "interrupted" and run["finished_at"] is not None
    assert "no heartbeat for over 30 s" in run["error"]
    # Waiting for a free worker is not a second death: the sweep leaves it alone however
    # long it waits, and a lost hand-over message is sent again like a queued job's.
    await fault_db.execute("DELETE FROM task_outbox WHERE job_id = $1", job_id)
    assert await fault_db.fetchval("SELECT heartbeat_at FROM jobs WHERE id = $1", job_id) is None
    await fault_db.execute(
        "UPDATE jobs SET enqueued_at = now() - interval '1 hour' WHERE id = $1", job_id
    )
    async with sessions() as session:
        assert await JobRepository(session).interrupt_abandoned(timedelta(seconds=1)) == []
        resent = await outbox.requeue_stale(session, RUN_JOB_TASK, timedelta(seconds=30))
        await session.commit()
    assert job_id in resent
    handed = await fault_db.fetch("SELECT args FROM task_outbox WHERE job_id = $1", job_id)
    assert [json.loads(r["args"]) for r in handed] == [[str(job_id), token + 1]]
    # Taken up, then that worker lost too: the second death fails the job.
    await fault_db.execute("DELETE FROM task_outbox WHERE job_id = $1", job_id)
    await fault_db.execute(stale, job_id)
    async with sessions() as session:
        assert await JobRepository(session).fail_abandoned(timedelta(seconds=30)) == [job_id]
        await session.commit()
    job = await fault_db.fetchrow("SELECT status, error FROM jobs WHERE id = $1", job_id)
    assert job["status"] == "failed"
    assert "no heartbeat for over 30 s" in job["error"] and "resubmit" in job["error"]
    # A job whose heartbeat is recent is left alone.
    fresh = await new_job(fault_db, fault_team, status="running")
    await fault_db.execute("UPDATE jobs SET heartbeat_at = now() WHERE id = $1", fresh)
    async with sessions() as session:
        assert await JobRepository(session).interrupt_abandoned(timedelta(seconds=30)) == []
        await session.commit()


async def test_two_relays_never_take_the_same_outbox_row(
    fault_team: TeamClient,
    fault_db: asyncpg.Connection,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    job_ids = [await new_job(fault_db, fault_team) for _ in range(3)]
    async with sessions() as session:
        for job_id in job_ids:
            outbox.add_task(session, RUN_JOB_TASK, [str(job_id)], job_id)
        await session.commit()
    mine = set(job_ids)
    async with sessions() as a, sessions() as b:
        taken_a = [r for r in await outbox.take(a) if r.job_id in mine]
        taken_b = [r for r in await outbox.take(b) if r.job_id in mine]
        assert len(taken_a) == 3 and taken_b == []
        sent_to: list[list[str]] = []
        done = await outbox.publish(a, taken_a, lambda row: sent_to.append(row.args))
        await a.commit()
        await b.rollback()
    assert len(done) == 3
    assert sorted(sent_to) == sorted([[str(j)] for j in job_ids])
    left = await fault_db.fetchval(
        "SELECT count(*) FROM task_outbox WHERE job_id = ANY($1::uuid[])", job_ids
    )
    assert left == 0
    counts = await fault_db.fetch(
        "SELECT enqueue_count FROM jobs WHERE id = ANY($1::uuid[])", job_ids
    )
    assert [r["enqueue_count"] for r in counts] == [1, 1, 1]


async def test_a_queued_job_is_sent_again_with_backoff_until_claimed(
    fault_team: TeamClient,
    fault_db: asyncpg.Connection,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    job_id = await new_job(fault_db, fault_team)
    bound = timedelta(seconds=60)

    async def requeued(enqueued_s_ago: int, count: int) -> bool:
        await fault_db.execute("DELETE FROM task_outbox WHERE job_id = $1", job_id)
        await fault_db.execute(
            "UPDATE jobs SET enqueued_at = now() - make_interval(secs => $2), enqueue_count = $3"
            " WHERE id = $1",
            job_id,
            float(enqueued_s_ago),
            count,
        )
        async with sessions() as session:
            ids = await outbox.requeue_stale(session, RUN_JOB_TASK, bound)
            await session.commit()
        return job_id in ids

    # Sent once 30 s ago: not yet; 61 s ago: again. Sent twice: the bound doubles (120 s);
    # four or more times: at most 8x the bound apart.
    assert not await requeued(30, 1)
    assert await requeued(61, 1)
    assert not await requeued(100, 2)
    assert await requeued(121, 2)
    assert not await requeued(479, 9)
    assert await requeued(481, 9)
    # The new message is an outbox row the relay sends; while it waits, no second one.
    assert (
        await fault_db.fetchval("SELECT count(*) FROM task_outbox WHERE job_id = $1", job_id) == 1
    )
    async with sessions() as session:
        assert job_id not in await outbox.requeue_stale(session, RUN_JOB_TASK, bound)
    # A claimed job (running, with the heartbeat its claim wrote) is never sent again.
    await fault_db.execute("DELETE FROM task_outbox WHERE job_id = $1", job_id)
    await fault_db.execute(
        "UPDATE jobs SET status = 'running', heartbeat_at = now() WHERE id = $1", job_id
    )
    async with sessions() as session:
        assert job_id not in await outbox.requeue_stale(session, RUN_JOB_TASK, bound)


async def test_the_relay_leaves_a_fresh_row_to_its_writer(
    fault_team: TeamClient,
    fault_db: asyncpg.Connection,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """A writer (the API, a shard coordinator) sends its row right after its commit; the relay
    takes only rows older than RELAY_GRACE_S, so it does not race that send (once it took a
    coordinator's shard task first, and the coordinator had nothing to send)."""
    job_id = await new_job(fault_db, fault_team)
    async with sessions() as session:
        row = outbox.add_task(session, RUN_JOB_TASK, [str(job_id)], job_id)
        await session.flush()
        row_id = row.id
        await session.commit()
    async with sessions() as relay:
        assert await outbox.take(relay, ids=[row_id], older_than_s=RELAY_GRACE_S) == []
        await relay.rollback()
    await fault_db.execute(
        "UPDATE task_outbox SET created_at = created_at - make_interval(secs => $2) WHERE id = $1",
        row_id,
        RELAY_GRACE_S + 1,
    )
    async with sessions() as relay:
        [taken] = await outbox.take(relay, ids=[row_id], older_than_s=RELAY_GRACE_S)
        assert taken.args == [str(job_id)]
        await outbox.publish(relay, [taken], lambda _row: None)
        await relay.commit()
    assert await fault_db.fetchval("SELECT count(*) FROM task_outbox WHERE id = $1", row_id) == 0
