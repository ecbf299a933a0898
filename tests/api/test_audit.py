"""The audit log (GET /v1/audit): every change to a team's endpoints, prices, jobs, keys,
shares, schedules, webhooks, datasets, traffic logs and hardware is recorded with who made it
(the key, or the admin token), what and when; a team reads only its own, in pages, newest
first; a change refused leaves no event; no secret is ever kept."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from infercost.net.tls import tls_context
from tests.conftest import Api, TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

NDJSON = {"Content-Type": "application/x-ndjson"}
JOB = {
    "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
    "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 4},
}


async def _team(api_server: Api, admin: httpx.AsyncClient) -> tuple[TeamClient, dict[str, Any]]:
    """A fresh team made by the admin, and its key as created (id, prefix, secret)."""
    team = (await admin.post("/v1/teams", json={"name": f"audit-{uuid.uuid4().hex[:8]}"})).json()
    key = (await admin.post(f"/v1/teams/{team['id']}/keys", json={"name": "ci"})).json()
    http = httpx.AsyncClient(
        base_url=api_server.url,
        headers={"Authorization": f"Bearer {key['key']}"},
        timeout=30,
        verify=tls_context(),
    )
    return TeamClient(http=http, team_id=team["id"], key=key["key"]), key


async def _all(team: TeamClient, **params: Any) -> list[dict[str, Any]]:
    response = await team.http.get("/v1/audit", params={"limit": 200, **params})
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


async def test_every_change_is_recorded_with_who_and_when(
    api_server: Api, admin: httpx.AsyncClient, db: asyncpg.Connection
) -> None:
    started = datetime.now(UTC) - timedelta(seconds=1)
    team, key = await _team(api_server, admin)
    other, _ = await _team(api_server, admin)
    http = team.http
    try:
        endpoint = await team.create_endpoint(api_key="sk-very-secret")
        ok = await http.patch(f"/v1/endpoints/{endpoint['id']}", json={"api_key": "sk-new-one"})
        assert ok.status_code == 200
        price = await team.add_price()
        assert (await http.delete(f"/v1/prices/{price['id']}")).status_code == 200
        assert (await http.delete(f"/v1/prices/{price['id']}")).status_code == 409
        job_id, _ = await insert_finished_run(db, team.team_id, endpoint["id"])
        share = await http.post("/v1/shares", json={"page": "report", "job_ids": [job_id]})
        assert share.status_code == 201, share.text
        assert (await http.delete(f"/v1/shares/{share.json()['id']}")).status_code == 204
        assert (await http.delete(f"/v1/jobs/{job_id}")).status_code == 204
        hook = await http.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hook?token=abc"})
        assert hook.status_code == 201, hook.text
        assert (await http.delete(f"/v1/webhooks/{hook.json()['id']}")).status_code == 204
        schedule = await http.post(
            "/v1/schedules",
            json={"job": {"endpoint_id": endpoint["id"], **JOB}, "when": {"interval_s": 3600}},
        )
        assert schedule.status_code == 201, schedule.text
        assert (await http.delete(f"/v1/schedules/{schedule.json()['id']}")).status_code == 204
        dataset = await http.post(
            "/v1/datasets", content=b'{"prompt": "hello"}\n', headers=NDJSON, params={"name": "d"}
        )
        assert dataset.status_code == 201, dataset.text
        assert (await http.delete(f"/v1/datasets/{dataset.json()['id']}")).status_code == 204
        log = await http.post(
            "/v1/traffic",
            content=b"TIMESTAMP,ContextTokens,GeneratedTokens\n"
            b"2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n",
            params={"format": "azure", "name": "t"},
        )
        assert log.status_code == 201, log.text
        assert (await http.delete(f"/v1/traffic/{log.json()['id']}")).status_code == 204
        assert (await http.delete(f"/v1/endpoints/{endpoint['id']}")).status_code == 204
        revoked = await admin.delete(f"/v1/teams/{team.team_id}/keys/{key['id']}")
        assert revoked.status_code == 204

        # Refused changes leave nothing: withdrawing twice (409), another team's price (404).
        assert (await admin.get(f"/v1/teams/{team.team_id}/keys")).json()[0]["revoked_at"]
        assert (await other.http.delete(f"/v1/prices/{price['id']}")).status_code == 404
    finally:
        await http.aclose()

    rows = await db.fetch(
        "SELECT * FROM audit_events WHERE team_id = $1 ORDER BY at, id", uuid.UUID(team.team_id)
    )
    actions = [r["action"] for r in rows]
    assert actions == [
        "team.create",
        "key.create",
        "endpoint.create",
        "endpoint.update",
        "price.create",
        "price.withdraw",
        "share.create",
        "share.revoke",
        "job.delete",
        "webhook.create",
        "webhook.delete",
        "schedule.create",
        "schedule.delete",
        "dataset.create",
        "dataset.delete",
        "traffic.create",
        "traffic.delete",
        "endpoint.delete",
        "key.revoke",
    ]
    by_key = [r for r in rows if r["actor"] != "admin token"]
    assert {r["actor"] for r in by_key} == {f"key ic_{key['prefix']}"}
    assert {r["key_id"] for r in by_key} == {uuid.UUID(key["id"])}
    assert {r["action"] for r in rows if r["actor"] == "admin token"} == {
        "team.create",
        "key.create",
        "key.revoke",
    }
    assert all(started <= r["at"] <= datetime.now(UTC) for r in rows)
    withdraw = rows[actions.index("price.withdraw")]
    assert withdraw["target_id"] == uuid.UUID(price["id"])
    assert "withdrew the on-demand price for H200-SXM from 'acme-cloud'" in withdraw["summary"]
    patched = rows[actions.index("endpoint.update")]
    assert patched["summary"].endswith(": api_key")
    # No secret is kept: the endpoint's credential, the webhook's query, the share's token.
    text = " ".join(f"{r['summary']} {r['detail']}" for r in rows)
    assert "sk-very-secret" not in text and "sk-new-one" not in text
    assert "token=abc" not in text and "http://127.0.0.1:9" in text
    assert share.json()["token"] not in text
    # The other team made nothing but its own team and key.
    assert [e["action"] for e in await _all(other)] == ["key.create", "team.create"]


async def test_the_log_is_read_in_pages_scoped_and_filtered(
    api_server: Api, admin: httpx.AsyncClient
) -> None:
    team, _ = await _team(api_server, admin)
    other, _ = await _team(api_server, admin)
    try:
        prices = [
            await team.add_price(usd_per_gpu_hour=2.0 + i, provider=f"p{i}") for i in range(3)
        ]
        await team.http.delete(f"/v1/prices/{prices[1]['id']}")
        everything = await _all(team)
        # Newest first: the withdrawal, then the three additions, then the admin's two.
        assert [e["action"] for e in everything] == [
            "price.withdraw",
            "price.create",
            "price.create",
            "price.create",
            "key.create",
            "team.create",
        ]
        assert [e["detail"].get("provider") for e in everything[:4]] == ["p1", "p2", "p1", "p0"]
        page = (await team.http.get("/v1/audit", params={"limit": 2, "offset": 1})).json()
        assert page["total"] == 6 and page["limit"] == 2 and page["offset"] == 1
        assert [e["id"] for e in page["items"]] == [e["id"] for e in everything[1:3]]
        assert len(await _all(team, action="price")) == 4
        assert len(await _all(team, action="price.create")) == 3
        assert [e["action"] for e in await _all(team, target_id=prices[1]["id"])] == [
            "price.withdraw",
            "price.create",
        ]
        future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        assert await _all(team, since=future) == []
        naive = await team.http.get("/v1/audit", params={"since": "2026-12-01T00:00:00"})
        assert naive.status_code == 422 and "time zone" in naive.json()["detail"]
        # Another team sees none of it; the admin token is not a team's key.
        assert all(e["target_id"] != prices[0]["id"] for e in await _all(other))
        assert (await admin.get("/v1/audit")).status_code == 403
    finally:
        await team.http.aclose()
        await other.http.aclose()
