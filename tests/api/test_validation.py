"""Bad input gets a problem+json that names the field and what is allowed; nothing is queued."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import TeamClient

pytestmark = pytest.mark.integration


def body(endpoint_id: str, /, **changes: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 4}},
        "load": {"mode": "concurrency", "levels": [1, 2], "requests_per_level": 10},
    }
    for path, value in changes.items():
        node = job
        *parents, leaf = path.split("__")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return job


CASES = [
    ({"load__levels": [-1]}, "load.levels[0]", ">= 0.001"),
    ({"load__levels": []}, "load.levels", "length >= 1"),
    ({"load__levels": "many"}, "load.levels", "array"),
    ({"load__mode": "zigzag"}, "load.mode", "concurrency"),
    ({"load__requests_per_level": "ten"}, "load.requests_per_level", "int"),
    ({"load__warmup_requests": -3}, "load.warmup_requests", ">= 0"),
    ({"workload__output_tokens": {"mean": 0}}, "workload.output_tokens.mean", "> 0"),
    ({"workload__input_tokens": {"mean": 8, "min": 10, "max": 5}}, "workload.input_tokens", "min"),
    ({"slo": {"ttft_ms": {"p42": 100}}}, "slo.ttft_ms", "p95"),
    ({"slo": {"speed": {"p95": 100}}}, "slo", "ttft_ms"),
    (
        {"load": {"mode": "concurrency", "levels": [1], "concurency": 4}},
        "load",
        "requests_per_level",
    ),
    ({"endpoint_id": "not-a-uuid"}, "endpoint_id", "uuid"),
    ({"endpoint_id": "00000000-0000-0000-0000-000000000000"}, "endpoint_id", "no endpoint"),
    ({"load__levels": [1, 100000]}, "load.levels", "limit"),
]


@pytest.mark.parametrize(("changes", "field", "hint"), CASES)
async def test_invalid_job_bodies(
    team: TeamClient, changes: dict[str, Any], field: str, hint: str
) -> None:
    endpoint = await team.create_endpoint()
    response = await team.submit(body(endpoint["id"], **changes))
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == response.status_code
    assert field in problem["detail"], problem
    assert hint.lower() in problem["detail"].lower(), problem
    assert (await team.http.get("/v1/jobs")).json()["total"] == 0, "an invalid job was stored"


async def test_unknown_fields_are_rejected(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    job = body(endpoint["id"])
    job["load"]["concurency"] = 4
    response = await team.submit(job)
    assert response.status_code == 422
    assert "concurency" in response.json()["detail"]


async def test_malformed_json(team: TeamClient) -> None:
    response = await team.http.post(
        "/v1/jobs", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")


async def test_endpoint_validation(team: TeamClient) -> None:
    bad_url = await team.http.post(
        "/v1/endpoints", json={"name": "x", "base_url": "ftp://host/v1", "model": "m"}
    )
    assert bad_url.status_code == 422
    assert "base_url" in bad_url.json()["detail"]
    bad_hw = await team.http.post(
        "/v1/endpoints",
        json={"name": "y", "base_url": "http://h/v1", "model": "m", "hardware": "TPU-v9"},
    )
    assert bad_hw.status_code == 422
    assert "TPU-v9" in bad_hw.json()["detail"]
    bad_api = await team.http.post(
        "/v1/endpoints", json={"name": "z", "base_url": "http://h/v1", "model": "m", "api": "grpc"}
    )
    assert bad_api.status_code == 422
    assert "openai-chat" in bad_api.json()["detail"]
