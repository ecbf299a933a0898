"""Per-team caps on what a team keeps (infercost/teams/caps.py), on an API of its own with
tiny caps: endpoints, datasets, schedules, traffic logs, and an endpoint's tags; each refusal
is a 422 naming its variable, each counted per team, and deleting one makes room."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from api.app import create_app
from infercost.settings import Settings
from tests.asgi import serve_with_hooks
from tests.conftest import TeamClient
from tests.traffic_files import infercost_csv

pytestmark = pytest.mark.integration

PROBLEM = "application/problem+json"


@pytest.fixture
async def capped_api(service_env: dict[str, str]) -> AsyncIterator[str]:
    """The API in this process with tiny caps (2 endpoints, 1 dataset, 1 schedule, 1 traffic
    log of at most 4 kB, 3 tags of at most 10 characters), on a queue no worker reads."""
    settings = dataclasses.replace(
        Settings.from_env(service_env),
        max_endpoints=2,
        max_datasets=1,
        max_schedules=1,
        max_traffic_logs=1,
        max_traffic_bytes=4096,
        max_tags=3,
        max_tag_chars=10,
        queue=f"test-caps-{uuid.uuid4().hex[:8]}",
    )
    app = create_app(settings)
    async with serve_with_hooks(app) as url:
        yield url


@pytest.fixture
async def http(capped_api: str, team: TeamClient) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=capped_api, headers={"Authorization": f"Bearer {team.key}"}, timeout=30
    ) as client:
        yield client


def refused(response: httpx.Response, status: int, *phrases: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    detail = response.json()["detail"]
    for phrase in phrases:
        assert phrase in detail, detail


def endpoint(**fields: Any) -> dict[str, Any]:
    return {
        "name": f"ep-{uuid.uuid4().hex[:6]}",
        "base_url": "http://192.0.2.10:8000/v1",
        "model": "sim-model",
        "usd_per_hour": 1.0,
        **fields,
    }


async def test_endpoints_are_capped_and_a_delete_makes_room(
    http: httpx.AsyncClient, new_team: Any
) -> None:
    first = await http.post("/v1/endpoints", json=endpoint())
    assert first.status_code == 201, first.text
    assert (await http.post("/v1/endpoints", json=endpoint())).status_code == 201
    third = await http.post("/v1/endpoints", json=endpoint())
    refused(third, 422, "keeps 2 endpoints", "INFERCOST_MAX_ENDPOINTS=2")
    # Another team is counted on its own.
    other: TeamClient = await new_team()
    async with httpx.AsyncClient(
        base_url=str(http.base_url), headers={"Authorization": f"Bearer {other.key}"}
    ) as them:
        assert (await them.post("/v1/endpoints", json=endpoint())).status_code == 201
    assert (await http.delete(f"/v1/endpoints/{first.json()['id']}")).status_code == 204
    assert (await http.post("/v1/endpoints", json=endpoint())).status_code == 201


async def test_tags_are_capped_in_count_and_length(http: httpx.AsyncClient) -> None:
    many = await http.post("/v1/endpoints", json=endpoint(tags={f"k{i}": "v" for i in range(4)}))
    refused(many, 422, "4 tags", "INFERCOST_MAX_TAGS")
    long = await http.post("/v1/endpoints", json=endpoint(tags={"team": "x" * 11}))
    refused(long, 422, "11 characters", "INFERCOST_MAX_TAG_CHARS")
    fine = await http.post("/v1/endpoints", json=endpoint(tags={"a": "x" * 10, "b": "", "c": "y"}))
    assert fine.status_code == 201, fine.text
    patched = await http.patch(
        f"/v1/endpoints/{fine.json()['id']}", json={"tags": {f"k{i}": "v" for i in range(5)}}
    )
    refused(patched, 422, "5 tags", "INFERCOST_MAX_TAGS")


async def test_datasets_are_capped(http: httpx.AsyncClient) -> None:
    ndjson = {"Content-Type": "application/x-ndjson"}
    first = await http.post("/v1/datasets", content=b'{"prompt": "one"}\n', headers=ndjson)
    assert first.status_code == 201, first.text
    # The same bytes again are the stored dataset, not a new one.
    again = await http.post("/v1/datasets", content=b'{"prompt": "one"}\n', headers=ndjson)
    assert again.status_code == 200, again.text
    second = await http.post("/v1/datasets", content=b'{"prompt": "two"}\n', headers=ndjson)
    refused(second, 422, "keeps 1 datasets", "INFERCOST_MAX_DATASETS=1")


async def test_schedules_are_capped(http: httpx.AsyncClient) -> None:
    target = (await http.post("/v1/endpoints", json=endpoint())).json()
    body = {
        "job": {
            "endpoint_id": target["id"],
            "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
            "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 3},
        },
        "when": {"interval_s": 3600},
        "enabled": False,
    }
    first = await http.post("/v1/schedules", json={**body, "name": "one"})
    assert first.status_code == 201, first.text
    second = await http.post("/v1/schedules", json={**body, "name": "two"})
    refused(second, 422, "keeps 1 schedules", "INFERCOST_MAX_SCHEDULES=1")


async def test_traffic_logs_are_capped_in_count_and_size(http: httpx.AsyncClient) -> None:
    small = log(20)
    assert len(small) < 4096
    first = await http.post("/v1/traffic", content=small, params={"format": "infercost"})
    assert first.status_code == 201, first.text
    other = log(21)
    second = await http.post(
        "/v1/traffic", content=other, params={"format": "infercost", "name": "two"}
    )
    refused(second, 422, "keeps 1 traffic logs", "INFERCOST_MAX_TRAFFIC_LOGS=1")
    assert (await http.delete(f"/v1/traffic/{first.json()['id']}")).status_code == 204
    big = log(400)
    assert len(big) > 4096
    too_big = await http.post("/v1/traffic", content=big, params={"format": "infercost"})
    refused(too_big, 413, "INFERCOST_MAX_TRAFFIC_BYTES")


def log(n: int) -> bytes:
    """A request log of `n` requests a second apart."""
    return infercost_csv([float(i) for i in range(n)], [(100, 20)] * n)


def test_the_defaults() -> None:
    settings = Settings.from_env({})
    assert settings.max_traffic_bytes >= 256 * 1024 * 1024
    assert (settings.max_endpoints, settings.max_datasets, settings.max_schedules) == (200, 100, 50)
    assert (settings.max_traffic_logs, settings.max_tags, settings.max_tag_chars) == (50, 32, 256)
