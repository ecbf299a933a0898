"""Tenancy over the whole route table: for every route with an id in its path, team B's
key gets 404 for every method on team A's resource (never 200, 403 or 5xx), while A's own
reads answer 200. Generated from the app's routes, so a new `{id}` route that this table
cannot exercise fails the test until someone says how to make its resource."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest

from api.app import create_app
from tests.conftest import Api, TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

# Routes whose path ids name no team's row: the admin's team routes (a team key gets 403
# there, checked below), a shared preset by name, the docs, and a share link's page (its
# token, not a key, names the team: tests/integration/test_pages_access.py).
NOT_TEAM_SCOPED = {
    "/v1/teams/{team_id}/keys",
    "/v1/teams/{team_id}/keys/{key_id}",
    "/v1/presets/{name}",
    "/docs/assets/{file_path}",
    "/docs/{page}",
    "/schema/{path}",
    "/shared/{token}",
}

# What the other team sends with a method that takes a body: valid on A's resource, so a
# 404 is the lookup's answer, not validation's.
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("PATCH", "/v1/endpoints/{endpoint_id}"): {"gpu_count": 2},
    ("PATCH", "/v1/schedules/{schedule_id}"): {"enabled": False},
}

JOB = {
    "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
    "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 3},
}


def id_routes() -> dict[str, set[str]]:
    """Every path of the app with a path parameter, as `{name}` templates, and its methods
    (HEAD and OPTIONS left out: Litestar answers them itself)."""
    app = create_app()
    routes: dict[str, set[str]] = {}
    for route in app.routes:
        if "{" not in route.path:
            continue
        path = re.sub(r"\{(\w+):[^}]+\}", r"{\1}", route.path)
        methods = set(getattr(route, "methods", set())) - {"HEAD", "OPTIONS"}
        routes.setdefault(path, set()).update(methods)
    return routes


async def make_resources(a: TeamClient, db: asyncpg.Connection) -> dict[str, str]:
    """One of each of team A's resources, by path parameter name."""
    endpoint = await a.create_endpoint(base_url="http://127.0.0.1:9/v1")
    job_id, run_id = await insert_finished_run(db, a.team_id, endpoint["id"])
    dataset = await a.http.post(
        "/v1/datasets",
        content=json.dumps({"prompt": "tenancy"}) + "\n",
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert dataset.status_code == 201, dataset.text
    hook = await a.http.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hook"})
    assert hook.status_code == 201, hook.text
    schedule = await a.http.post(
        "/v1/schedules",
        json={
            "job": {"endpoint_id": endpoint["id"], **JOB},
            "when": {"interval_s": 3600},
            "enabled": False,
        },
    )
    assert schedule.status_code == 201, schedule.text
    hardware = await a.http.post(
        "/v1/hardware",
        json={
            "name": f"T{uuid.uuid4().hex[:8]}",
            "vendor": "Acme",
            "memory_gb": 80.0,
            "memory_bandwidth_gbps": 3000.0,
            "bf16_tflops": 900.0,
            "power_w": 700.0,
        },
    )
    assert hardware.status_code == 201, hardware.text
    traffic = await a.http.post(
        "/v1/traffic",
        params={"format": "infercost"},
        content=b"timestamp,input_tokens,output_tokens\n0,10,2\n61.5,12,3\n",
    )
    assert traffic.status_code == 201, traffic.text
    share = await a.http.post("/v1/shares", json={"page": "report", "job_ids": [job_id]})
    assert share.status_code == 201, share.text
    price = await a.add_price()
    return {
        "endpoint_id": endpoint["id"],
        "job_id": job_id,
        "run_id": run_id,
        "dataset_id": dataset.json()["id"],
        "webhook_id": hook.json()["id"],
        "schedule_id": schedule.json()["id"],
        "hardware_id": hardware.json()["id"],
        "traffic_id": traffic.json()["id"],
        "share_id": share.json()["id"],
        "price_id": price["id"],
        # A chart every finished job has (it says why when there is no data).
        "file_name": "throughput.svg",
    }


def fill(template: str, ids: dict[str, str]) -> str:
    """The template with A's ids; KeyError names a parameter the table cannot make."""
    return re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], template)


async def test_every_id_route_hides_other_teams_rows(
    new_team: Callable[..., Any], api_server: Api, db: asyncpg.Connection
) -> None:
    a: TeamClient = await new_team()
    b: TeamClient = await new_team()
    ids = await make_resources(a, db)
    routes = id_routes()
    # A new `{id}` route whose parameter no resource above provides fails here, by name.
    scoped = {p: m for p, m in routes.items() if p not in NOT_TEAM_SCOPED}
    unknown = {
        p: sorted(set(re.findall(r"\{(\w+)\}", p)) - set(ids))
        for p in scoped
        if set(re.findall(r"\{(\w+)\}", p)) - set(ids)
    }
    assert not unknown, f"no way to make these routes' resources: {unknown}"
    assert set(routes) >= NOT_TEAM_SCOPED, "an exempt route is gone: drop it from the table"
    # The routes the issue names are all there (the table is not quietly empty).
    assert len(scoped) >= 20 and "/v1/runs/{run_id}/telemetry" in scoped

    tried: list[tuple[str, str]] = []
    # Reads first, so A's own reads still see the rows; then state changes, DELETE last.
    order = {"GET": 0, "POST": 1, "PATCH": 2, "PUT": 3, "DELETE": 4}
    for path, methods in sorted(scoped.items()):
        url = fill(path, ids)
        for method in sorted(methods, key=order.__getitem__):
            body = BODIES.get((method, path))
            theirs = await b.http.request(method, url, json=body)
            assert theirs.status_code == 404, (method, url, theirs.status_code, theirs.text)
            assert theirs.headers["content-type"].startswith("application/problem+json")
            if method == "GET":
                mine = await a.http.get(url)
                assert mine.status_code == 200, (url, mine.status_code, mine.text)
            tried.append((method, path))
    # Every method of every scoped route was sent by B.
    assert len(tried) == sum(len(m) for m in scoped.values())
    # B's DELETEs and PATCHes changed nothing of A's.
    assert (await a.http.get(f"/v1/endpoints/{ids['endpoint_id']}")).json()["gpu_count"] == 1
    price = (await a.http.get(f"/v1/prices/{ids['price_id']}")).json()
    assert price["withdrawn_at"] is None
    for name in ("dataset_id", "webhook_id", "schedule_id"):
        kind = name.removesuffix("_id") + "s"
        assert (await a.http.get(f"/v1/{kind}/{ids[name]}")).status_code == 200, name
    # The team routes are the admin's: B's team key gets 403 there, for A's team too.
    keys = await b.http.get(f"/v1/teams/{a.team_id}/keys")
    assert keys.status_code == 403, keys.text
