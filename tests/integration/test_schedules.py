"""Schedules against the real API and Postgres, the scheduler's tick driven with a clock the
test controls: one job per slot across two racing schedulers, no slot lost across a
restart, skips and misses recorded, N failures stop a schedule, and one signed webhook per
state change of the deployment.

Schedules are placed in 2030 (created paused, then moved there in the database) so that the
session's own maintenance process, ticking on the real clock, never touches them. Jobs the
tick submits are given their outcome straight in the database with a bumped lease token,
so a worker that might have claimed one can write nothing more (its writes are fenced).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from click.testing import CliRunner, Result
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from cli import main
from infercost.db.engine import make_engine, make_sessionmaker
from infercost.schedules.scheduler import tick
from infercost.settings import Settings
from infercost.webhooks.signing import verify
from tests.conftest import DEPLOYMENT_OF_ENDPOINT_SQL, Api, TeamClient
from tests.integration.test_webhook_jobs import create_webhook, receiver

pytestmark = pytest.mark.integration

JOB = {
    "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
    "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 3},
}
T0 = datetime(2030, 1, 1, tzinfo=UTC)


def at(hour: int, minute: int = 0, second: int = 0) -> datetime:
    """A time on the test's 1 January 2030 (UTC)."""
    return T0.replace(hour=hour, minute=minute, second=second)


async def make_schedule(
    team: TeamClient, db: asyncpg.Connection, endpoint_id: str, **fields: Any
) -> str:
    """An hourly schedule created (paused) through the API, then moved to 2030 and enabled:
    created at T0, its first slot due at 01:00. A tick handles every due schedule in the
    database, and at 2030 every enabled one is due: those other tests of this session left
    behind (some written straight to the database with an empty job template, which stops
    a tick) are paused first, so the test's ticks handle its own schedules only."""
    await db.execute(
        "UPDATE schedules SET enabled = false WHERE enabled AND team_id <> $1",
        uuid.UUID(team.team_id),
    )
    body = {"job": {"endpoint_id": endpoint_id, **JOB}, "when": {"interval_s": 3600},
            "enabled": False, **fields}  # fmt: skip
    response = await team.http.post("/v1/schedules", json=body)
    assert response.status_code == 201, response.text
    schedule_id = str(response.json()["id"])
    await db.execute(
        "UPDATE schedules SET enabled = true, created_at = $2, last_slot_at = $2,"
        " next_slot_at = $3 WHERE id = $1",
        uuid.UUID(schedule_id),
        T0,
        at(1),
    )
    return schedule_id


async def ledger(db: asyncpg.Connection, schedule_id: str) -> list[tuple[datetime, str, Any]]:
    rows = await db.fetch(
        "SELECT slot_at, outcome, job_id, reason FROM schedule_runs WHERE schedule_id = $1"
        " ORDER BY slot_at",
        uuid.UUID(schedule_id),
    )
    return [(r["slot_at"], r["outcome"], r["job_id"]) for r in rows]


async def jobs_of(db: asyncpg.Connection, schedule_id: str) -> list[asyncpg.Record]:
    return list(
        await db.fetch(
            "SELECT id, status FROM jobs WHERE schedule_id = $1 ORDER BY created_at",
            uuid.UUID(schedule_id),
        )
    )


async def end_job(db: asyncpg.Connection, job_id: uuid.UUID, status: str, error: str = "") -> None:
    """Give a scheduled job its outcome (fencing off any runner that claimed it)."""
    await db.execute(
        "UPDATE jobs SET status = $2, error = NULLIF($3, ''), finished_at = $4,"
        " lease_token = lease_token + 1000 WHERE id = $1",
        job_id,
        status,
        error,
        T0,
    )


async def tick_until_handled(
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
    now: datetime,
    db: asyncpg.Connection,
    schedule_id: str,
) -> None:
    """Tick at `now` until the schedule's due slots are handled. A tick passes over a
    schedule another process holds locked, as a replica does, and the session's maintenance
    process takes each schedule's lock now and then (it judges a schedule's last job once
    that ended, on the real clock): the next tick handles it then. (A hang is caught after
    60 s; the loop waits for a state, not a duration.)"""
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        await tick(sessions, settings, now=now)
        row = await db.fetchrow(
            "SELECT enabled, next_slot_at FROM schedules WHERE id = $1", uuid.UUID(schedule_id)
        )
        if not row["enabled"] or row["next_slot_at"] > now:
            return
        assert asyncio.get_running_loop().time() < deadline, f"slot not handled: {dict(row)}"
        await asyncio.sleep(0.1)


async def test_the_api_checks_a_schedule_as_a_job_and_lists_last_and_next_runs(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint()
    base = {"job": {"endpoint_id": endpoint["id"], **JOB}}
    bad = [
        ({"when": {"cron": "0 */3 * *"}}, "when.cron"),
        ({"when": {"cron": "0 * * * *", "timezone": "Mars/Olympus"}}, "when.timezone"),
        ({"when": {"cron": "0 * * * *", "interval_s": 3600}}, "when"),
        ({"when": {"interval_s": 600}, "jitter_s": 600}, "jitter_s"),
        # The job template is checked as POST /v1/jobs checks a job.
        ({"when": {"interval_s": 3600}, "job": {"endpoint_id": str(uuid.uuid4()), **JOB}},
         "job.endpoint_id"),
        ({"when": {"interval_s": 3600}, "thresholds": {"slo": {"ttft_ms": {"p99": 1}}}},
         "thresholds.slo.ttft_ms.p99"),
    ]  # fmt: skip
    for fields, field in bad:
        response = await team.http.post("/v1/schedules", json={**base, **fields})
        assert response.status_code == 422, (fields, response.text)
        assert field in response.text
    as_job = await team.submit({"endpoint_id": endpoint["id"], **JOB, "load": {"mode": "bogus"}})
    as_schedule = await team.http.post(
        "/v1/schedules",
        json={"job": {"endpoint_id": endpoint["id"], **JOB, "load": {"mode": "bogus"}},
              "when": {"interval_s": 3600}},
    )  # fmt: skip
    assert as_job.status_code == as_schedule.status_code == 422

    created = await team.http.post(
        "/v1/schedules",
        json={**base, "name": "berlin", "when": {"cron": "0 */3 * * *", "timezone": "Europe/Berlin"},
              "quiet_hours": {"start": "22:00", "end": "06:00"}, "enabled": False},
    )  # fmt: skip
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["next_run_at"] is None and schedule["enabled"] is False
    resumed = (await team.http.post(f"/v1/schedules/{schedule['id']}/resume")).json()
    # The next run is a multiple of 3 h in Berlin time: 23, 2, 5, ... UTC in winter, or
    # 22, 1, 4, ... in summer (CEST): minute and second are zero either way.
    next_run = datetime.fromisoformat(resumed["next_run_at"])
    assert next_run > datetime.now(UTC) and (next_run.minute, next_run.second) == (0, 0)
    patched = await team.http.patch(f"/v1/schedules/{schedule['id']}", json={"name": "b2",
                                    "quiet_hours": None})  # fmt: skip
    assert patched.status_code == 200, patched.text
    assert patched.json()["name"] == "b2" and patched.json()["quiet_hours"] is None
    listed = (await team.http.get("/v1/schedules")).json()
    assert [s["id"] for s in listed["items"]] == [schedule["id"]]
    assert listed["items"][0]["next_run_at"] == resumed["next_run_at"]
    assert listed["items"][0]["last_run"] is None
    paused = (await team.http.post(f"/v1/schedules/{schedule['id']}/pause")).json()
    assert paused["enabled"] is False and paused["next_run_at"] is None
    assert (await team.http.delete(f"/v1/schedules/{schedule['id']}")).status_code == 204
    assert (await team.http.get(f"/v1/schedules/{schedule['id']}")).status_code == 404


async def test_two_schedulers_racing_on_one_slot_submit_one_job(
    team: TeamClient, db: asyncpg.Connection, database_url: str
) -> None:
    endpoint = await team.create_endpoint()
    schedule_id = await make_schedule(team, db, endpoint["id"])
    settings = Settings.from_env()
    engines = [make_engine(database_url) for _ in range(2)]
    try:
        makers = [make_sessionmaker(e) for e in engines]
        # Two replicas, each with its own connections, tick at the same moment, twice (and
        # again should the session's maintenance process have held the schedule's lock).
        for _ in range(2):
            await asyncio.gather(*(tick(m, settings, now=at(1, 0, 30)) for m in makers))
        await tick_until_handled(makers[0], settings, at(1, 0, 30), db, schedule_id)
    finally:
        for engine in engines:
            await engine.dispose()
    jobs = await jobs_of(db, schedule_id)
    assert len(jobs) == 1
    assert await ledger(db, schedule_id) == [(at(1), "submitted", jobs[0]["id"])]
    listed = (await team.http.get("/v1/schedules")).json()["items"]
    (mine,) = [s for s in listed if s["id"] == schedule_id]
    assert mine["last_run"]["job_id"] == str(jobs[0]["id"])
    assert mine["next_run_at"] == "2030-01-01T02:00:00Z"


async def test_a_restart_loses_no_slot_and_a_running_job_makes_a_skip(
    team: TeamClient, db: asyncpg.Connection, database_url: str
) -> None:
    endpoint = await team.create_endpoint()
    schedule_id = await make_schedule(team, db, endpoint["id"])
    settings = Settings.from_env()

    async def tick_as_new_process(now: datetime) -> None:
        # A process of its own each time: nothing but the database carries over.
        engine = make_engine(database_url)
        try:
            await tick_until_handled(make_sessionmaker(engine), settings, now, db, schedule_id)
        finally:
            await engine.dispose()

    await tick_as_new_process(at(1, 0, 5))
    (first,) = await jobs_of(db, schedule_id)
    # The 01:00 job is running (the test plays its runner: a lease no worker holds, a fresh
    # heartbeat), whatever the session's worker may have done with it since the outbox
    # relay handed it over: left as queued, a worker could end it (its endpoint refuses
    # connections) before the next tick, and that slot would run instead of being skipped.
    await hold_running(db, first["id"])
    # 02:00: the 01:00 job is still running, so the slot is skipped and says why.
    await tick_as_new_process(at(2, 0, 5))
    assert len(await jobs_of(db, schedule_id)) == 1
    skipped = await db.fetchrow(
        "SELECT outcome, reason FROM schedule_runs WHERE schedule_id = $1 AND slot_at = $2",
        uuid.UUID(schedule_id),
        at(2),
    )
    assert skipped["outcome"] == "skipped" and str(first["id"]) in skipped["reason"]
    await end_job(db, first["id"], "succeeded")
    # Down from 02:00 to 05:10: 03:00 and 04:00 are recorded as missed, 05:00 runs.
    await tick_as_new_process(at(5, 10))
    jobs = await jobs_of(db, schedule_id)
    assert len(jobs) == 2
    assert await ledger(db, schedule_id) == [
        (at(1), "submitted", first["id"]),
        (at(2), "skipped", None),
        (at(3), "missed", None),
        (at(4), "missed", None),
        (at(5), "submitted", jobs[1]["id"]),
    ]
    stored = await db.fetchrow(
        "SELECT last_slot_at, next_slot_at FROM schedules WHERE id = $1", uuid.UUID(schedule_id)
    )
    assert (stored["last_slot_at"], stored["next_slot_at"]) == (at(5), at(6))


async def hold_running(db: asyncpg.Connection, job_id: uuid.UUID) -> None:
    """Hold a job as running under a lease no runner has, with a fresh heartbeat: a worker
    that claimed it can write nothing more (its writes are fenced) and none can claim it."""
    await db.execute(
        "UPDATE jobs SET status = 'running', heartbeat_at = now(), finished_at = NULL,"
        " error = NULL, lease_token = lease_token + 1000 WHERE id = $1",
        job_id,
    )


async def test_failures_in_a_row_stop_the_schedule_and_say_why(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    endpoint = await team.create_endpoint()
    schedule_id = await make_schedule(team, db, endpoint["id"], max_consecutive_failures=2)
    settings = Settings.from_env()
    await tick_until_handled(sessions, settings, at(1, 0, 1), db, schedule_id)
    (first,) = await jobs_of(db, schedule_id)
    await end_job(db, first["id"], "failed", "connection refused")
    await tick_until_handled(sessions, settings, at(2, 0, 1), db, schedule_id)
    jobs = await jobs_of(db, schedule_id)
    assert len(jobs) == 2
    await end_job(db, jobs[1]["id"], "failed", "connection refused")
    await tick_until_handled(sessions, settings, at(3, 0, 1), db, schedule_id)
    assert len(await jobs_of(db, schedule_id)) == 2  # stopped: no third job
    schedule = (await team.http.get(f"/v1/schedules/{schedule_id}")).json()
    assert schedule["enabled"] is False
    assert schedule["consecutive_failures"] == 2
    assert "2 consecutive failed jobs" in schedule["disabled_reason"]
    assert str(jobs[1]["id"]) in schedule["disabled_reason"]
    resumed = (await team.http.post(f"/v1/schedules/{schedule_id}/resume")).json()
    assert resumed["enabled"] is True and resumed["disabled_reason"] is None
    assert resumed["consecutive_failures"] == 0


async def add_run(db: asyncpg.Connection, job_id: uuid.UUID, ttft_p95_ms: float) -> uuid.UUID:
    """A succeeded run of a scheduled job with the TTFT p95 the test chose."""
    row = await db.fetchrow("SELECT team_id, endpoint_id FROM jobs WHERE id = $1", job_id)
    deployment_id = await db.fetchval(DEPLOYMENT_OF_ENDPOINT_SQL, row["endpoint_id"])
    run_id: uuid.UUID = await db.fetchval(
        "INSERT INTO runs (id, team_id, job_id, endpoint_id, level_index, level, mode, status,"
        " requests_total, requests_succeeded, requests_failed, ttft_p95_ms, change_verdict,"
        " created_at, finished_at, deployment_id) VALUES (gen_random_uuid(), $1, $2, $3, 0, 1,"
        " 'concurrency', 'succeeded', 3, 3, 0, $4, 'baseline', $5, $5, $6) RETURNING id",
        row["team_id"],
        job_id,
        row["endpoint_id"],
        ttft_p95_ms,
        T0,
        deployment_id,
    )
    return run_id


async def test_one_signed_webhook_per_state_change_not_per_run(
    team: TeamClient,
    db: asyncpg.Connection,
    sessions: async_sessionmaker[AsyncSession],
    maintenance: subprocess.Popen[bytes],
) -> None:
    endpoint = await team.create_endpoint()
    settings = Settings.from_env()
    with receiver(200) as hooks:
        webhook = await create_webhook(
            team, hooks.url, ["deployment.degraded", "deployment.recovered"]
        )
        schedule_id = await make_schedule(
            team, db, endpoint["id"], thresholds={"slo": {"ttft_ms": {"p95": 500}}}
        )
        # TTFT p95 of the job at each slot: a breach twice, then within the limit twice.
        figures = [800.0, 900.0, 300.0, 200.0]
        runs = []
        for hour, ttft in enumerate(figures, start=1):
            await tick_until_handled(sessions, settings, at(hour, 0, 1), db, schedule_id)
            job = (await jobs_of(db, schedule_id))[-1]
            runs.append(await add_run(db, job["id"], ttft))
            await end_job(db, job["id"], "succeeded")
        await tick(sessions, settings, now=at(len(figures), 30))  # judges the last job
        got = await hooks.wait_for(2)
        await asyncio.sleep(3.0)  # a third delivery, if any were wrongly made, arrives
    assert len(hooks.got) == 2
    # The courier sends with several senders at once, so arrival order is not guaranteed:
    # receivers order by the payload's time; here each event is looked up by name.
    events = {e["event"]: e for e in (json.loads(g.body) for g in hooks.got)}
    assert sorted(events) == ["deployment.degraded", "deployment.recovered"]
    for g in got:
        assert verify(webhook["secret"], g.headers["Infercost-Signature"], g.body)
    degraded = events["deployment.degraded"]["data"]
    assert degraded["schedule_id"] == schedule_id
    (breach,) = degraded["breaches"]
    assert breach == {"threshold": "slo", "figure": "ttft_p95_ms", "limit": 500, "value": 800.0,
                      "run_id": str(runs[0]), "level": 1.0}  # fmt: skip
    assert degraded["job_url"].startswith("/v1/jobs/") and degraded["run_ids"] == [str(runs[0])]
    recovered = events["deployment.recovered"]["data"]
    assert recovered["breaches"] == [] and recovered["run_ids"] == [str(runs[2])]
    assert recovered["previous_state"] == "degraded"
    schedule = (await team.http.get(f"/v1/schedules/{schedule_id}")).json()
    assert schedule["state"] == "ok"
    assert schedule["state_evidence"]["run_ids"] == [str(runs[2])]


async def test_the_cli_adds_lists_pauses_and_removes_a_schedule(
    team: TeamClient, api_server: Api, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint()
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps({"endpoint": endpoint["name"], **JOB}))

    def run(*args: str) -> Result:
        env = {"INFERCOST_URL": api_server.url, "INFERCOST_TOKEN": team.key}
        return CliRunner().invoke(main, ["schedules", *args], env=env)

    added = await asyncio.to_thread(
        run, "add", str(job_file), "--cron", "0 */3 * * *", "--timezone", "Europe/Berlin",
        "--name", "watch-me", "--quiet", "22:00-06:00", "--max-ttft-p95", "800", "--json",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    created = json.loads(added.output)
    assert created["endpoint_id"] == endpoint["id"]
    assert created["quiet_hours"] == {"start": "22:00", "end": "06:00"}
    assert created["thresholds"] == {"slo": {"ttft_ms": {"p95": 800.0}}}
    listed = await asyncio.to_thread(run, "list")
    assert listed.exit_code == 0 and "watch-me" in listed.output
    assert "0 */3 * * * (Europe/Berlin)" in listed.output
    paused = await asyncio.to_thread(run, "pause", "watch-me", "--json")
    assert paused.exit_code == 0 and json.loads(paused.output)["enabled"] is False
    removed = await asyncio.to_thread(run, "remove", created["id"][:8])
    assert removed.exit_code == 0, removed.output
    assert (await team.http.get(f"/v1/schedules/{created['id']}")).status_code == 404
    neither = await asyncio.to_thread(run, "add", str(job_file))
    assert neither.exit_code != 0 and "--cron or --every" in neither.output


async def test_quiet_hours_skip_a_slot_and_say_so(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    endpoint = await team.create_endpoint()
    # UTC schedule, quiet from 00:30 to 01:30: the 01:00 slot is skipped, 02:00 runs.
    schedule_id = await make_schedule(
        team, db, endpoint["id"], quiet_hours={"start": "00:30", "end": "01:30"}
    )
    settings = Settings.from_env()
    await tick_until_handled(sessions, settings, at(1, 0, 1), db, schedule_id)
    assert await jobs_of(db, schedule_id) == []
    await tick_until_handled(sessions, settings, at(2, 0, 1), db, schedule_id)
    (job,) = await jobs_of(db, schedule_id)
    assert await ledger(db, schedule_id) == [
        (at(1), "skipped", None),
        (at(2), "submitted", job["id"]),
    ]
    reason = await db.fetchval(
        "SELECT reason FROM schedule_runs WHERE schedule_id = $1 AND slot_at = $2",
        uuid.UUID(schedule_id),
        at(1),
    )
    assert "quiet hours" in reason


async def test_the_maintenance_process_submits_a_due_slot_on_the_real_clock(
    team: TeamClient, maintenance: subprocess.Popen[bytes]
) -> None:
    endpoint = await team.create_endpoint()
    before = datetime.now(UTC)
    created = await team.http.post(
        "/v1/schedules",
        json={"job": {"endpoint_id": endpoint["id"], **JOB}, "when": {"interval_s": 60}},
    )
    after = datetime.now(UTC)
    assert created.status_code == 201, created.text
    schedule = created.json()
    # The first whole minute after the API read its clock, which it did between `before`
    # and `after` (compared with now, a slot computed just before a minute turned would
    # seem to be in the past).
    next_run = datetime.fromisoformat(schedule["next_run_at"])
    assert next_run.second == 0 and before < next_run <= after + timedelta(seconds=60)
    # The process ticks every maintenance_every_s (5 s): the slot is handled soon after it.
    deadline = asyncio.get_running_loop().time() + 90
    while True:
        runs = (await team.http.get(f"/v1/schedules/{schedule['id']}/runs")).json()
        if runs["items"]:
            break
        assert asyncio.get_running_loop().time() < deadline, "no slot handled in 90 s"
        await asyncio.sleep(1.0)
    (slot,) = runs["items"]
    assert slot["outcome"] == "submitted" and slot["job_id"]
    assert datetime.fromisoformat(slot["slot_at"]) == next_run
    job = (await team.http.get(f"/v1/jobs/{slot['job_id']}")).json()
    assert job["endpoint_id"] == endpoint["id"]
    await team.http.post(f"/v1/schedules/{schedule['id']}/pause")


async def test_deleting_an_endpoint_stops_its_schedules(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """A removed deployment is never measured again by a schedule left behind."""
    endpoint = await team.create_endpoint()
    schedule_id = await make_schedule(team, db, endpoint["id"])
    response = await team.http.delete(f"/v1/endpoints/{endpoint['id']}")
    assert response.status_code == 204, response.text
    await tick_until_handled(sessions, Settings.from_env(), at(1, 0, 1), db, schedule_id)
    assert await jobs_of(db, schedule_id) == []
    schedule = (await team.http.get(f"/v1/schedules/{schedule_id}")).json()
    assert schedule["enabled"] is False
    assert schedule["disabled_reason"] == "its endpoint was deleted"


FAILED_CHECK = {"ok": False, "summary": "streaming: no answer in 3 s", "probes": []}


async def fail_check(db: asyncpg.Connection, endpoint_id: str) -> None:
    """Store a failed preflight check on the endpoint, as POST /v1/endpoints/{id}/check would."""
    await db.execute(
        'UPDATE endpoints SET "check" = $2::jsonb, checked_at = $3 WHERE id = $1',
        uuid.UUID(endpoint_id),
        json.dumps(FAILED_CHECK),
        T0,
    )


async def test_a_slot_against_an_endpoint_that_failed_its_check_is_refused_unless_forced(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    endpoint = await team.create_endpoint()
    await fail_check(db, endpoint["id"])
    # POST /v1/jobs refuses such a job; a slot of a schedule is refused the same way.
    refused_job = await team.submit({"endpoint_id": endpoint["id"], **JOB})
    assert refused_job.status_code == 409, refused_job.text
    schedule_id = await make_schedule(team, db, endpoint["id"])
    forced_id = await make_schedule(team, db, endpoint["id"])
    forced = await team.http.patch(
        f"/v1/schedules/{forced_id}", json={"job": {"endpoint_id": endpoint["id"], **JOB,
                                                    "force": True}}
    )  # fmt: skip
    assert forced.status_code == 200, forced.text
    for each in (schedule_id, forced_id):
        await tick_until_handled(sessions, Settings.from_env(), at(1, 0, 1), db, each)
    assert await jobs_of(db, schedule_id) == []
    row = await db.fetchrow(
        "SELECT outcome, reason FROM schedule_runs WHERE schedule_id = $1 AND slot_at = $2",
        uuid.UUID(schedule_id),
        at(1),
    )
    assert row["outcome"] == "refused"
    assert "failed its last check" in row["reason"] and FAILED_CHECK["summary"] in row["reason"]
    runs = (await team.http.get(f"/v1/schedules/{schedule_id}/runs")).json()["items"]
    assert [(r["outcome"], r["job_id"]) for r in runs] == [("refused", None)]
    # The schedule whose job says "force": true submits as POST /v1/jobs would with it.
    (job,) = await jobs_of(db, forced_id)
    assert await ledger(db, forced_id) == [(at(1), "submitted", job["id"])]
    # Once the endpoint passes a check, the next slot runs.
    await db.execute(
        'UPDATE endpoints SET "check" = \'{"ok": true}\'::jsonb WHERE id = $1',
        uuid.UUID(endpoint["id"]),
    )
    await tick_until_handled(sessions, Settings.from_env(), at(2, 0, 1), db, schedule_id)
    (job,) = await jobs_of(db, schedule_id)
    assert (await ledger(db, schedule_id))[-1] == (at(2), "submitted", job["id"])


async def test_a_slot_counts_against_the_same_active_job_cap_as_the_api(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    endpoint = await team.create_endpoint()
    schedule_id = await make_schedule(team, db, endpoint["id"])
    # One job submitted through the API and held active; with a cap of one, the slot is
    # refused and says why. Held as running under a lease no runner has, with a fresh
    # heartbeat: a queued one could be claimed (its message may come late) and end before
    # the tick, and the session's worker's own writes are fenced off.
    submitted = await team.submit({"endpoint_id": endpoint["id"], **JOB})
    assert submitted.status_code in (200, 201, 202), submitted.text
    await db.execute(
        "UPDATE jobs SET status = 'running', heartbeat_at = now(),"
        " lease_token = lease_token + 1000 WHERE id = $1",
        uuid.UUID(submitted.json()["id"]),
    )
    capped = dataclasses.replace(Settings.from_env(), max_active_jobs=1)
    await tick_until_handled(sessions, capped, at(1, 0, 1), db, schedule_id)
    assert await jobs_of(db, schedule_id) == []
    reason = await db.fetchval(
        "SELECT reason FROM schedule_runs WHERE schedule_id = $1 AND outcome = 'refused'",
        uuid.UUID(schedule_id),
    )
    assert "1 jobs queued or running (INFERCOST_MAX_ACTIVE_JOBS)" in reason
    await end_job(db, uuid.UUID(submitted.json()["id"]), "cancelled")


async def test_a_patch_that_leaves_the_timing_keeps_the_due_slot(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """On the real clock (the API's PATCH reads it): a daily slot is due and not yet run
    when the schedule is renamed; the slot still runs. (Were it dropped by the PATCH, the
    ledger would hold nothing for it.) Daily, so the next slot is hours away: a slot
    that fell due while the test ran would add a row of its own."""
    endpoint = await team.create_endpoint()
    day = 86400
    schedule_id = await make_schedule(team, db, endpoint["id"], when={"interval_s": day})
    now = datetime.now(UTC)
    if day - now.timestamp() % day < 120:  # a UTC midnight within two minutes: let it pass
        await asyncio.sleep(day - now.timestamp() % day + 1)
        now = datetime.now(UTC)
    due = datetime.fromtimestamp(int(now.timestamp()) // day * day, UTC)
    before = due - timedelta(days=1)
    await db.execute(
        "UPDATE schedules SET created_at = $2, last_slot_at = $2, next_slot_at = $3 WHERE id = $1",
        uuid.UUID(schedule_id),
        before,
        due,
    )
    renamed = await team.http.patch(
        f"/v1/schedules/{schedule_id}", json={"name": "nightly", "max_consecutive_failures": 5}
    )
    assert renamed.status_code == 200, renamed.text
    # The session's maintenance process may take the slot first; either way it is run.
    await tick_until_handled(sessions, Settings.from_env(), datetime.now(UTC), db, schedule_id)
    (job,) = await jobs_of(db, schedule_id)
    assert await ledger(db, schedule_id) == [(due, "submitted", job["id"])]
    assert (await team.http.post(f"/v1/schedules/{schedule_id}/pause")).status_code == 200
    await end_job(db, job["id"], "cancelled")


async def test_a_patch_of_the_timing_recomputes_the_next_slot(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint()
    schedule_id = await make_schedule(team, db, endpoint["id"])
    # Counted from the last slot handled (T0, later than the PATCH's real time).
    moved = await team.http.patch(
        f"/v1/schedules/{schedule_id}", json={"when": {"interval_s": 1800}}
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["next_run_at"] == "2030-01-01T00:30:00Z"


async def test_the_slot_ledger_of_another_teams_schedule_is_not_found(
    team: TeamClient, new_team: Any, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint()
    schedule_id = await make_schedule(team, db, endpoint["id"])
    other = await new_team()
    response = await other.http.get(f"/v1/schedules/{schedule_id}/runs")
    assert response.status_code == 404, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    mine = await team.http.get(f"/v1/schedules/{schedule_id}/runs")
    assert mine.status_code == 200 and mine.json()["items"] == []
