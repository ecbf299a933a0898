"""Ids in the API are whole: every route with an id in its path answers a prefix (what the
CLI accepts and resolves itself) with a 404 problem that says so, never "no route"."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.conftest import TeamClient

pytestmark = pytest.mark.integration

PREFIX = "8b58da70"


def _id_routes(schema: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(method, path with the prefix in place of its first id, that id's parameter) for
    every operation whose path holds a UUID parameter."""
    found = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            params = {
                p["name"]: p["schema"]
                for p in operation.get("parameters", [])
                if p.get("in") == "path"
            }
            ids = [n for n, s in params.items() if s.get("format") == "uuid"]
            if not ids:
                continue
            concrete = path
            for name in params:
                value = PREFIX if name == ids[0] else "8b58da70-87c4-4a5e-9d3a-1f0e2b3c4d5e"
                concrete = concrete.replace("{" + name + "}", value if name in ids else "x.png")
            found.append((method.upper(), concrete, ids[0]))
    return found


async def test_every_id_route_says_ids_are_whole(team: TeamClient) -> None:
    schema = (await team.http.get("/schema/openapi.json")).json()
    routes = _id_routes(schema)
    assert len(routes) >= 20, routes  # jobs, runs, endpoints, schedules, webhooks, shares, ...
    for method, path, param in routes:
        response = await team.http.request(method, path, json={} if method != "GET" else None)
        where = f"{method} {path}"
        assert response.status_code == 404, (where, response.status_code, response.text)
        assert response.headers["content-type"].startswith("application/problem+json"), where
        detail = response.json()["detail"]
        kind = param.removesuffix("_id")
        assert detail.startswith(f"'{PREFIX}' is not a {kind} id: ids in the API are whole"), (
            where,
            detail,
        )
        assert "no route" not in detail


async def test_a_path_no_route_fits_still_says_no_route(team: TeamClient) -> None:
    response = await team.http.get("/v1/nothing-here/8b58da70")
    assert response.status_code == 404
    assert response.json()["detail"].startswith("no route GET /v1/nothing-here/8b58da70")
    listing = await team.http.get(f"/v1/jobs/{PREFIX}")
    assert re.search(r"as GET /v1/jobs lists them", listing.json()["detail"])


async def test_the_admin_routes_name_their_ids(admin: httpx.AsyncClient) -> None:
    response = await admin.post(f"/v1/teams/{PREFIX}/keys", json={})
    assert response.status_code == 404, response.text
    assert response.json()["detail"].startswith(f"'{PREFIX}' is not a team id")
    assert "as GET /v1/teams lists them" in response.json()["detail"]
    keys = await admin.delete(f"/v1/teams/8b58da70-87c4-4a5e-9d3a-1f0e2b3c4d5e/keys/{PREFIX}")
    assert "as GET /v1/teams/{team_id}/keys lists them" in keys.json()["detail"]
