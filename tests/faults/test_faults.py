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

from infercost.jobs.tasks import PRIORITY_STEPS
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


async def level_running_again(
    db: asyncpg.Connection, job_id: str, level_index: int, timeout: float = 60.0
) -> datetime:
    """When the level's new run (not the interrupted one) started, once it has."""
    deadline = time.monotonic() + timeout
    while True:
        started = await db.fetchval(
            "SELECT started_at FROM runs WHERE job_id = $1 AND level_index = $2"
            " AND status <> 'interrupted' AND replaces_run_id IS NOT NULL",
            uuid.UUID(job_id),
            level_index,
        )
        if started is not None:
            return started  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, "the interrupted level was never measured again"
        await asyncio.sleep(0.1)


def pool_process(pid: int) -> psutil.Process:
    """The one pool process of a worker started with concurrency 1."""
    deadline = time.monotonic() + 30
    while not (children := psutil.Process(pid).children()):
        assert time.monotonic() < deadline, "the worker started no pool process"
        time.sleep(0.1)
    [child] = children
    return child


async def assert_measured_again(
    team: TeamClient, db: asyncpg.Connection, job_id: str, state: dict[str, Any], why: str
) -> None:
    """The job succeeded on its levels' standing runs; the killed level's first run is kept
    as interrupted (not evidence, not among the job's runs) and named by its new run."""
    assert state["status"] == "succeeded", state["error"]
    runs = (await team.http.get(f"/v1/jobs/{job_id}/runs")).json()
    assert [r["status"] for r in runs] == ["succeeded", "succeeded"]
    assert runs[0]["replaces_run_id"] is None
    replaced = runs[1]["replaces_run_id"]
    assert replaced is not None
    old = (await team.http.get(f"/v1/runs/{replaced}")).json()
    assert (old["status"], old["level"]) == ("interrupted", runs[1]["level"])
    assert why in old["error"], old["error"]
    # The new run measured the whole level: its 40 requests, each stored once.
    assert [r["requests"]["total"] for r in runs] == [40, 40]
    assert await sample_count(db, job_id) == 80
    assert state["progress"] == {"done": 80, "total": 80}
    # The report says which level was measured again.
    report = (await team.http.get(f"/v1/jobs/{job_id}/report")).text
    assert "Measured again:" in report and "measured again</span>" in report
    assert await db.fetchval("SELECT count(*) FROM runs WHERE status = 'running'") == 0


async def test_a_killed_pool_process_s_level_is_measured_again_and_the_job_succeeds(
    fault_env: dict[str, str], fault_team: TeamClient, sim: SimProcess, fault_db: asyncpg.Connection
) -> None:
    endpoint = await fault_team.create_endpoint(base_url=sim.openai_base_url)
    # Two levels of 40 requests of about 0.2 s: about 8 s at 1, 4 s at 2.
    response = await fault_team.submit(job_body(endpoint["id"], [1, 2], 40))
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    with worker_process(fault_env, "faults-worker-pool-kill") as proc:
        # 10 requests into the second level.
        await wait_running(fault_team, job_id, 50)
        pool_process(proc.pid).kill()
        killed_at = time.time()
        again = await level_running_again(fault_db, job_id, 1)
        state = await fault_team.wait_job(job_id, timeout=90)
    resumed_s = again.timestamp() - killed_at
    print(f"\nkilled pool process: its level running again {resumed_s:.1f} s after SIGKILL")
    (ARTIFACTS / "faults-resume.txt").write_text(
        f"pool process SIGKILL -> level again: {resumed_s:.2f} s\n"
    )
    await assert_measured_again(fault_team, fault_db, job_id, state, "worker process")


async def test_a_second_death_fails_the_job_with_the_reason(
    fault_env: dict[str, str], fault_team: TeamClient, sim: SimProcess, fault_db: asyncpg.Connection
) -> None:
    endpoint = await fault_team.create_endpoint(base_url=sim.openai_base_url)
    # 400 requests of about 0.2 s, two at a time: a level of about 40 s.
    response = await fault_team.submit(job_body(endpoint["id"], [2], 400))
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    with worker_process(fault_env, "faults-worker-pool-kill-twice") as proc:
        await wait_running(fault_team, job_id, 10)
        pool_process(proc.pid).kill()
        await level_running_again(fault_db, job_id, 0)
        await wait_running(fault_team, job_id, 10)
        pool_process(proc.pid).kill()
        state = await fault_team.wait_job(job_id, timeout=60)
    assert state["status"] == "failed"
    assert "worker process running this job died" in state["error"], state["error"]
    assert "already measured again once" in state["error"], state["error"]
    statuses = await fault_db.fetch(
        "SELECT status FROM runs WHERE job_id = $1 ORDER BY created_at", uuid.UUID(job_id)
    )
    assert [r["status"] for r in statuses] == ["interrupted", "failed"]


async def test_a_lost_host_s_level_is_measured_again_after_the_heartbeat_bound(
    fault_env: dict[str, str], fault_team: TeamClient, sim: SimProcess, fault_db: asyncpg.Connection
) -> None:
    endpoint = await fault_team.create_endpoint(base_url=sim.openai_base_url)
    response = await fault_team.submit(job_body(endpoint["id"], [1, 2], 40))
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    with worker_process(fault_env, "faults-worker-kill") as proc:
        await wait_running(fault_team, job_id, 50)
        # The whole worker at once, parent included: nobody reports the death.
        kill_tree(proc.pid)
        killed_at = time.time()
    with worker_process(fault_env, "faults-worker-after-kill"):
        again = await level_running_again(fault_db, job_id, 1, timeout=90)
        state = await fault_team.wait_job(job_id, timeout=90)
    resumed_s = again.timestamp() - killed_at
    print(f"\nkilled worker host: its level running again {resumed_s:.1f} s after SIGKILL")
    await assert_measured_again(fault_team, fault_db, job_id, state, "no heartbeat for over 10 s")


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
    # No worker yet: the three messages wait in the test's own queue (one Redis list per
    # priority: the team's line puts them at 1, 2 and 3); then they are lost (only this
    # queue's keys: other test sessions share this Redis).
    keys = [queue, *(f"{queue}\x06\x16{p}" for p in PRIORITY_STEPS[1:])]

    def waiting() -> int:
        return sum(int(broker.llen(key)) for key in keys)

    assert waiting() >= 3
    broker.delete(*keys)
    assert waiting() == 0
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
        # Nobody renews the new lease, so the sweep takes the job back and hands it over;
        # the old runner stopped at its next write and stored nothing of its level, which a
        # new run measured again.
        state = await fault_team.wait_job(job_id, timeout=150)
    assert state["status"] == "succeeded", state["error"]
    runs = (await fault_team.http.get(f"/v1/jobs/{job_id}/runs")).json()
    assert [r["status"] for r in runs] == ["succeeded"]
    old = (await fault_team.http.get(f"/v1/runs/{runs[0]['replaces_run_id']}")).json()
    assert old["status"] == "interrupted"
    assert "no heartbeat" in old["error"]
    # The old runner's level: no sample; the new run's: every one.
    assert await sample_count(fault_db, job_id) == 400
    assert old["requests"]["total"] == 0
    log = (ARTIFACTS / "faults-worker-lease.log").read_text(errors="replace")
    assert f"job {job_id}: lease 1 lost" in log


async def test_a_killed_replay_is_measured_again_from_the_start_of_its_window(
    fault_env: dict[str, str], fault_team: TeamClient, sim: SimProcess, fault_db: asyncpg.Connection
) -> None:
    """A trace replay is one level: its pool process killed a third of the way in, the whole
    window is replayed again on the restarted process, and the job succeeds on the new run."""
    lines = ["timestamp,input_tokens,output_tokens"]
    lines += [f"{k * 0.2:.1f},32,16" for k in range(60)]  # 60 requests over 12 s
    log = await fault_team.http.post(
        "/v1/traffic",
        content="\n".join(lines).encode(),
        params={"format": "infercost", "name": "fault-replay"},
    )
    assert log.status_code == 201, log.text
    endpoint = await fault_team.create_endpoint(base_url=sim.openai_base_url)
    body = {
        "endpoint_id": endpoint["id"],
        "workload": {},
        "load": {"mode": "trace", "traffic_id": log.json()["id"]},
    }
    response = await fault_team.submit(body)
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    with worker_process(fault_env, "faults-worker-replay-kill") as proc:
        await wait_running(fault_team, job_id, 20)
        pool_process(proc.pid).kill()
        await level_running_again(fault_db, job_id, 0)
        state = await fault_team.wait_job(job_id, timeout=90)
    assert state["status"] == "succeeded", state["error"]
    [run] = (await fault_team.http.get(f"/v1/jobs/{job_id}/runs")).json()
    assert run["mode"] == "trace" and run["requests"]["total"] == 60
    assert run["replay"]["sent"] == 60
    old = (await fault_team.http.get(f"/v1/runs/{run['replaces_run_id']}")).json()
    assert old["status"] == "interrupted"
    assert await sample_count(fault_db, job_id) == 60
    assert state["progress"] == {"done": 60, "total": 60}
