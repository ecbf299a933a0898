"""An operator's findings (issue 11), each reproduced against the real API: URLs that point
at metadata services or hold credentials, deeply nested JSON, client mistakes that used to
answer 500 or 503, formula injection in CSV, wildcard hardware names, unbounded plans, and
the per-key rate limit and team caps (on an API of their own with tiny limits)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import random
import secrets
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from api.app import create_app
from infercost.settings import Settings
from tests.asgi import serve_with_hooks
from tests.conftest import TeamClient, free_port, insert_finished_run

pytestmark = pytest.mark.integration

PROBLEM = "application/problem+json"
DEEP = "[" * 1000 + "]" * 1000


def endpoint_body(**fields: Any) -> dict[str, Any]:
    body = {"name": f"ep-{uuid.uuid4().hex[:6]}", "base_url": "http://10.0.0.5:8000/v1"}
    return {**body, "model": "m", **fields}


def job_body(endpoint_id: str, **load: Any) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 4}},
        "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 10, **load},
    }


def assert_problem(response: httpx.Response, status: int, *phrases: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    problem: dict[str, Any] = response.json()
    for phrase in phrases:
        assert phrase in problem["detail"], problem
    return problem


# -- where URLs may point


@pytest.mark.parametrize(
    ("fields", "field", "phrase"),
    [
        ({"base_url": "http://169.254.169.254/latest/v1"}, "base_url", "cloud metadata"),
        ({"base_url": "http://[fd00:ec2::254]/v1"}, "base_url", "cloud metadata"),
        (
            {"metrics_urls": ["http://metadata.google.internal/computeMetadata/v1/"]},
            "metrics_urls[0]",
            "cloud metadata service",
        ),
        ({"base_url": "http://10.0.0.5/v1\r\nX-Injected: 1"}, "base_url", "control characters"),
        ({"metrics_urls": ["http://10.0.0.5/metrics\n"]}, "metrics_urls[0]", "control"),
        ({"base_url": "ftp://10.0.0.5/v1"}, "base_url", "http://"),
    ],
)
async def test_endpoint_urls_are_checked_on_create(
    team: TeamClient, fields: dict[str, Any], field: str, phrase: str
) -> None:
    response = await team.http.post("/v1/endpoints", json=endpoint_body(**fields))
    problem = assert_problem(response, 422, f"{field}: ", phrase)
    assert problem["errors"][0]["field"] == field
    assert (await team.http.get("/v1/endpoints")).json()["total"] == 0


async def test_credentials_in_a_url_are_refused_and_never_echoed(team: TeamClient) -> None:
    response = await team.http.post(
        "/v1/endpoints", json=endpoint_body(base_url="http://admin:hunter2@10.0.0.5:8000/v1")
    )
    assert_problem(response, 422, "base_url", "put the key in api_key")
    assert "hunter2" not in response.text
    hook = await team.http.post("/v1/webhooks", json={"url": "https://u:s3cret@10.0.0.9/h"})
    assert_problem(hook, 422, "url: ", "credentials")
    assert "s3cret" not in hook.text


async def test_patch_checks_urls_too(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    for change, field in (
        ({"base_url": "http://169.254.169.254/v1"}, "base_url"),
        ({"metrics_urls": ["http://10.0.0.5/m", "http://100.100.100.200/m"]}, "metrics_urls[1]"),
    ):
        response = await team.http.patch(f"/v1/endpoints/{endpoint['id']}", json=change)
        assert_problem(response, 422, f"{field}: ", "metadata")
    unchanged = (await team.http.get(f"/v1/endpoints/{endpoint['id']}")).json()
    assert unchanged["base_url"] == endpoint["base_url"]
    assert unchanged["metrics_urls"] == []


async def test_loopback_is_allowed_where_the_allowlist_says(team: TeamClient) -> None:
    # The tests' INFERCOST_OUTBOUND_ALLOW is 127.0.0.0/8,::1 (tests/conftest.py).
    created = await team.create_endpoint(
        base_url="http://[::1]:9/v1", metrics_urls=["http://127.0.0.1:9/metrics"]
    )
    assert created["base_url"] == "http://[::1]:9/v1"


async def test_too_many_metrics_urls(team: TeamClient) -> None:
    urls = [f"http://10.0.0.{i % 250 + 1}:8000/metrics" for i in range(10_000)]
    response = await team.http.post("/v1/endpoints", json=endpoint_body(metrics_urls=urls))
    assert_problem(response, 422, "metrics_urls: 10000 URLs", "limit of 8", "MAX_METRICS_URLS")
    eight = urls[:8]
    created = await team.http.post("/v1/endpoints", json=endpoint_body(metrics_urls=eight))
    assert created.status_code == 201, created.text


@pytest.mark.parametrize(
    ("url", "phrase"),
    [
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://metadata.google.internal/", "cloud metadata service"),
        ("http://10.0.0.9/hooks\r\nX: 1", "control characters"),
    ],
)
async def test_webhook_urls_are_checked(team: TeamClient, url: str, phrase: str) -> None:
    response = await team.http.post("/v1/webhooks", json={"url": url})
    assert_problem(response, 422, "url: ", phrase)
    # An internal portal is a fine receiver.
    internal = await team.http.post("/v1/webhooks", json={"url": "http://10.20.30.40/hooks"})
    assert internal.status_code == 201, internal.text


# -- bad input answers a clear 4xx


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/endpoints", '{"name": "x", "base_url": "http://h/v1", "model": "m", "tags": %s}'),
        ("/v1/jobs", '{"endpoint_id": %s}'),
        ("/v1/webhooks", '{"url": "http://10.0.0.9/", "description": %s}'),
        ("/v1/estimates", '{"model": %s}'),
    ],
)
async def test_deeply_nested_json_is_400(team: TeamClient, path: str, body: str) -> None:
    response = await team.http.post(
        path, content=(body % DEEP).encode(), headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 400, "nested more than 32 levels")


async def test_deeply_nested_dataset_line_names_the_line(team: TeamClient) -> None:
    lines = [
        json.dumps({"prompt": "fine"}),
        json.dumps({"messages": [{"role": "user", "content": "x"}], "max_tokens": 4})[:-1]
        + ', "extra": '
        + DEEP
        + "}",
    ]
    response = await team.http.post(
        "/v1/datasets",
        content="\n".join(lines).encode(),
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert 400 <= response.status_code < 500, response.text
    assert "line 2" in response.json()["detail"]
    assert "nested more than 32 levels" in response.json()["detail"]


async def test_dataset_max_tokens_is_bounded(team: TeamClient) -> None:
    line = json.dumps({"prompt": "x", "max_tokens": 2**70})
    response = await team.http.post(
        "/v1/datasets", content=line.encode(), headers={"Content-Type": "application/x-ndjson"}
    )
    assert 400 <= response.status_code < 500, response.text
    assert "max_tokens" in response.json()["detail"]
    assert "1,000,000" in response.json()["detail"]


LISTS = [
    "/v1/endpoints",
    "/v1/jobs",
    "/v1/webhooks",
    "/v1/prices",
    "/v1/datasets",
    "/v1/comparisons",
]


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize(
    "params",
    [
        {"limit": -1},
        {"limit": 0},
        {"limit": 501},
        {"limit": 1_000_000},
        {"offset": -1},
        {"offset": 2**63},
        {"offset": 2**70},
    ],
)
async def test_list_paging_is_bounded(team: TeamClient, path: str, params: dict[str, int]) -> None:
    response = await team.http.get(path, params=params)
    (name,) = params
    assert_problem(response, 422, name)


@pytest.mark.parametrize("path", LISTS)
async def test_the_largest_page_is_accepted(team: TeamClient, path: str) -> None:
    response = await team.http.get(path, params={"limit": 500, "offset": 2**31 - 1})
    assert response.status_code == 200, response.text


async def test_sample_cursor_is_bounded(team: TeamClient) -> None:
    path = f"/v1/runs/{uuid.uuid4()}/requests"
    assert_problem(await team.http.get(path, params={"after": 99_999_999_999}), 422, "after")
    # In range, the cursor reaches the lookup (404 for a run that does not exist).
    assert (await team.http.get(path, params={"after": 5})).status_code == 404


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/v1/prices", {"provider": "acme\x00cloud"}),
        ("/v1/prices", {"hardware": "H200\x00"}),
        ("/v1/comparisons", {"model": "llama\x00"}),
        ("/v1/jobs", {"status": "queued\x00"}),
    ],
)
async def test_nul_bytes_in_filters_are_400(
    team: TeamClient, path: str, params: dict[str, str]
) -> None:
    assert_problem(await team.http.get(path, params=params), 400, "NUL")


async def test_a_value_the_database_refuses_is_422_not_503(team: TeamClient) -> None:
    # No schema rule forbids a NUL inside a model name; Postgres does (SQLSTATE 22021).
    response = await team.http.post("/v1/endpoints", json=endpoint_body(model="llama\x00"))
    assert_problem(response, 422, "refused a value")


@pytest.mark.parametrize(
    ("changes", "field", "hint"),
    [
        ({"levels": [1e-4]}, "load.levels[0]", ">= 0.001"),
        ({"levels": [1e-300]}, "load.levels[0]", ">= 0.001"),
        ({"levels": [1e9]}, "load.levels[0]", "<= 100000"),
    ],
)
async def test_rate_levels_are_bounded(
    team: TeamClient, changes: dict[str, Any], field: str, hint: str
) -> None:
    endpoint = await team.create_endpoint()
    response = await team.submit(job_body(endpoint["id"], mode="rate", **changes))
    assert_problem(response, 422, field, hint)


async def test_workload_numbers_are_bounded(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    body = job_body(endpoint["id"])
    body["workload"]["seed"] = -1
    assert_problem(await team.submit(body), 422, "workload.seed", ">= 0")
    body = job_body(endpoint["id"])
    body["workload"]["input_tokens"] = {"mean": 8, "max": 2**40}
    assert_problem(await team.submit(body), 422, "workload.input_tokens.max", "<= 1000000")


# -- caps on what one plan asks for


async def test_requests_per_job_are_capped(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    # Two levels of 1,000,000 requests and 10 warm-up each: 2,000,020 requests.
    response = await team.submit(
        job_body(endpoint["id"], levels=[1, 2], requests_per_level=1_000_000, warmup_requests=10)
    )
    assert_problem(
        response, 422, "load: ", "about 2,000,020 requests", "INFERCOST_MAX_REQUESTS_PER_JOB"
    )


async def test_planned_duration_is_capped(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    # 100 requests at 0.001 requests/s: 100,000 s, 27.8 h, over the 24 h default.
    slow = job_body(endpoint["id"], mode="rate", levels=[0.001], requests_per_level=100)
    assert_problem(
        await team.submit(slow), 422, "about 27.8 h (100,000 s", "INFERCOST_MAX_JOB_DURATION_S"
    )
    # Three 10 h levels of fixed duration with 30 min of cool-down after each: 31.5 h.
    long = job_body(endpoint["id"], levels=[1, 2, 4], duration_s=36_000, cooldown_s=1_800)
    del long["load"]["requests_per_level"]
    assert_problem(await team.submit(long), 422, "about 31.5 h (113,400 s")


# -- CSV exports and hardware names


async def test_csv_cells_cannot_carry_formulas(team: TeamClient, db: asyncpg.Connection) -> None:
    payload = "=cmd|' /C calc'!A0"
    endpoint = await team.create_endpoint(model=payload, engine="-1+1", hardware="H200-SXM")
    finished = datetime.now(UTC) - timedelta(minutes=5)
    await insert_finished_run(
        db,
        team.team_id,
        endpoint["id"],
        level=4.0,
        output_tokens_per_s=-0.5,  # a negative figure must stay a number
        finished_at=finished,
        started_at=finished - timedelta(minutes=1),
        slo_passed=True,
        client_bound=False,
        workload_fingerprint="aaaaaaaaaaaaaaaa",
    )
    response = await team.http.get(
        "/v1/comparisons",
        params={"figures": "output_tokens_per_s"},
        headers={"Accept": "text/csv"},
    )
    assert response.status_code == 200, response.text
    (row,) = list(csv.DictReader(io.StringIO(response.text)))
    assert row["model"] == "'" + payload
    assert row["engine"] == "'-1+1"
    assert row["hardware"] == "H200-SXM"
    assert row["output_tokens_per_s"] == "-0.5"


async def test_hardware_names_match_exactly(team: TeamClient) -> None:
    for name in ("H%", "H200%", "_200-SXM", "%"):
        response = await team.http.post("/v1/endpoints", json=endpoint_body(hardware=name))
        assert_problem(response, 422, f"unknown hardware '{name}'")
    any_case = await team.create_endpoint(hardware="h200-sxm")
    assert any_case["hardware"] == "H200-SXM"


# -- the rate limit and team caps, on an API with tiny limits

RATE_LIMIT = 8
AUTH_FAILURES = 5


@pytest.fixture
async def tiny_api(service_env: dict[str, str]) -> AsyncIterator[str]:
    """The API in this process with a rate limit of 8 requests a minute per key, 2 active
    jobs and 2 webhooks per team, on a queue no worker reads (its jobs stay queued)."""
    settings = dataclasses.replace(
        Settings.from_env(service_env),
        rate_limit_per_minute=RATE_LIMIT,
        auth_failures_per_minute=AUTH_FAILURES,
        max_active_jobs=2,
        max_webhooks=2,
        queue=f"test-tiny-{uuid.uuid4().hex[:8]}",
    )
    app = create_app(settings)
    async with serve_with_hooks(app) as url:
        yield url


def fresh_address() -> str:
    """An address of 127.0.0.0/8 no other test uses: refused credentials are counted per
    address in the shared Redis, so 127.0.0.1 may carry other tests' failures this minute,
    which the tiny API's limit of 5 would refuse."""
    return f"127.{random.randrange(1, 250)}.{random.randrange(1, 250)}.{random.randrange(2, 250)}"


def client_of(url: str, key: str) -> httpx.AsyncClient:
    return from_address(url, fresh_address(), key)


async def test_rate_limit_per_key(tiny_api: str, new_team: Any) -> None:
    first: TeamClient = await new_team()
    second: TeamClient = await new_team()
    async with client_of(tiny_api, first.key) as a, client_of(tiny_api, second.key) as b:
        statuses = []
        # The window is a fixed minute: should it turn during the loop, the count restarts,
        # so up to twice the limit may pass before the 429.
        for _ in range(2 * RATE_LIMIT + 1):
            response = await a.get("/v1/endpoints")
            statuses.append(response.status_code)
            if response.status_code == 429:
                break
        assert statuses[-1] == 429, statuses
        assert statuses.count(200) >= RATE_LIMIT
        problem = assert_problem(response, 429, "more than 8 requests", "RATE_LIMIT_PER_MINUTE")
        assert problem["title"] == "Too many requests"
        assert 1 <= int(response.headers["retry-after"]) <= 60
        # Another key is counted on its own; health is never counted.
        assert (await b.get("/v1/endpoints")).status_code == 200
        assert (await a.get("/health")).status_code == 200


def from_address(url: str, address: str, key: str) -> httpx.AsyncClient:
    """A client of `url` whose connections come from `address` (any of 127.0.0.0/8 on
    Linux), so its refused credentials are counted apart from every other test's."""
    return httpx.AsyncClient(
        base_url=url,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
        transport=httpx.AsyncHTTPTransport(local_address=address),
    )


async def test_made_up_tokens_from_one_address_are_limited(tiny_api: str, team: TeamClient) -> None:
    address = fresh_address()
    statuses = []
    # The window is a fixed minute: should it turn during the loop, the count restarts.
    for _ in range(2 * AUTH_FAILURES + 1):
        # A new made-up token every time: each would have a rate bucket of its own.
        token = f"ic_{secrets.token_hex(4)}_{secrets.token_urlsafe(24)}"
        async with from_address(tiny_api, address, token) as guess:
            response = await guess.get("/v1/endpoints")
        statuses.append(response.status_code)
        if response.status_code == 429:
            break
    assert statuses[-1] == 429, statuses
    assert statuses.count(401) >= AUTH_FAILURES, statuses
    assert set(statuses[:-1]) == {401}, statuses
    assert_problem(response, 429, "were refused their credentials", "AUTH_FAILURES_PER_MINUTE")
    assert 1 <= int(response.headers["retry-after"]) <= 60
    # Until the minute ends the address is refused whatever it sends, a good key too...
    async with from_address(tiny_api, address, team.key) as same:
        assert (await same.get("/v1/endpoints")).status_code == 429
    # ...while another address with a good key is served.
    async with client_of(tiny_api, team.key) as other:
        assert (await other.get("/v1/endpoints")).status_code == 200


async def test_active_jobs_and_webhooks_are_capped_per_team(tiny_api: str, new_team: Any) -> None:
    team: TeamClient = await new_team()
    endpoint = await team.create_endpoint()
    async with client_of(tiny_api, team.key) as http:
        body = job_body(endpoint["id"])
        first = await http.post("/v1/jobs", json=body, headers={"Idempotency-Key": "one"})
        assert first.status_code == 202, first.text
        assert (await http.post("/v1/jobs", json=body)).status_code == 202
        third = await http.post("/v1/jobs", json=body)
        assert_problem(third, 409, "already has 2 jobs queued or running", "MAX_ACTIVE_JOBS=2")
        # A replay of a job already made is not a new job.
        again = await http.post("/v1/jobs", json=body, headers={"Idempotency-Key": "one"})
        assert again.status_code == 200, again.text
        # Once one ends, the team may submit again.
        cancelled = await http.post(f"/v1/jobs/{first.json()['id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert (await http.post("/v1/jobs", json=body)).status_code == 202
    # Read on the suite's API: this key made 6 of its 8 requests a minute above.
    queued = await team.http.get("/v1/jobs", params={"status": "queued"})
    assert queued.json()["total"] == 2, "a refused job was stored"
    async with client_of(tiny_api, (await new_team()).key) as other:
        for n in range(2):
            hook = await other.post("/v1/webhooks", json={"url": f"http://10.0.0.{n + 1}/h"})
            assert hook.status_code == 201, hook.text
        third_hook = await other.post("/v1/webhooks", json={"url": "http://10.0.0.3/h"})
        assert_problem(third_hook, 409, "has 2 webhooks", "INFERCOST_MAX_WEBHOOKS=2")


async def test_requests_pass_when_the_rate_limits_redis_is_down(
    service_env: dict[str, str], team: TeamClient
) -> None:
    """The limit protects the service and must not take it down: with its Redis refusing
    connections, requests are served (and the API logs that it could not count them)."""
    settings = dataclasses.replace(
        Settings.from_env(service_env),
        rate_limit_per_minute=1,
        redis_url=f"redis://127.0.0.1:{free_port()}/0",
        queue=f"test-tiny-{uuid.uuid4().hex[:8]}",
    )
    app = create_app(settings)
    async with serve_with_hooks(app) as url, client_of(url, team.key) as http:
        statuses = [(await http.get("/v1/endpoints")).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
