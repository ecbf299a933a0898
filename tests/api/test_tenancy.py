"""Keys and teams: every row is scoped to its team; a missing or wrong key gets 401."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import Api, TeamClient, insert_finished_run

pytestmark = pytest.mark.integration


async def test_other_teams_rows_are_invisible(
    new_team: Callable[..., Any], api_server: Api, db: Any
) -> None:
    a: TeamClient = await new_team()
    b: TeamClient = await new_team()
    endpoint = await a.create_endpoint(base_url="http://127.0.0.1:1/v1")
    # A stored job and run of team A's, so their paths are real without any worker.
    job_id, run_id = await insert_finished_run(db, a.team_id, endpoint["id"])
    job = {"id": job_id}
    paths = [
        f"/v1/endpoints/{endpoint['id']}",
        f"/v1/jobs/{job['id']}",
        f"/v1/jobs/{job['id']}/runs",
        f"/v1/runs/{run_id}",
        f"/v1/runs/{run_id}/requests",
    ]
    for path in paths:
        assert (await a.http.get(path)).status_code == 200, path
        theirs = await b.http.get(path)
        assert theirs.status_code == 404, path
        assert theirs.headers["content-type"].startswith("application/problem+json")
    assert (await b.http.post(f"/v1/jobs/{job['id']}/cancel")).status_code == 404
    assert (
        await b.http.patch(f"/v1/endpoints/{endpoint['id']}", json={"gpu_count": 2})
    ).status_code == 404
    assert (await b.http.delete(f"/v1/endpoints/{endpoint['id']}")).status_code == 404
    assert (await b.http.get("/v1/jobs")).json()["total"] == 0
    assert (await b.http.get("/v1/endpoints")).json()["total"] == 0
    # B cannot submit against A's endpoint either.
    stolen = await b.submit(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 4}},
            "load": {"mode": "concurrency", "levels": [1]},
        }
    )
    assert stolen.status_code == 422
    assert "endpoint_id" in stolen.json()["detail"]


@pytest.mark.parametrize(
    "header", [None, "Bearer", "Bearer nope", "Basic abc", "Bearer ic_000000000000_x"]
)
async def test_missing_or_unknown_key_is_401(api_server: Api, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    async with httpx.AsyncClient(base_url=api_server.url) as client:
        response = await client.get("/v1/jobs", headers=headers)
    assert response.status_code == 401
    body = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    assert body["status"] == 401 and body["detail"]
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_revoked_key_stops_working(admin: httpx.AsyncClient, team: TeamClient) -> None:
    assert (await team.http.get("/v1/endpoints")).status_code == 200
    keys = (await admin.get(f"/v1/teams/{team.team_id}/keys")).json()
    assert len(keys) == 1 and "key" not in keys[0]
    assert team.key.split("_")[1] == keys[0]["prefix"]
    revoked = await admin.delete(f"/v1/teams/{team.team_id}/keys/{keys[0]['id']}")
    assert revoked.status_code == 204
    assert (await team.http.get("/v1/endpoints")).status_code == 401


async def test_team_routes_need_the_admin_token(team: TeamClient, api_server: Api) -> None:
    response = await team.http.post("/v1/teams", json={"name": "sneaky"})
    assert response.status_code == 403
    async with httpx.AsyncClient(base_url=api_server.url) as anonymous:
        assert (await anonymous.post("/v1/teams", json={"name": "x"})).status_code == 401
    # ...and the admin token is not a team key.
    async with httpx.AsyncClient(
        base_url=api_server.url, headers={"Authorization": f"Bearer {api_server.admin_token}"}
    ) as admin_client:
        response = await admin_client.get("/v1/jobs")
    assert response.status_code == 403
    assert "team" in response.json()["detail"]


async def test_duplicate_team_name_conflicts(admin: httpx.AsyncClient) -> None:
    assert (await admin.post("/v1/teams", json={"name": "dup-team"})).status_code == 201
    again = await admin.post("/v1/teams", json={"name": "dup-team"})
    assert again.status_code == 409
    assert "dup-team" in again.json()["detail"]


async def test_health_needs_no_key(api_server: Api) -> None:
    async with httpx.AsyncClient(base_url=api_server.url) as client:
        response = await client.get("/health")
        assert response.status_code == 200 and response.json()["status"] == "ok"
        schema = await client.get("/schema/openapi.json")
        assert schema.status_code == 200
        assert "/v1/jobs" in schema.json()["paths"]
