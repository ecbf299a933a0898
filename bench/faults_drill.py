"""A longer fault drill than tests/faults/: multi-level jobs run while the drill SIGKILLs the
worker 20 times (every other time only its pool process, the way an out-of-memory kill takes
it; otherwise the whole worker, as a lost host), restarts Redis and cuts every Postgres
connection, then prints what became of every accepted job and how long each killed level
took to run again; then bench/bounds_drill.py's checks (secrets, upstream pages, made-up
tokens, per-team caps, slow bodies, one reason per failure) print theirs. Not part of `make test`; docs/operations.md quotes its summary.

Everything is the drill's own: a database, a redis-server on a free port (never the shared
6379 one), a TCP proxy in front of Postgres that the worker and maintenance process connect
through, an API, a maintenance process, a simulator and a queue.

    .venv/bin/python bench/faults_drill.py [--kills 20] [--jobs 40] [--skip-bounds]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil
from cryptography.fernet import Fernet

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infercost.db.migrate import upgrade_head
from sim.config import SimConfig
from sim.process import start_sim_process
from tests.conftest import (
    ROOT,
    _pg_url,
    _run_sql,
    free_port,
    running_api,
    running_cli,
    running_maintenance,
)
from tests.faults.conftest import PgProxy

LEVELS = [1, 2, 4]
REQUESTS = 30  # per level: 90 samples for a job that succeeds


class RestartingPgProxy(PgProxy):
    """The fault suite's proxy, with a cut the drill triggers itself: every connection
    through it dropped at once and new ones refused for `down_s` (a Postgres restart)."""

    def restart(self) -> None:
        self._loop.call_soon_threadsafe(self._cut)


@contextlib.contextmanager
def redis_server(port: int, workdir: str) -> Iterator[subprocess.Popen[bytes]]:
    """A redis-server of the drill's own on `port`, without persistence."""
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            import socket

            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        time.sleep(0.1)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


def kill_tree(pid: int) -> None:
    """SIGKILL a process and its children at once."""
    root = psutil.Process(pid)
    procs = [root, *root.children(recursive=True)]
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(procs, timeout=10)


async def jobs_of(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    """Every job of the drill's team (one page)."""
    return list((await http.get("/v1/jobs", params={"limit": 200})).json()["items"])


async def level_again(db: asyncpg.Connection, job_id: str, killed_at: float) -> float:
    """Seconds from a kill (time.time()) until the killed job's level runs again: a run of
    the job that replaced an interrupted one started (nan when none within 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        started = await db.fetchval(
            "SELECT min(started_at) FROM runs WHERE job_id = $1 AND replaces_run_id IS NOT NULL",
            uuid.UUID(job_id),
        )
        if started is not None:
            return float(started.timestamp() - killed_at)
        await asyncio.sleep(0.1)
    return float("nan")


def drill(kills: int, n_jobs: int) -> None:
    name = f"infercost_drill_{uuid.uuid4().hex[:8]}"
    _run_sql(f'CREATE DATABASE "{name}"')
    direct = _pg_url(name, "postgresql+asyncpg")
    upgrade_head(direct)
    redis_port = free_port()
    sim = start_sim_process(SimConfig(port=0, ttft_ms=20.0, itl_ms=5.0, model="sim-model"))
    workdir = tempfile.mkdtemp(prefix="drill-redis-")
    started = time.monotonic()
    try:
        with RestartingPgProxy(("127.0.0.1", 5432), down_s=2.0) as proxy:
            proxied = direct.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
            env = {k: v for k, v in os.environ.items() if not k.startswith("INFERCOST_")}
            env.update(
                DATABASE_URL=proxied,
                REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
                INFERCOST_QUEUE=f"drill-{uuid.uuid4().hex[:6]}",
                INFERCOST_ADMIN_TOKEN=secrets.token_urlsafe(24),
                INFERCOST_SECRET_KEYS=Fernet.generate_key().decode(),
                INFERCOST_DATA_DIR=str(ROOT / ".infercost-test"),
                INFERCOST_OUTBOUND_ALLOW="127.0.0.0/8,::1",
                INFERCOST_PREFLIGHT_ON_REGISTER="0",
                INFERCOST_RATE_LIMIT_PER_MINUTE="100000",
                INFERCOST_MAX_ACTIVE_JOBS="1000",
                INFERCOST_ABANDONED_AFTER_S="10",
                INFERCOST_REQUEUE_AFTER_S="3",
                INFERCOST_MAINTENANCE_EVERY_S="1",
                INFERCOST_STORE_RETRY_S="8",
            )
            # The API reads the database directly, so the drill can always ask it.
            api_env = {**env, "DATABASE_URL": direct}
            with (
                redis_server(redis_port, workdir) as redis,
                running_api(api_env, "drill-api", timeout=120.0) as api,
                running_maintenance(env, "drill-maintenance"),
            ):
                asyncio.run(run_drill(env, api.url, api.admin_token, sim.openai_base_url, proxy,
                                redis, redis_port, workdir, kills, n_jobs, direct, started))  # fmt: skip
    finally:
        sim.stop()
        _run_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def run_drill(
    env: dict[str, str],
    api: str,
    admin_token: str,
    base_url: str,
    proxy: RestartingPgProxy,
    redis: subprocess.Popen[bytes],
    redis_port: int,
    workdir: str,
    kills: int,
    n_jobs: int,
    database_url: str,
    started: float,
) -> None:
    admin = {"Authorization": f"Bearer {admin_token}"}
    async with httpx.AsyncClient(base_url=api, headers=admin, timeout=30) as client:
        team = (await client.post("/v1/teams", json={"name": "drill"})).json()
        key = (await client.post(f"/v1/teams/{team['id']}/keys", json={"name": "d"})).json()
    http = httpx.AsyncClient(
        base_url=api, headers={"Authorization": f"Bearer {key['key']}"}, timeout=30
    )
    endpoint = (
        await http.post(
            "/v1/endpoints",
            json={"name": "drill", "base_url": base_url, "model": "sim-model",
                  "hardware": "H200-SXM", "usd_per_hour": 3.5},
        )
    ).json()  # fmt: skip
    body = {
        "endpoint_id": endpoint["id"],
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 16}},
        "load": {"mode": "concurrency", "levels": LEVELS, "requests_per_level": REQUESTS},
    }
    accepted = []
    for _ in range(n_jobs):
        response = await http.post("/v1/jobs", json=body)
        assert response.status_code == 202, response.text
        accepted.append(response.json()["id"])
    print(f"accepted {len(accepted)} jobs of {len(LEVELS)} levels x {REQUESTS} requests")

    db = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
    kill_recovery: list[float] = []  # kill -> the killed worker's job terminal
    pool_again: list[float] = []  # pool process SIGKILL -> its level running again
    host_again: list[float] = []  # whole worker SIGKILL -> its level running again
    next_start: list[float] = []  # kill -> a new worker's job running
    redis_recovery: list[float] = []  # Redis restart -> a job progressing again
    pg_recovery: list[float] = []  # connections cut -> a job progressing again
    killed_jobs: set[str] = set()
    kill_times: list[float] = []  # time.time() of each kill
    redis_restarts = pg_cuts = 0
    worker_cm = running_cli(env, "drill-worker-0", "worker", stop_timeout=20.0)
    worker = worker_cm.__enter__()

    async def wait_progress(since: dict[str, int], limit_s: float = 120) -> float:
        """Seconds until some job has more done requests, or finished, than in `since`."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit_s:
            for job in await jobs_of(http):
                before = since.get(job["id"])
                if before is not None and (
                    job["progress"]["done"] > before or job["status"] == "succeeded"
                ):
                    return time.monotonic() - t0
            await asyncio.sleep(0.2)
        return float("nan")

    for k in range(kills):
        # Wait for a job mid-level (a few requests in), then kill the worker under it.
        deadline = time.monotonic() + 120
        victim = None
        while time.monotonic() < deadline and victim is None:
            for job in await jobs_of(http):
                # Not a job whose worker is already dead (it stays `running` until the sweep).
                fresh = job["id"] not in killed_jobs
                if fresh and job["status"] == "running" and job["progress"]["done"] >= 3:
                    victim = job["id"]
            await asyncio.sleep(0.2)
        if victim is None:
            print(f"kill {k + 1}: no job running within 120 s; stopping the kills")
            break
        pool_only = k % 2 == 0
        if pool_only:
            # Only the pool process (an out-of-memory kill): the worker's parent sees it go.
            for child in psutil.Process(worker.pid).children():
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
            killed_at = time.time()
            killed_jobs.add(victim)
            kill_times.append(killed_at)
            pool_again.append(await level_again(db, victim, killed_at))
            continue
        kill_tree(worker.pid)
        killed = time.monotonic()
        killed_at = time.time()
        killed_jobs.add(victim)
        kill_times.append(killed_at)
        with contextlib.suppress(Exception):
            worker_cm.__exit__(None, None, None)
        restart_redis = k % 10 in (3, 9)
        if restart_redis:
            # Redis restarts while no worker runs: its queue (no persistence) is gone.
            redis.terminate()
            redis.wait(10)
            redis = subprocess.Popen(  # noqa: ASYNC220 - a second, like the first
                ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", workdir],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            redis_restarts += 1
            redis_at = time.monotonic()
        worker_cm = running_cli(env, f"drill-worker-{k + 1}", "worker", stop_timeout=20.0)
        worker = worker_cm.__enter__()
        snapshot = {j["id"]: j["progress"]["done"] for j in await jobs_of(http)}
        waited = await wait_progress(snapshot)
        next_start.append(time.monotonic() - killed)
        if restart_redis:
            redis_recovery.append(time.monotonic() - redis_at)
        host_again.append(await level_again(db, victim, killed_at))
        if k % 4 == 3:
            # Postgres "restarts" under the new worker while it measures and stores.
            snapshot = {j["id"]: j["progress"]["done"] for j in await jobs_of(http)}
            proxy.restart()
            pg_cuts += 1
            pg_recovery.append(await wait_progress(snapshot))
        del waited

    # Let everything finish, then account for every job.
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        jobs = await jobs_of(http)
        if all(j["status"] not in ("queued", "running") for j in jobs):
            break
        await asyncio.sleep(0.5)
    with contextlib.suppress(Exception):
        worker_cm.__exit__(None, None, None)
    if redis_restarts:
        # The restarted server is the drill's to stop (the first one its context manager's).
        redis.terminate()
        redis.wait(10)
    jobs = {j["id"]: j for j in await jobs_of(http)}
    await http.aclose()
    try:
        running_runs = await db.fetchval("SELECT count(*) FROM runs WHERE status = 'running'")
        rows = await db.fetch(
            "SELECT r.job_id, r.status, r.requests_total,"
            " (SELECT count(*) FROM request_samples s WHERE s.run_id = r.id) AS samples,"
            " EXISTS (SELECT 1 FROM runs n WHERE n.replaces_run_id = r.id) AS replaced"
            " FROM runs r"
        )
    finally:
        await db.close()
    # Each killed job's end, from the latest kill before it (the clock of this machine).
    for job_id in killed_jobs:
        finished = jobs[job_id]["finished_at"]
        if finished is not None:
            end = datetime.fromisoformat(finished.replace("Z", "+00:00")).timestamp()
            kill_recovery.append(end - max(t for t in kill_times if t <= end))
    succeeded_runs = [r for r in rows if r["status"] == "succeeded"]
    exact = sum(1 for r in succeeded_runs if r["samples"] == r["requests_total"] == REQUESTS)
    failed_with_samples = sum(1 for r in rows if r["status"] == "failed" and r["samples"])
    ok_jobs = [j for j, v in jobs.items() if v["status"] == "succeeded"]
    ok_exact = sum(
        1
        for j in ok_jobs
        if sum(r["samples"] for r in rows if str(r["job_id"]) == j) == REQUESTS * len(LEVELS)
    )

    def spread(xs: list[float]) -> str:
        xs = sorted(x for x in xs if x == x)
        if not xs:
            return "none"
        return f"median {xs[len(xs) // 2]:.1f} s, max {xs[-1]:.1f} s (n={len(xs)})"

    print("\n=== fault drill summary ===")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"took {time.monotonic() - started:.0f} s")  # fmt: skip
    print(f"faults: {kills} worker SIGKILLs, {redis_restarts} Redis restarts (no persistence), "
          f"{pg_cuts} Postgres connection cuts (2 s refused)")  # fmt: skip
    print(f"jobs accepted: {len(accepted)}; found: {sum(1 for j in accepted if j in jobs)}")
    print(f"terminal states: {dict(Counter(v['status'] for v in jobs.values()))}")
    print(f"runs left running: {running_runs}")
    print(f"succeeded runs with exactly {REQUESTS} samples: {exact} of {len(succeeded_runs)}")
    print(f"succeeded jobs with exactly {REQUESTS * len(LEVELS)} samples: "
          f"{ok_exact} of {len(ok_jobs)}")  # fmt: skip
    print(f"failed runs holding samples: {failed_with_samples}")
    interrupted = [r for r in rows if r["status"] == "interrupted"]
    print(f"interrupted runs: {len(interrupted)}, measured again: "
          f"{sum(1 for r in interrupted if r['replaced'])}, holding samples: "
          f"{sum(1 for r in interrupted if r['samples'])}")  # fmt: skip
    print(f"pool process SIGKILL -> its level running again: {spread(pool_again)}")
    print(f"whole worker SIGKILL -> its level running again: {spread(host_again)}")
    never = len(killed_jobs) - len(kill_recovery)
    print(f"killed job finished after: {spread(kill_recovery)}"
          f"{'' if not never else f'; {never} never'}")  # fmt: skip
    print(f"whole worker SIGKILL -> a fresh worker progressing: {spread(next_start)}")
    print(f"Redis restart -> progress again: {spread(redis_recovery)}")
    print(f"Postgres cut -> progress again: {spread(pg_recovery)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument(
        "--skip-bounds", action="store_true", help="leave out bench/bounds_drill.py's checks"
    )
    args = parser.parse_args()
    drill(args.kills, args.jobs)
    if not args.skip_bounds:
        # Leaks, upstream pages, made-up tokens, team caps, slow bodies, one reason per
        # failure: on a stack of their own (issue 27).
        from bench.bounds_drill import run_checks

        run_checks()


if __name__ == "__main__":
    main()
