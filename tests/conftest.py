"""Real services for the suite: a fresh database built by the migrations, a Celery queue of
its own on the loopback Redis, an API server, a worker process and a simulated endpoint.

Defaults: Postgres at 127.0.0.1:5432 as user postgres, Redis at 127.0.0.1:6379. Override
with INFERCOST_TEST_PG (a postgresql:// URL of a server, any database) and
INFERCOST_TEST_REDIS (a redis:// URL).

Under pytest-xdist (`pytest -n N`, as `make pytest` runs it) every worker is a session of its
own: its own database, queue, processes, logs (test-artifacts/<worker>/) and data directory.
Ports that tests pick with `free_port` come from a range the kernel never hands out on its
own, reserved in a file shared by every test process on the machine, so two workers (or two
concurrent sessions) never get the same one.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from cryptography.fernet import Fernet
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.db.engine import make_engine, make_sessionmaker
from infercost.db.migrate import upgrade_head
from infercost.figures.metrics import STAT_KEYS, percentile_columns
from infercost.jobs.deployments import DEPLOYMENT_OF_ENDPOINT_SQL
from infercost.net.tls import tls_context
from sim.config import SimConfig
from sim.process import SimProcess, start_sim_process

ROOT = Path(__file__).resolve().parents[1]
PG_SERVER = os.environ.get("INFERCOST_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("INFERCOST_TEST_REDIS", "redis://127.0.0.1:6379/0")
#: This process's xdist worker ("gw0", "gw1", ...), or "" without xdist.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
#: Logs and screenshots: test-artifacts/, or test-artifacts/<worker>/ under xdist.
ARTIFACTS = ROOT / "test-artifacts" / WORKER

#: Ports `free_port` hands out: below the kernel's ephemeral range (32768-60999 on Linux), so
#: no port the kernel picks for a bind to port 0 or an outgoing connection is among them.
PORT_RANGE = (20000, 32000)
#: How long a port handed out stays reserved for the process that asked for it.
PORT_HOLD_S = 900.0
_PORT_REGISTRY = Path(tempfile.gettempdir()) / "infercost-test-ports"


def free_port() -> int:
    """A TCP port free on loopback now and reserved for this caller: no other test process on
    the machine (another xdist worker, another session) gets it in the next PORT_HOLD_S."""
    with _PORT_REGISTRY.open("a+") as registry:
        fcntl.flock(registry, fcntl.LOCK_EX)  # released when the file closes
        registry.seek(0)
        now = time.time()
        held: dict[int, float] = {}
        for line in registry.read().split():
            port, _, until = line.partition("@")
            if port.isdigit() and until and float(until) > now:
                held[int(port)] = float(until)
        for _ in range(1000):
            port = random.randrange(*PORT_RANGE)
            if port in held:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue  # something else listens there
            held[port] = now + PORT_HOLD_S
            registry.seek(0)
            registry.truncate()
            registry.write("\n".join(f"{p}@{t:.0f}" for p, t in held.items()))
            return port
    raise RuntimeError(f"no free port in {PORT_RANGE} after 1000 tries")


def pytest_configure(config: pytest.Config) -> None:
    """Make this process's artifacts directory, where tests write logs and screenshots."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)


#: Files whose tests share no module fixture worth keeping together and are long in sum: under
#: `--dist loadfile` their tests spread over the workers; every other file runs on one worker
#: (its module fixtures built once).
SPREAD = frozenset({"tests/integration/test_cli.py"})

#: The docs pages run on this many workers, each starting one `infercost up` stack for its
#: pages (a stack costs some 20 CPU-seconds to start and keep): the pages, longest first, are
#: dealt to them in turn.
DOCS_FILE = "tests/docs/test_docs_commands.py"
DOCS_STACKS = 2

#: Where the suite keeps how long each unit of work took (pytest's cache, .pytest_cache/):
#: seconds per file, or per docs page, summed over its tests' setup, call and teardown and
#: updated by every run, so the next run starts the longest first.
DURATIONS_KEY = "infercost/durations"


def _path_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _unit(nodeid: str) -> str:
    """What is timed and ordered as one: a docs page, or a file."""
    path = _path_of(nodeid)
    return nodeid if path == DOCS_FILE else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` with the tests of SPREAD files each a unit of their own and the docs
    pages dealt to DOCS_STACKS units. (xdist's loadgroup would do it by markers, but it
    renames node ids, which pytest 9 ignores: a marked group still spreads over the workers.
    `--dist worksteal` hands each worker a run of tests in collection order and lets idle
    ones take the back half of the longest queue, so the docs pages, long and at the front,
    stayed on one worker; docs/benchmarks.md has the figures.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    # xdist would otherwise reorder the work by tests per file, undoing the longest-first order.
    config.option.loadscopereorder = False

    class SpreadSome(LoadFileScheduling):  # type: ignore[misc]
        def __init__(self, config: pytest.Config, log: Any) -> None:
            super().__init__(config, log)
            self.docs_stack: dict[str, str] = {}  # page's node id -> its stack's scope

        def _split_scope(self, nodeid: str) -> str:
            path = _path_of(nodeid)
            if path == DOCS_FILE:  # seen in collection order: longest first
                stacks = self.docs_stack
                return stacks.setdefault(nodeid, f"{path}::stack-{len(stacks) % DOCS_STACKS}")
            return nodeid if path in SPREAD else path

    return SpreadSome(config, log)


#: Units never timed (a fresh checkout) go by kind: the docs pages, then the integration
#: tests (both start services and run jobs), then the rest.
FIRST_UNTIMED = ("tests/docs/", "tests/integration/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest units first, by the durations the last runs kept; units never timed
    after them, by kind (FIRST_UNTIMED). Every xdist worker reads the same record, so all
    collect the same order."""
    cache = getattr(config, "cache", None)
    took: dict[str, float] = cache.get(DURATIONS_KEY, {}) if cache is not None else {}

    def rank(item: pytest.Item) -> tuple[float, int]:
        unit = _unit(item.nodeid)
        kind = next((i for i, p in enumerate(FIRST_UNTIMED) if unit.startswith(p)), 99)
        return -took.get(unit, 0.0), kind

    items.sort(key=rank)  # stable: a file's tests keep their order


_took: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Sum each unit's time (under xdist the controller sees every worker's reports)."""
    _took[_unit(report.nodeid)] = _took.get(_unit(report.nodeid), 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Keep the durations of the units this run ran: an xdist controller's only (`make
    pytest`), as a run of one file or one test would shorten its file's record."""
    config = session.config
    cache = getattr(config, "cache", None)
    on_workers = getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")
    if cache is None or not on_workers or not _took:
        return
    kept: dict[str, float] = cache.get(DURATIONS_KEY, {})
    kept.update({unit: round(seconds, 2) for unit, seconds in _took.items()})
    cache.set(DURATIONS_KEY, kept)


def _pg_url(database: str, driver: str = "postgresql") -> str:
    base, _, _ = PG_SERVER.rpartition("/")
    return f"{base.replace('postgresql', driver, 1)}/{database}"


def _run_sql(sql: str) -> None:
    async def go() -> None:
        conn = await asyncpg.connect(PG_SERVER)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(go())


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A database of its own for this test session, built by running the migrations."""
    name = f"infercost_test_{uuid.uuid4().hex[:10]}"
    try:
        _run_sql(f'CREATE DATABASE "{name}"')
    except OSError as exc:
        pytest.exit(
            f"Postgres is not answering at {PG_SERVER} ({exc}); start it or set INFERCOST_TEST_PG",
            returncode=3,
        )
    url = _pg_url(name, "postgresql+asyncpg")
    try:
        upgrade_head(url)
        yield url
    finally:
        _run_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def service_env(database_url: str) -> dict[str, str]:
    """Environment of every process the tests start: their own queue, keys and admin token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERCOST_")}
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=REDIS,
        INFERCOST_QUEUE=f"test-{uuid.uuid4().hex[:8]}",
        INFERCOST_ADMIN_TOKEN=secrets.token_urlsafe(24),
        INFERCOST_SECRET_KEYS=Fernet.generate_key().decode(),
        INFERCOST_DATA_DIR=str(ROOT / ".infercost-test" / WORKER),
        # Webhook retries after 1, 2, 4 s (four attempts), so retry tests take seconds.
        INFERCOST_WEBHOOK_BACKOFF_S="1",
        INFERCOST_WEBHOOK_MAX_ATTEMPTS="4",
        # The session's maintenance process leaves jobs that tests fake as abandoned to the
        # tests themselves; tests/faults/ runs its own with short bounds.
        INFERCOST_ABANDONED_AFTER_S="900",
        # The simulators and test receivers listen on loopback, refused by default.
        INFERCOST_OUTBOUND_ALLOW="127.0.0.0/8,::1",
        # Most tests register endpoints that are not there (port 9) or that fail on purpose
        # and expect their jobs to run; tests/integration/test_preflight.py checks on demand
        # and runs an API of its own with the check at registration on.
        INFERCOST_PREFLIGHT_ON_REGISTER="0",
        # Tests poll fast with one key; the limit itself is tested on a server of its own
        # (tests/api/test_security.py).
        INFERCOST_RATE_LIMIT_PER_MINUTE="100000",
        # Five xdist sessions share two cores, so the load generator's own pauses expose more
        # than 1% of a level's events on most levels: judged by the default, nearly every
        # level would be client_paused and left out as evidence. Tests of the figures' truth
        # hold them against the simulator's record (tests/truth.py); the rule itself is
        # tested with the default in tests/infercost and tests/workers.
        INFERCOST_PAUSE_EXPOSURE_LIMIT="0.5",
        # Many tests send bad tokens on purpose from this one address; the per-address limit
        # on refused credentials is tested on a server of its own, from an address of its own.
        INFERCOST_AUTH_FAILURES_PER_MINUTE="100000",
    )
    return env


def _log_path(name: str) -> Path:
    return ARTIFACTS / f"{name}.log"


def _log_file(name: str) -> Any:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return _log_path(name).open("wb")


def _stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


def _wait_http(url: str, proc: subprocess.Popen[bytes], name: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=1.0, verify=tls_context()) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode}; see {_log_path(name)}")
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    pytest.fail(f"{name} did not answer {url} within {timeout} s")


@dataclass(frozen=True)
class Api:
    """The running API server."""

    url: str
    admin_token: str


@contextmanager
def running_cli(
    env: dict[str, str], name: str, *args: str, stop_timeout: float = 10.0
) -> Iterator[subprocess.Popen[bytes]]:
    """`infercost <args>` as a subprocess with `env`, logging to test-artifacts/<name>.log;
    stopped (or found already dead) on exit. The one way tests start service processes."""
    with _log_file(name) as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from cli import main; main()", *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        try:
            yield proc
        finally:
            _stop(proc, stop_timeout)


def _still_running(proc: subprocess.Popen[bytes], name: str, settle_s: float) -> None:
    """Fail the test when `proc` has died within `settle_s` of starting (a bad config, an
    import error): processes without a health URL have no other readiness signal."""
    time.sleep(settle_s)
    if proc.poll() is not None:
        pytest.fail(f"{name} exited with {proc.returncode}; see {_log_path(name)}")


@contextmanager
def running_api(env: dict[str, str], name: str, timeout: float = 120.0) -> Iterator[Api]:
    """`infercost api` with `env` on a free port, logging to test-artifacts/<name>.log;
    yields once /health answers (within `timeout` s); stopped on exit."""
    port = free_port()
    with running_cli(env, name, "api", "--port", str(port)) as proc:
        _wait_http(f"http://127.0.0.1:{port}/health", proc, name, timeout=timeout)
        yield Api(f"http://127.0.0.1:{port}", env["INFERCOST_ADMIN_TOKEN"])


@pytest.fixture(scope="session")
def api_server(service_env: dict[str, str]) -> Iterator[Api]:
    """`infercost api` on a free port."""
    # Importing the app takes over 10 s on this shared 2-core box when others test.
    with running_api(service_env, "api", timeout=120.0) as api:
        yield api


@contextmanager
def running_worker(service_env: dict[str, str], name: str) -> Iterator[subprocess.Popen[bytes]]:
    """`infercost worker` as a subprocess on this session's queue, logging to
    test-artifacts/<name>.log; stopped on exit."""
    with running_cli(service_env, name, "worker", stop_timeout=20.0) as proc:
        _still_running(proc, name, 1.0)
        yield proc


@contextmanager
def running_maintenance(
    service_env: dict[str, str], name: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`infercost maintenance` as a subprocess (outbox relay, sweep, webhook courier),
    logging to test-artifacts/<name>.log; stopped on exit."""
    with running_cli(service_env, name, "maintenance", stop_timeout=20.0) as proc:
        _still_running(proc, name, 0.5)
        yield proc


@pytest.fixture(scope="session")
def maintenance(service_env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """`infercost maintenance` for this session: it delivers webhooks and sweeps jobs."""
    with running_maintenance(service_env, "maintenance") as proc:
        yield proc


@pytest.fixture(scope="session")
def worker(
    service_env: dict[str, str], maintenance: subprocess.Popen[bytes]
) -> Iterator[subprocess.Popen[bytes]]:
    """`infercost worker`: a real Celery worker process consuming this session's queue, with
    the maintenance process beside it as in production."""
    with running_worker(service_env, "worker") as proc:
        yield proc


@pytest.fixture(scope="session")
def sim() -> Iterator[SimProcess]:
    """`infercost sim --mode fixed --ttft-ms 50 --itl-ms 10` on a free loopback port."""
    proc = start_sim_process(SimConfig(port=0, ttft_ms=50.0, itl_ms=10.0, model="sim-model"))
    try:
        yield proc
    finally:
        proc.stop()


@dataclass
class TeamClient:
    """An HTTP client authenticated as a fresh team, plus that team's id."""

    http: httpx.AsyncClient
    team_id: str
    key: str

    async def create_endpoint(self, **overrides: Any) -> dict[str, Any]:
        """Register an endpoint (a simulator by default) and return it."""
        body: dict[str, Any] = {
            "name": f"ep-{uuid.uuid4().hex[:6]}",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "sim-model",
            "hardware": "H200-SXM",
            "usd_per_hour": 3.5,
        }
        body.update(overrides)
        response = await self.http.post("/v1/endpoints", json=body)
        assert response.status_code == 201, response.text
        return dict(response.json())

    async def submit(self, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        """POST /v1/jobs."""
        return await self.http.post("/v1/jobs", json=body, **kwargs)

    async def wait_job(self, job_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """Poll a job until it leaves queued/running; return its last state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = (await self.http.get(f"/v1/jobs/{job_id}")).json()
            if job["status"] not in ("queued", "running"):
                return dict(job)
            await asyncio.sleep(0.3)
        pytest.fail(f"job {job_id} still {job['status']} after {timeout} s")

    async def run_job(self, body: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
        """Submit a job, wait for it and check it succeeded; return its final state."""
        response = await self.submit(body)
        assert response.status_code == 202, response.text
        job = await self.wait_job(response.json()["id"], timeout=timeout)
        assert job["status"] == "succeeded", job["error"]
        return job

    async def judged_runs(self, job: dict[str, Any], timeout: float = 30.0) -> list[dict[str, Any]]:
        """The finished job's runs once each succeeded one has its `change`: the worker judges
        them just after it stores the job's status, so a job read as it ends may show
        `change: null` for a moment (docs/comparisons.md)."""
        deadline = time.monotonic() + timeout
        while True:
            runs = [(await self.http.get(f"/v1/runs/{r['id']}")).json() for r in job["runs"]]
            if all(r["change"] is not None for r in runs if r["status"] == "succeeded"):
                return runs
            if time.monotonic() > deadline:
                pytest.fail(f"the runs of job {job['id']} got no change within {timeout} s")
            await asyncio.sleep(0.2)

    async def samples(self, run_id: str) -> list[dict[str, Any]]:
        """Every request sample of a run, in one page."""
        page = (await self.http.get(f"/v1/runs/{run_id}/requests", params={"limit": 5000})).json()
        assert page["next_after"] is None
        return list(page["items"])

    async def add_price(self, **fields: Any) -> dict[str, Any]:
        """Add a price book entry (acme-cloud's on-demand H200-SXM at 3.5 unless `fields`
        say otherwise) and return it."""
        body: dict[str, Any] = {
            "provider": "acme-cloud",
            "hardware": "H200-SXM",
            "pricing_model": "on-demand",
            "usd_per_gpu_hour": 3.5,
        }
        body.update(fields)
        response = await self.http.post("/v1/prices", json=body)
        assert response.status_code == 201, response.text
        return dict(response.json())


@pytest.fixture
async def admin(api_server: Api) -> AsyncIterator[httpx.AsyncClient]:
    """A client holding the admin token."""
    headers = {"Authorization": f"Bearer {api_server.admin_token}"}
    async with httpx.AsyncClient(
        base_url=api_server.url, headers=headers, timeout=30, verify=tls_context()
    ) as client:
        yield client


@pytest.fixture
async def new_team(api_server: Api, admin: httpx.AsyncClient) -> AsyncIterator[Callable[..., Any]]:
    """A factory of fresh teams, each with its own key and client."""
    clients: list[httpx.AsyncClient] = []

    async def make() -> TeamClient:
        team = (await admin.post("/v1/teams", json={"name": f"team-{uuid.uuid4().hex[:8]}"})).json()
        key = (await admin.post(f"/v1/teams/{team['id']}/keys", json={"name": "test"})).json()
        http = httpx.AsyncClient(
            base_url=api_server.url,
            headers={"Authorization": f"Bearer {key['key']}"},
            timeout=30,
            verify=tls_context(),
        )
        clients.append(http)
        return TeamClient(http=http, team_id=team["id"], key=key["key"])

    yield make
    for client in clients:
        await client.aclose()


@pytest.fixture
async def team(new_team: Callable[..., Any]) -> TeamClient:
    """One fresh team."""
    client: TeamClient = await new_team()
    return client


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A direct connection to the test database, to check what was stored."""
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """SQLAlchemy sessions on the test database, as the API and the worker open them."""
    engine = make_engine(database_url)
    try:
        yield make_sessionmaker(engine)
    finally:
        await engine.dispose()


def sample_spans(rows: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """Each sample's (send, end) in seconds on its run's clock: t_send to t_send + e2e."""
    return [(r["t_send"], r["t_send"] + r["e2e_ms"] / 1000.0) for r in rows]


def inflight_at_sends(rows: list[dict[str, Any]]) -> int:
    """The most requests in flight at any send, from the samples alone (one that ends
    exactly as another starts is not counted twice)."""
    spans = sample_spans(rows)
    return max(sum(1 for s, e in spans if s <= at < e) for at, _ in spans)


async def insert_finished_run(
    db: asyncpg.Connection, team_id: str, endpoint_id: str, **columns: Any
) -> tuple[str, str]:
    """A succeeded job with one finished run, written straight to the database.

    For tests of reads (tenancy, re-pricing) that need a stored run but no worker: nothing
    is enqueued, so no worker can pick the job up and race the insert. Returns (job, run).
    `columns` may also set the run's level, mode and status (default 1, concurrency,
    succeeded); JSONB columns (stats, telemetry) take JSON text.
    """
    team, endpoint = uuid.UUID(team_id), uuid.UUID(endpoint_id)
    job_id = await db.fetchval(
        "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, progress_done,"
        " progress_total, created_at, finished_at)"
        " VALUES (gen_random_uuid(), $1, $2, 'succeeded', '{}', '{\"mode\": \"concurrency\"}',"
        " 0, 0, now(), now()) RETURNING id",
        team,
        endpoint,
    )
    # The deployment the endpoint describes now, as the worker records it for a run.
    deployment_id = await db.fetchval(DEPLOYMENT_OF_ENDPOINT_SQL, endpoint)
    # The percentile columns from the stats given, as JobRepository.update_run writes them
    # (a column given explicitly wins).
    stats = columns.get("stats")
    derived = percentile_columns(json.loads(stats)) if isinstance(stats, str) else {}
    values = {
        **derived,
        "deployment_id": deployment_id,
        "level": 1.0,
        "mode": "concurrency",
        "status": "succeeded",
        "requests_total": 0,
        "requests_succeeded": 0,
        "requests_failed": 0,
        **columns,
    }
    names = ", ".join(values)
    params = ", ".join(f"${i}" for i in range(4, 4 + len(values)))
    run_id = await db.fetchval(
        f"INSERT INTO runs (id, team_id, job_id, endpoint_id, level_index, created_at, {names})"
        f" VALUES (gen_random_uuid(), $1, $2, $3, 0, now(), {params}) RETURNING id",
        team,
        job_id,
        endpoint,
        *values.values(),
    )
    return str(job_id), str(run_id)


#: A stored level: (level, requests/s, TTFT p95 ms, adequacy verdict or None, client_bound).
StoredLevel = tuple[float, float, float, dict[str, Any] | None, bool]
#: The verdict of a level that is adequate evidence.
ADEQUATE: dict[str, Any] = {"ok": True, "reasons": []}


async def insert_finished_job(
    db: asyncpg.Connection,
    team_id: str,
    endpoint_id: str,
    levels: list[StoredLevel],
    *,
    slo: dict[str, Any],
    input_tokens: int = 100,
    output_tokens: int = 100,
) -> tuple[str, list[str]]:
    """A succeeded concurrency job with `slo`, of requests of `input_tokens` in and
    `output_tokens` out, finished five minutes ago, written straight to the database with one
    run per StoredLevel (300 requests each, USD 2/hour): for reads of capacity and estimates
    over figures chosen by hand. Returns (job id, run ids in level order)."""
    team, endpoint = uuid.UUID(team_id), uuid.UUID(endpoint_id)
    workload = {"input_tokens": {"mean": input_tokens}, "output_tokens": {"mean": output_tokens}}
    load = {"mode": "concurrency", "levels": [lv[0] for lv in levels]}
    job_id = await db.fetchval(
        "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, slo,"
        " progress_done, progress_total, created_at, started_at, finished_at)"
        " VALUES (gen_random_uuid(), $1, $2, 'succeeded', $3, $4, $5, 0, 0, now(), now(),"
        " now()) RETURNING id",
        team,
        endpoint,
        json.dumps(workload),
        json.dumps(load),
        json.dumps(slo),
    )
    deployment_id = await db.fetchval(DEPLOYMENT_OF_ENDPOINT_SQL, endpoint)
    finished = datetime.now(UTC) - timedelta(minutes=5)
    run_ids = []
    for index, (level, rps, ttft_p95, adequacy, client_bound) in enumerate(levels):
        run_id = await db.fetchval(
            "INSERT INTO runs (id, team_id, job_id, endpoint_id, deployment_id, level_index,"
            " level, mode, status, requests_total, requests_succeeded, requests_failed,"
            " requests_per_s, output_tokens_per_s, input_tokens_per_s, error_rate, ttft_p95_ms,"
            " stats, adequacy, client_bound, usd_per_hour, created_at, started_at, finished_at)"
            " VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, $6, 'concurrency', 'succeeded',"
            " 300, 300, 0, $7, $8, $9, 0, $10, $11, $12, $13, 2.0, now(), $14, $14)"
            " RETURNING id",
            team,
            job_id,
            endpoint,
            deployment_id,
            index,
            level,
            rps,
            rps * output_tokens,
            rps * input_tokens,
            ttft_p95,
            json.dumps({"ttft_ms": {**dict.fromkeys(STAT_KEYS), "count": 300, "p95": ttft_p95}}),
            None if adequacy is None else json.dumps(adequacy),
            client_bound,
            finished,
        )
        run_ids.append(str(run_id))
    return str(job_id), run_ids
