"""Webhooks over the API: create (the secret shown once, stored encrypted), list, read,
delete; bad URLs and events refused; other teams see nothing; a cancel is announced."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest
from cryptography.fernet import Fernet

from tests.conftest import TeamClient

pytestmark = pytest.mark.integration

#: Nothing listens on the discard port: a delivery queued by these tests fails fast.
RECEIVER = "http://127.0.0.1:9/hooks"


async def create(team: TeamClient, **body: Any) -> dict[str, Any]:
    response = await team.http.post("/v1/webhooks", json={"url": RECEIVER, **body})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_create_list_read_delete(
    team: TeamClient, db: asyncpg.Connection, service_env: dict[str, str]
) -> None:
    created = await create(team, description="portal")
    assert created["url"] == RECEIVER and created["description"] == "portal"
    assert created["events"] == [
        "deployment.degraded",
        "deployment.recovered",
        "job.finished",
        "regression.detected",
    ]
    secret = created.pop("secret")
    assert secret.startswith("whsec_") and len(secret) > 40

    # Stored encrypted with the server's key, never in the clear.
    stored = await db.fetchval(
        "SELECT secret_encrypted FROM webhooks WHERE id = $1", uuid.UUID(created["id"])
    )
    assert secret.encode() not in stored
    vault = Fernet(service_env["INFERCOST_SECRET_KEYS"].split(",")[0].encode())
    assert vault.decrypt(stored).decode() == secret

    # Never shown again: not when read, not when listed.
    read = await team.http.get(f"/v1/webhooks/{created['id']}")
    assert read.status_code == 200 and read.json() == created
    only_regressions = await create(team, events=["regression.detected"])
    page = (await team.http.get("/v1/webhooks")).json()
    assert page["total"] == 2
    assert [w["id"] for w in page["items"]] == [only_regressions["id"], created["id"]]
    assert all("secret" not in w for w in page["items"])
    assert page["items"][0]["events"] == ["regression.detected"]

    assert (await team.http.delete(f"/v1/webhooks/{created['id']}")).status_code == 204
    gone = await team.http.get(f"/v1/webhooks/{created['id']}")
    assert gone.status_code == 404 and "GET /v1/webhooks" in gone.json()["detail"]
    assert (await team.http.get("/v1/webhooks")).json()["total"] == 1


@pytest.mark.parametrize(
    ("body", "status", "field", "hint"),
    [
        ({"url": "ftp://example.com/hook"}, 422, "url", "http(s) URL"),
        ({"url": "not a url"}, 422, "url", "http(s) URL"),
        ({"url": "http:///nohost"}, 422, "url", "http(s) URL"),
        # URLs the courier could never send to: a port that is not a number, a broken IPv6
        # literal, a host name with an empty label.
        ({"url": "http://portal:abc/hook"}, 422, "url", "http(s) URL"),
        ({"url": "http://[::1/hook"}, 422, "url", "http(s) URL"),
        ({"url": "http://portal..example/hook"}, 422, "url", "http(s) URL"),
        ({"url": RECEIVER, "events": ["job.started"]}, 422, "events[0]", "job.finished"),
        ({"url": RECEIVER, "events": []}, 422, "events", "length >= 1"),
        ({"url": RECEIVER, "secret": "mine"}, 422, "body", "unknown field 'secret'"),
        ({"events": ["job.finished"]}, 422, "body", "url"),
    ],
)
async def test_invalid_bodies(
    team: TeamClient, body: dict[str, Any], status: int, field: str, hint: str
) -> None:
    response = await team.http.post("/v1/webhooks", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["errors"][0]["field"] == field, problem
    assert hint in problem["detail"], problem
    assert (await team.http.get("/v1/webhooks")).json()["total"] == 0


async def test_other_teams_webhooks_are_invisible(new_team: Callable[..., Any]) -> None:
    a: TeamClient = await new_team()
    b: TeamClient = await new_team()
    webhook = await create(a)
    for path in (f"/v1/webhooks/{webhook['id']}", f"/v1/webhooks/{webhook['id']}/deliveries"):
        assert (await a.http.get(path)).status_code == 200, path
        theirs = await b.http.get(path)
        assert theirs.status_code == 404, path
        assert theirs.headers["content-type"].startswith("application/problem+json")
    assert (await b.http.post(f"/v1/webhooks/{webhook['id']}/ping")).status_code == 404
    assert (await b.http.delete(f"/v1/webhooks/{webhook['id']}")).status_code == 404
    assert (await b.http.get("/v1/webhooks")).json()["total"] == 0
    # Still there for its own team.
    assert (await a.http.get(f"/v1/webhooks/{webhook['id']}")).status_code == 200


async def test_ping_is_queued_in_the_delivery_log(team: TeamClient) -> None:
    webhook = await create(team, events=["regression.detected"])
    response = await team.http.post(f"/v1/webhooks/{webhook['id']}/ping")
    assert response.status_code == 202, response.text
    ping = response.json()
    assert ping["event"] == "ping" and ping["status"] == "pending"
    assert ping["payload"]["id"] == ping["id"] and ping["payload"]["event"] == "ping"
    assert ping["payload"]["data"]["webhook_id"] == webhook["id"]
    log = (await team.http.get(f"/v1/webhooks/{webhook['id']}/deliveries")).json()
    assert log["total"] == 1 and log["items"][0]["id"] == ping["id"]


async def test_cancel_is_announced_to_job_finished_subscribers(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint()
    jobs_hook = await create(team, events=["job.finished"])
    regressions_hook = await create(team, events=["regression.detected"])
    # A queued job written straight to the database: nothing is enqueued, so no worker
    # can start it and race the cancel.
    job_id = await db.fetchval(
        "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, progress_done,"
        " progress_total, created_at) VALUES (gen_random_uuid(), $1, $2, 'queued', '{}',"
        ' \'{"mode": "concurrency"}\', 0, 5, now()) RETURNING id',
        uuid.UUID(team.team_id),
        uuid.UUID(endpoint["id"]),
    )
    cancelled = await team.http.post(f"/v1/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text

    log = (await team.http.get(f"/v1/webhooks/{jobs_hook['id']}/deliveries")).json()
    assert log["total"] == 1
    delivery = log["items"][0]
    assert delivery["event"] == "job.finished"
    data = delivery["payload"]["data"]
    assert data["job"]["id"] == str(job_id) and data["job"]["status"] == "cancelled"
    assert data["job"]["error"] == "cancelled by the user"
    assert data["job"]["endpoint_id"] == endpoint["id"]
    assert data["job"]["finished_at"] is not None and data["runs"] == []
    others = (await team.http.get(f"/v1/webhooks/{regressions_hook['id']}/deliveries")).json()
    assert others["total"] == 0
    # A second cancel is refused and announces nothing more.
    assert (await team.http.post(f"/v1/jobs/{job_id}/cancel")).status_code == 409
    log = (await team.http.get(f"/v1/webhooks/{jobs_hook['id']}/deliveries")).json()
    assert log["total"] == 1
