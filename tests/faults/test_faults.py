"""Faults end to end, on real processes: a worker SIGKILLed mid-level, a broker that lost its
queue, a database connection cut in the middle of a level's store, a runner whose lease was
taken. Each test says what a user would check: the job's final state, its runs, the rows in
request_samples. Elapsed times are printed (`pytest -s`) for the README, never asserted."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime
from typing import Any

import asyncpg
import psutil
import pytest
import redis
from sqlalchemy.engine import make_url

from sim.process import SimProcess
from tests.conftest import ARTIFACTS, TeamClient
from tests.faults.conftest import PgProxy, worker_process

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("fault_maintenance")]


def job_body(endpoint_id: str, levels: list[int], requests: int, warmup: int = 0) -> dict[str, Any]:
    """A concurrency job of short requests (32 tokens in, 16 out)."""
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 16}},
        "load": {
            "mode": "concurrency",
            "levels": levels,
            "requests_per_level": requests,
            "warmup_requests": warmup,
        },
    }


async def wait_running(team: TeamClient, job_id: str, done_at_least: int) -> None:
    """Until the job runs and has finished `done_at_least` requests (mid-level)."""
    deadline = time.monotonic() + 60
    while True:
        job = (await team.http.get(f"/v1/jobs/{job_id}")).json()
        if job["status"] == "running" and job["progress"]["done"] >= done_at_least:
            return
        assert job["status"] in ("queued", "running"), job
        assert time.monotonic() < deadline, f"job never got {done_at_least} requests in: {job}"
        await asyncio.sleep(0.2)


async def sample_count(db: asyncpg.Connection, job_id: str) -> int:
    return int(
        await db.fetchval(
            "SELECT count(*) FROM request_samples s JOIN runs r ON r.id = s.run_id"
            " WHERE r.job_id = $1",
            uuid.UUID(job_id),
        )
    )


def kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants at once (a lost machine, an OOM kill)."""
    root = psutil.Process(pid)
    procs = [root, *root.children(recursive=True)]
    for p in procs:
        p.kill()
    psutil.wait_procs(procs, timeout=10)


async def test_a_killed_worker_s_job_ends_failed_and_no_run_stays_running(
    fault_env: dict[str, str], fault_team: TeamClient, sim: SimProcess, fault_db: asyncpg.Connection
) -> None:
    endpoint = await fault_team.create_endpoint(base_url=sim.openai_base_url)
    # 400 requests of about 0.2 s, two at a time: a level of about 40 s.
    response = await fault_team.submit(job_body(endpoint["id"], [2], 400))
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    with worker_process(fault_env, "faults-worker-kill") as proc:
        await wait_running(fault_team, job_id, 10)
        kill_tree(proc.pid)
        killed_at = time.monotonic()
        state = await fault_team.wait_job(job_id, timeout=90)
        elapsed = time.monotonic() - killed_at
    print(f"\nkilled worker: its job failed {elapsed:.1f} s after the kill")
    assert state["status"] == "failed"
    assert "no heartbeat for over 10 s" in state["error"]
    runs = (await fault_team.http.get(f"/v1/jobs/{job_id}/runs")).json()
    assert [r["status"] for r in runs] == ["failed"]
    # One failure, one reason: the interrupted level says what its job says.
    assert runs[0]["error"] == state["error"]
    assert runs[0]["finished_at"] is not None
    assert await fault_db.fetchval("SELECT count(*) FROM runs WHERE status = 'running'") == 0
    # Samples are held until the level ends: the interrupted level stored none, not a part.
    assert await sample_count(fault_db, job_id) == 0


async def test_jobs_queued_when_the_broker_lost_its_queue_still_run(
    fault_env: dict[str, str], fault_team: TeamClient, sim: SimProcess, fault_db: asyncpg.Connection
) -> None:
    broker = redis.Redis.from_url(fault_env["REDIS_URL"])
    queue = fault_env["INFERCOST_QUEUE"]
    endpoint = await fault_team.create_endpoint(base_url=sim.openai_base_url)
    job_ids = []
    for _ in range(3):
        response = await fault_team.submit(job_body(endpoint["id"], [1], 5, warmup=1))
        assert response.status_code == 202, response.text
        job_ids.append(response.json()["id"])
    # No worker yet: the three messages wait in the test's own queue; then they are lost
    # (only this queue's key: other test sessions share this Redis).
    assert broker.llen(queue) >= 3
    broker.delete(queue)
    assert broker.llen(queue) == 0
    flushed_at = time.monotonic()
    with worker_process(fault_env, "faults-worker-flush"):
        states = [await fault_team.wait_job(job_id, timeout=90) for job_id in job_ids]
        elapsed = time.monotonic() - flushed_at
    print(f"\nflushed queue: all 3 jobs succeeded {elapsed:.1f} s after the flush")
    assert [s["status"] for s in states] == ["succeeded"] * 3, [s["error"] for s in states]
    for job_id in job_ids:
        # Re-sent messages may arrive twice; the job still ran once: one run, 6 samples.
        runs = (await fault_team.http.get(f"/v1/jobs/{job_id}/runs")).json()
        assert [(r["status"], r["requests"]["total"]) for r in runs] == [("succeeded", 5)]
        assert await sample_count(fault_db, job_id) == 6
    broker.close()


async def test_a_database_blip_in_the_middle_of_a_store_loses_no_sample(
    fault_env: dict[str, str], fault_team: TeamClient, sim: SimProcess, fault_db: asyncpg.Connection
) -> None:
    url = make_url(fault_env["DATABASE_URL"])
    endpoint = await fault_team.create_endpoint(base_url=sim.openai_base_url)
    with PgProxy((url.host or "127.0.0.1", url.port or 5432), down_s=1.5) as proxy:
        through_proxy = url.set(host="127.0.0.1", port=proxy.port)
        env = {**fault_env, "DATABASE_URL": through_proxy.render_as_string(hide_password=False)}
        # Cut every connection when the level's COPY starts, and refuse new ones for 1.5 s.
        proxy.armed = True
        with worker_process(env, "faults-worker-blip"):
            state = await fault_team.run_job(job_body(endpoint["id"], [2], 60, warmup=3))
    assert proxy.cuts == 1, "the store never reached the database through the proxy"
    assert proxy.refused >= 1, "no attempt came while the database was away"
    runs = (await fault_team.http.get(f"/v1/jobs/{state['id']}/runs")).json()
    assert [(r["status"], r["requests"]["total"]) for r in runs] == [("succeeded", 60)]
    stored_at = datetime.fromisoformat(runs[0]["finished_at"]).timestamp()
    print(f"\ndatabase blip: the level was stored {stored_at - proxy.cut_at:.1f} s after the cut")
    seqs = await fault_db.fetch(
        "SELECT seq FROM request_samples WHERE run_id = $1 ORDER BY seq", uuid.UUID(runs[0]["id"])
    )
    assert [r["seq"] for r in seqs] == list(range(63))
    log = (ARTIFACTS / "faults-worker-blip.log").read_text(errors="replace")
    assert "lost its database connection" in log


async def test_a_runner_whose_lease_was_taken_writes_nothing_more(
    fault_env: dict[str, str], fault_team: TeamClient, sim: SimProcess, fault_db: asyncpg.Connection
) -> None:
    endpoint = await fault_team.create_endpoint(base_url=sim.openai_base_url)
    response = await fault_team.submit(job_body(endpoint["id"], [2], 400))
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    with worker_process(fault_env, "faults-worker-lease"):
        await wait_running(fault_team, job_id, 10)
        # Another claim took the job (as after a re-delivery): the fencing token moves on.
        token = await fault_db.fetchval(
            "UPDATE jobs SET lease_token = lease_token + 1 WHERE id = $1 RETURNING lease_token",
            uuid.UUID(job_id),
        )
        assert token == 2
        # Nobody renews the new lease, so the sweep gives the job up; the old runner stopped
        # at its next write and stored nothing of its level.
        state = await fault_team.wait_job(job_id, timeout=90)
    assert state["status"] == "failed"
    runs = (await fault_team.http.get(f"/v1/jobs/{job_id}/runs")).json()
    assert [r["status"] for r in runs] == ["failed"]
    assert await sample_count(fault_db, job_id) == 0
    log = (ARTIFACTS / "faults-worker-lease.log").read_text(errors="replace")
    assert f"job {job_id}: lease 1 lost" in log
