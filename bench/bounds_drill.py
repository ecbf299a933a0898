"""The security drill's checks of issue 27, on a stack of the drill's own, printing what it
found: whether a key an upstream echoes every way comes back anywhere, whether an
upstream's HTML page is quoted, whether made-up tokens from one address are limited, each
per-team cap, slow bodies, and whether a failure gives one reason on the run and the job.
bench/faults_drill.py runs it after its fault drill; it also runs alone:

    .venv/bin/python bench/bounds_drill.py [--tricklers 50]

Everything is the drill's own: a database, a redis-server on a free port, an API (with small
caps and a 2 s body deadline, so the checks take seconds), a worker and a maintenance
process reaching Postgres through a proxy the drill cuts, the echoing upstream of
tests/integration/test_leaks.py and the simulator.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from cryptography.fernet import Fernet

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infercost.db.migrate import upgrade_head
from sim.config import SimConfig
from sim.process import start_sim_process
from tests.conftest import (
    ARTIFACTS,
    ROOT,
    _pg_url,
    _run_sql,
    free_port,
    running_api,
    running_cli,
    running_maintenance,
)
from tests.faults.conftest import PgProxy
from tests.integration.test_leaks import (
    echoing_upstream,
    leaks,
    pg_dump,
    planted_forms,
    redis_contents,
)
from tests.integration.test_webhook_jobs import receiver

AUTH_FAILURES = 10
BODY_TIMEOUT_S = 2.0
STORE_RETRY_S = 3.0
CAPS = {
    "INFERCOST_MAX_ENDPOINTS": 5,
    "INFERCOST_MAX_DATASETS": 2,
    "INFERCOST_MAX_SCHEDULES": 2,
    "INFERCOST_MAX_TRAFFIC_LOGS": 2,
    "INFERCOST_MAX_TAGS": 4,
    "INFERCOST_MAX_TAG_CHARS": 32,
}


def run_checks(tricklers: int = 50) -> None:
    """Build the drill's stack, run every check, print the summary."""
    # Imported here: the drill's Redis helper lives beside the fault drill.
    from bench.faults_drill import redis_server

    name = f"infercost_bounds_{uuid.uuid4().hex[:8]}"
    _run_sql(f'CREATE DATABASE "{name}"')
    direct = _pg_url(name, "postgresql+asyncpg")
    upgrade_head(direct)
    redis_port = free_port()
    workdir = tempfile.mkdtemp(prefix="bounds-redis-")
    sim = start_sim_process(SimConfig(port=0, ttft_ms=20.0, itl_ms=5.0, model="sim-model"))
    started = time.monotonic()
    try:
        # Away longer than one store's retries, back within the job's own finish's retries.
        with PgProxy(("127.0.0.1", 5432), down_s=1.5 * STORE_RETRY_S) as proxy:
            env = {k: v for k, v in os.environ.items() if not k.startswith("INFERCOST_")}
            env.update(
                DATABASE_URL=direct,
                REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
                INFERCOST_QUEUE=f"bounds-{uuid.uuid4().hex[:6]}",
                INFERCOST_ADMIN_TOKEN=secrets.token_urlsafe(24),
                INFERCOST_SECRET_KEYS=Fernet.generate_key().decode(),
                INFERCOST_DATA_DIR=str(ROOT / ".infercost-test"),
                INFERCOST_OUTBOUND_ALLOW="127.0.0.0/8,::1",
                INFERCOST_PREFLIGHT_ON_REGISTER="0",
                INFERCOST_AUTH_FAILURES_PER_MINUTE=str(AUTH_FAILURES),
                INFERCOST_BODY_TIMEOUT_S=str(BODY_TIMEOUT_S),
                INFERCOST_STORE_RETRY_S=str(STORE_RETRY_S),
                INFERCOST_ABANDONED_AFTER_S="60",
                INFERCOST_MAINTENANCE_EVERY_S="1",
                INFERCOST_WEBHOOK_BACKOFF_S="1",
                **{k: str(v) for k, v in CAPS.items()},
            )
            proxied = direct.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
            worker_env = {**env, "DATABASE_URL": proxied}
            with (
                redis_server(redis_port, workdir),
                running_api(env, "bounds-api", timeout=120.0) as api,
                running_maintenance(env, "bounds-maintenance"),
                running_cli(worker_env, "bounds-worker", "worker", stop_timeout=20.0),
            ):
                asyncio.run(
                    _checks(api.url, api.admin_token, env, proxy, sim.openai_base_url, tricklers)
                )
                print(f"took {time.monotonic() - started:.0f} s")
    finally:
        sim.stop()
        _run_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _team(api: str, admin_token: str) -> tuple[httpx.AsyncClient, str]:
    admin = {"Authorization": f"Bearer {admin_token}"}
    async with httpx.AsyncClient(base_url=api, headers=admin, timeout=30) as client:
        team = (await client.post("/v1/teams", json={"name": f"b-{uuid.uuid4().hex[:6]}"})).json()
        key = (await client.post(f"/v1/teams/{team['id']}/keys", json={"name": "d"})).json()
    http = httpx.AsyncClient(
        base_url=api, headers={"Authorization": f"Bearer {key['key']}"}, timeout=60
    )
    return http, str(key["key"])


async def _wait(http: httpx.AsyncClient, job_id: str, limit_s: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        job: dict[str, Any] = (await http.get(f"/v1/jobs/{job_id}")).json()
        if job["status"] not in ("queued", "running"):
            return job
        await asyncio.sleep(0.3)
    return job


JOB = {
    "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
    "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 12},
}


async def _checks(
    api: str, admin_token: str, env: dict[str, str], proxy: PgProxy, sim_url: str, tricklers: int
) -> None:
    http, key = await _team(api, admin_token)
    lines: list[str] = []
    try:
        lines += await _leak_check(http, env)
        lines += await _token_check(api, key)
        capped, _ = await _team(api, admin_token)
        try:
            lines += await _cap_checks(capped, sim_url)
        finally:
            await capped.aclose()
        lines += await _trickle_check(api, key, tricklers)
        lines += await _one_reason_check(http, proxy, sim_url)
    finally:
        await http.aclose()
    print("\n=== bounds drill summary ===")
    for line in lines:
        print(line)


async def _leak_check(http: httpx.AsyncClient, env: dict[str, str]) -> list[str]:
    """The echoing upstream checked and benchmarked; every read searched."""
    from tests.integration.test_leaks import KEY

    found: list[str] = []
    searched = 0
    with echoing_upstream() as base_url, receiver(200) as hooks:
        endpoint = (
            await http.post(
                "/v1/endpoints",
                json={"name": "echo", "base_url": base_url, "model": "m", "api_key": KEY},
            )
        ).json()
        hook = (
            await http.post("/v1/webhooks", json={"url": hooks.url, "events": ["job.finished"]})
        ).json()
        check = await http.post(f"/v1/endpoints/{endpoint['id']}/check")
        found += leaks("check", check.content)
        submitted = await http.post(
            "/v1/jobs", json={"endpoint_id": endpoint["id"], **JOB, "force": True}
        )
        job = await _wait(http, submitted.json()["id"])
        got = await hooks.wait_for(1)
        found += leaks("webhook body", got[0].body)
        searched += 2
    paths = [
        f"/v1/jobs/{job['id']}",
        f"/v1/jobs/{job['id']}/runs",
        f"/v1/jobs/{job['id']}/export",
        f"/v1/jobs/{job['id']}/report",
        f"/v1/endpoints/{endpoint['id']}",
        f"/v1/webhooks/{hook['id']}/deliveries",
        "/v1/jobs",
        "/v1/status",
    ]
    for run in job.get("runs", []):
        paths += [f"/v1/runs/{run['id']}", f"/v1/runs/{run['id']}/requests"]
    for path in paths:
        for accept in ("application/json", "text/csv", "text/html"):
            response = await http.get(path, headers={"Accept": accept})
            if response.status_code == 200:
                searched += 1
                found += leaks(f"{path} ({accept})", response.content)
    redis = await redis_contents(env["REDIS_URL"])
    found += leaks("redis", redis)
    dump = await asyncio.to_thread(pg_dump, env["DATABASE_URL"])
    found += leaks("pg_dump", dump)
    for log in ("bounds-api", "bounds-worker", "bounds-maintenance"):
        path = ARTIFACTS / f"{log}.log"
        if path.exists():
            found += leaks(f"{log} log", path.read_bytes())
    page = any("the internal page" in f for f in found)
    return [
        f"leak: {len(planted_forms()) - 1} forms of a key echoed by the upstream, searched in "
        f"{searched} API responses, the webhook body, 3 logs, Redis ({len(redis)} bytes) and "
        f"a pg_dump ({len(dump)} bytes): {len(found)} found{': ' + ', '.join(found) if found else ''}",
        f"the upstream's HTML page quoted back: {'yes' if page else 'no'}",
        f"the check still advises: {'set the endpoint' + chr(39) + 's api_key' in check.json()['summary']}"
        f"; the job says: {job.get('error')}",
    ]


async def _token_check(api: str, key: str) -> list[str]:
    """Made-up tokens from one address until the 429."""
    address = f"127.0.{secrets.randbelow(250) + 1}.{secrets.randbelow(250) + 2}"
    transport = httpx.AsyncHTTPTransport(local_address=address)
    statuses: list[int] = []
    retry_after = None
    async with httpx.AsyncClient(base_url=api, transport=transport, timeout=30) as client:
        for _ in range(3 * AUTH_FAILURES):
            token = f"ic_{secrets.token_hex(4)}_{secrets.token_urlsafe(24)}"
            response = await client.get(
                "/v1/endpoints", headers={"Authorization": f"Bearer {token}"}
            )
            statuses.append(response.status_code)
            if response.status_code == 429:
                retry_after = response.headers.get("retry-after")
                break
        good = await client.get("/v1/endpoints", headers={"Authorization": f"Bearer {key}"})
    refused = statuses.count(401)
    return [
        f"made-up tokens from one address: {refused} refused (401), then "
        f"{statuses[-1]} (Retry-After {retry_after} s); a good key from that address: "
        f"{good.status_code}; limit INFERCOST_AUTH_FAILURES_PER_MINUTE={AUTH_FAILURES}"
    ]


async def _cap_checks(http: httpx.AsyncClient, sim_url: str) -> list[str]:
    """Each cap filled, then one more."""
    out = []

    def said(response: httpx.Response) -> str:
        detail = response.json().get("detail", "") if response.content else ""
        named = next((v for v in CAPS if v in detail), "no variable named")
        return f"{response.status_code} naming {named}"

    endpoints = []
    for n in range(CAPS["INFERCOST_MAX_ENDPOINTS"] + 1):
        response = await http.post(
            "/v1/endpoints",
            json={"name": f"cap-{n}", "base_url": sim_url, "model": "sim-model"},
        )
        if response.status_code == 201:
            endpoints.append(response.json()["id"])
    out.append(f"endpoints past {CAPS['INFERCOST_MAX_ENDPOINTS']}: {said(response)}")
    many = {f"k{i}": "v" for i in range(CAPS["INFERCOST_MAX_TAGS"] + 1)}
    tags = await http.patch(f"/v1/endpoints/{endpoints[0]}", json={"tags": many})
    out.append(f"tags past {CAPS['INFERCOST_MAX_TAGS']}: {said(tags)}")
    long = {"k": "x" * (CAPS["INFERCOST_MAX_TAG_CHARS"] + 1)}
    tag = await http.patch(f"/v1/endpoints/{endpoints[0]}", json={"tags": long})
    out.append(f"a tag past {CAPS['INFERCOST_MAX_TAG_CHARS']} characters: {said(tag)}")
    for n in range(CAPS["INFERCOST_MAX_DATASETS"] + 1):
        response = await http.post(
            "/v1/datasets",
            content=f'{{"prompt": "item {n}"}}\n'.encode(),
            headers={"Content-Type": "application/x-ndjson"},
        )
    out.append(f"datasets past {CAPS['INFERCOST_MAX_DATASETS']}: {said(response)}")
    schedule = {
        "job": {"endpoint_id": endpoints[0], **JOB},
        "when": {"interval_s": 3600},
        "enabled": False,
    }
    for n in range(CAPS["INFERCOST_MAX_SCHEDULES"] + 1):
        response = await http.post("/v1/schedules", json={**schedule, "name": f"s{n}"})
    out.append(f"schedules past {CAPS['INFERCOST_MAX_SCHEDULES']}: {said(response)}")
    for n in range(CAPS["INFERCOST_MAX_TRAFFIC_LOGS"] + 1):
        log = "timestamp,input_tokens,output_tokens\n" + "".join(
            f"2026-11-02T00:00:{s:02d}Z,{100 + n},20\n" for s in range(10)
        )
        response = await http.post(
            "/v1/traffic", content=log.encode(), params={"format": "infercost", "name": f"t{n}"}
        )
    out.append(f"traffic logs past {CAPS['INFERCOST_MAX_TRAFFIC_LOGS']}: {said(response)}")
    return out


async def _trickle(api: str, key: str, body: bytes) -> tuple[str, float]:
    host, port = api.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    t0 = time.monotonic()
    writer.write(
        (
            f"POST /v1/endpoints HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
    )
    answer = bytearray()

    async def read() -> None:
        while chunk := await reader.read(65536):
            answer.extend(chunk)

    reading = asyncio.create_task(read())
    for byte in body:
        if reading.done():
            break
        try:
            writer.write(bytes([byte]))
            await writer.drain()
        except ConnectionError:
            break
        await asyncio.sleep(1.0)
    await asyncio.wait_for(reading, 30)
    writer.close()
    return bytes(answer[:12]).decode("latin-1"), time.monotonic() - t0


async def _trickle_check(api: str, key: str, tricklers: int) -> list[str]:
    """Clients trickling a byte a second, all at once."""
    body = b'{"name": "slow", "base_url": "http://192.0.2.10:8000/v1", "model": "m"}'
    results = await asyncio.gather(*(_trickle(api, key, body) for _ in range(tricklers)))
    codes = sorted({status for status, _ in results})
    held = sorted(t for _, t in results)
    return [
        f"{tricklers} clients trickling a byte a second (a {len(body)}-byte body): answered "
        f"{', '.join(codes)}; connections held median {held[len(held) // 2]:.1f} s, max "
        f"{held[-1]:.1f} s (INFERCOST_BODY_TIMEOUT_S={BODY_TIMEOUT_S:g})"
    ]


async def _one_reason_check(http: httpx.AsyncClient, proxy: PgProxy, sim_url: str) -> list[str]:
    """Postgres away from the worker past the store's retry budget, mid-store."""
    endpoint = (
        await http.post(
            "/v1/endpoints", json={"name": "reason", "base_url": sim_url, "model": "sim-model"}
        )
    ).json()
    proxy.armed = True
    submitted = await http.post("/v1/jobs", json={"endpoint_id": endpoint["id"], **JOB})
    job = await _wait(http, submitted.json()["id"])
    runs = (await http.get(f"/v1/jobs/{job['id']}/runs")).json()
    same = bool(runs) and all(r["error"] == job["error"] for r in runs if r["status"] == "failed")
    return [
        f"Postgres away {proxy.down_s:g} s mid-store (retry budget {STORE_RETRY_S:g} s): job "
        f"{job['status']}, runs {[r['status'] for r in runs]}, one reason on both: {same} "
        f"({job['error']})"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tricklers", type=int, default=50)
    args = parser.parse_args()
    run_checks(args.tricklers)


if __name__ == "__main__":
    main()
