"""Processes for fault tests: an API, a maintenance process and workers on a queue of their
own, with short bounds (a worker silent for 10 s is dead, a queued job unclaimed for 3 s is
sent again), and a TCP proxy the test controls between a worker and Postgres."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from infercost.db.migrate import upgrade_head
from tests.conftest import (
    TeamClient,
    _pg_url,
    _run_sql,
    running_api,
    running_cli,
    running_maintenance,
)

#: The bounds these tests configure (and the README quotes their figures).
ABANDONED_AFTER_S = 10.0
REQUEUE_AFTER_S = 3.0
MAINTENANCE_EVERY_S = 1.0


@pytest.fixture(scope="module")
def fault_database_url() -> Iterator[str]:
    """A database of this module's own, built by the migrations: the processes here share
    nothing with the session's (whose maintenance would otherwise relay these jobs)."""
    name = f"infercost_faults_{uuid.uuid4().hex[:10]}"
    _run_sql(f'CREATE DATABASE "{name}"')
    try:
        url = _pg_url(name, "postgresql+asyncpg")
        upgrade_head(url)
        yield url
    finally:
        _run_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def fault_db(fault_database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A direct connection to this module's database."""
    conn = await asyncpg.connect(fault_database_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def fault_env(service_env: dict[str, str], fault_database_url: str) -> dict[str, str]:
    """The session's environment with a database and a queue of its own, and short bounds."""
    return {
        **service_env,
        "DATABASE_URL": fault_database_url,
        "INFERCOST_QUEUE": f"faults-{uuid.uuid4().hex[:8]}",
        "INFERCOST_ABANDONED_AFTER_S": str(ABANDONED_AFTER_S),
        "INFERCOST_REQUEUE_AFTER_S": str(REQUEUE_AFTER_S),
        "INFERCOST_MAINTENANCE_EVERY_S": str(MAINTENANCE_EVERY_S),
        "INFERCOST_STORE_RETRY_S": "8",
    }


@pytest.fixture(scope="module")
def fault_api(fault_env: dict[str, str]) -> Iterator[str]:
    """`infercost api` sending to the fault queue; yields its base URL."""
    # Starting the app takes over 30 s on a loaded 2-core machine (as the session API notes).
    with running_api(fault_env, "faults-api", timeout=120.0) as api:
        yield api.url


@pytest.fixture(scope="module")
def fault_maintenance(fault_env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """`infercost maintenance` with the short bounds."""
    with running_maintenance(fault_env, "faults-maintenance") as proc:
        yield proc


@pytest.fixture
async def fault_team(fault_api: str, fault_env: dict[str, str]) -> AsyncIterator[TeamClient]:
    """A fresh team on the fault API."""
    admin = {"Authorization": f"Bearer {fault_env['INFERCOST_ADMIN_TOKEN']}"}
    async with httpx.AsyncClient(base_url=fault_api, headers=admin, timeout=30) as client:
        team = (await client.post("/v1/teams", json={"name": f"f-{uuid.uuid4().hex[:8]}"})).json()
        key = (await client.post(f"/v1/teams/{team['id']}/keys", json={"name": "t"})).json()
    headers = {"Authorization": f"Bearer {key['key']}"}
    async with httpx.AsyncClient(base_url=fault_api, headers=headers, timeout=30) as http:
        yield TeamClient(http=http, team_id=team["id"], key=key["key"])


@contextlib.contextmanager
def worker_process(env: dict[str, str], name: str) -> Iterator[subprocess.Popen[bytes]]:
    """`infercost worker` with `env`, logging to test-artifacts/<name>.log; stopped (or
    already killed) on exit. Unlike running_worker it yields at once, without the settle
    check, since tests here kill it on purpose."""
    with running_cli(env, name, "worker", stop_timeout=20.0) as proc:
        yield proc


class PgProxy:
    """A TCP proxy to Postgres on a thread of its own. Armed, it cuts every connection the
    moment a client sends a COPY into request_samples (so that statement never arrives)
    and refuses new connections for `down_s`: a database blip in the middle of a store."""

    def __init__(self, target: tuple[str, int], down_s: float) -> None:
        self.target = target
        self.down_s = down_s
        self.armed = False
        self.cuts = 0
        self.cut_at = 0.0  # time.time() of the last cut
        self.refused = 0
        self._down_until = 0.0
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    def __enter__(self) -> PgProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *_: Any) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0, family=socket.AF_INET)
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if time.monotonic() < self._down_until:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, watch: bool) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await src.read(65536):
                    if watch and self.armed and b"COPY" in data and b"request_samples" in data:
                        self.armed = False
                        self._cut()
                        return
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))
        self._pairs.discard(pair)

    def _cut(self) -> None:
        self.cuts += 1
        self.cut_at = time.time()
        self._down_until = time.monotonic() + self.down_s
        for client, upstream in list(self._pairs):
            client.transport.abort()
            upstream.transport.abort()
